// tarnn complete: occluded images completed K times each, the paper's Figure 3 (any mask).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>

#include "options.h"

namespace tarnn::cli {

namespace {

struct CompleteArgs {
  std::string model;
  RunArgs run;
  std::string images;
  std::optional<std::string> index; // unset: the first 16 images (or all, if fewer)
  MaskSpec mask;
  int64_t keep_rows = 0, keep = 0; // copied into mask when given
  int samples = kDefaultSamples;
  uint64_t seed = kDefaultSeed;
  double temperature = 1.0; // as given (docs/SPEC.md section 2)
  GridLayout grid;          // -o: --padding, --pad-value, --scale
  std::string out, out_dir;
  ResumeArgs restart; // --resume, --overwrite (of --out-dir)
  Report report;
};

void check_completions(int64_t images, int samples) {
  if (images > kMaxCompletions / samples)
    throw UsageError(std::to_string(images) + " images x " + std::to_string(samples) +
                     " samples is over " + std::to_string(kMaxCompletions) +
                     " completions: split the job with --index");
}

// Every flag's value, before the model is loaded (usage errors: exit 2). What needs the model or
// the file is checked once they are read, and is a usage error too: --keep-rows and --keep against
// the model's size, --index against the file's images.
void check_flags(const CompleteArgs &a) {
  if (a.out.empty() && a.out_dir.empty() && !a.report.json && a.report.json_file.empty())
    throw UsageError("name an output: -o GRID.png, --out-dir FOLDER, --json or --json-file FILE");
  if (!a.out.empty())
    require_extension("-o", a.out, ".png", "; the completion grid is a PNG");
  for (const auto &[flag, value] :
       {std::pair{"--keep-rows", a.mask.keep_rows}, {"--keep", a.mask.keep}})
    if (value && *value < 0)
      throw UsageError(std::string(flag) + " must be at least 0 (got " + std::to_string(*value) +
                       ")");
  if (a.index)
    check_completions(as_usage([&] { return index_list_size(*a.index); }), a.samples);
  a.restart.check(!a.out_dir.empty(), "--out-dir");
  a.run.options();
}

// The known bytes as runs [first, count] of raster positions, for the resume record: the mask,
// exactly, in a few numbers (the top half of an MNIST digit is [[0, 392]]).
nlohmann::json known_runs(const std::vector<uint8_t> &known) {
  nlohmann::json runs = nlohmann::json::array();
  for (size_t i = 0; i < known.size(); ++i)
    if (known[i] && (i == 0 || !known[i - 1]))
      runs.push_back({i, 1});
    else if (known[i])
      runs.back()[1] = runs.back()[1].get<size_t>() + 1;
  return runs;
}

// --out-dir's PNGs beside their resume record, and, for -o, every completion for the grid: those
// an earlier run wrote, read back, then this run's. A resumed run starts at the record's count
// (whole images); an interrupted run's record is not written over unasked (--resume,
// --overwrite), and --resume of a finished run (no record, every PNG there) completes nothing.
struct CompleteOutputs {
  // --out-dir: removed again if the run leaves it empty (declared first: it outlives the sink's
  // lock and the record, which are in it)
  std::optional<OutputFolder> folder;
  std::unique_ptr<ImageSink> each; // completion k of image index[i] as INDEX-K.png
  std::unique_ptr<ResumeRecord> record;
  bool grid;             // -o: `done` holds every completion
  ImageSet done;         // every completion so far, in order (for -o)
  int64_t start = 0;     // the file images whose completions an earlier run wrote
  bool finished = false; // --resume found every PNG there

  CompleteOutputs(const CompleteArgs &a, const std::string &model, const Config &c,
                  const std::vector<int64_t> &index, const std::vector<uint8_t> &known)
      : grid(!a.out.empty()), done{0, c.height, c.width, c.channels, {}} {
    const int64_t n = int64_t(index.size()), all = n * a.samples;
    if (grid)
      done.bytes.reserve(size_t(all) * done.bytes_per_image());
    if (a.out_dir.empty())
      return;
    folder.emplace(a.out_dir);
    const auto name = [&index, k = a.samples](int64_t i) {
      return completion_png_name(index[size_t(i / k)], int(i % k));
    };
    record = std::make_unique<ResumeRecord>(a.out_dir + "/.tarnn-complete.json",
                                            run_record(a, model, index, known, all).dump());
    a.restart.refuse_unasked_restart(*record, a.out_dir, all, "completions");
    if (a.restart.resume && !record->exists() && png_folder_is_whole(a.out_dir, all, name)) {
      finished = true, start = n;
      if (grid)
        add(png_folder_sink(a.out_dir, c.height, c.width, c.channels, name, all)->read_back(all));
      return;
    }
    const int64_t written = a.restart.resume ? record->load() : 0;
    if (written % a.samples != 0)
      throw Error(record->where() + ": counts " + std::to_string(written) +
                  " completions, not whole images of " + std::to_string(a.samples) +
                  ": not a record a run wrote; remove it (and the PNGs) to start again");
    start = written / a.samples;
    check_folder_space(a.out_dir, all - written);
    each = png_folder_sink(a.out_dir, c.height, c.width, c.channels, name, written);
    if (a.restart.overwrite) // the folder is locked (a running run is not touched): start over
      record->discard();
    record->verify(*each); // what was written before is still there, and unchanged
    if (grid)
      add(each->read_back(written));
  }

  // What a resume must match: the job's every input (a record without "temperature", as any run
  // before it existed wrote, means 1).
  static nlohmann::json run_record(const CompleteArgs &a, const std::string &model,
                                   const std::vector<int64_t> &index,
                                   const std::vector<uint8_t> &known, int64_t all) {
    nlohmann::json run{{"model", model},
                       {"images", a.images},
                       {"index", index},
                       {"known", known_runs(known)},
                       {"samples", a.samples},
                       {"seed", a.seed},
                       {"n", all},
                       {"out_dir", a.out_dir}};
    if (a.temperature != 1.0)
      run["temperature"] = a.temperature;
    return run;
  }

  // A batch of completions: to the folder, its record, and the grid's.
  void write(const ImageSet &batch) {
    if (each) {
      each->add(batch);
      record->add(batch);
    }
    if (grid)
      add(batch);
  }
  void finish() const {
    if (each)
      record->finish();
  }

private:
  void add(const ImageSet &batch) {
    done.bytes.insert(done.bytes.end(), batch.bytes.begin(), batch.bytes.end());
    done.count += batch.count;
  }
};

// The summary's line: what was done, or that --resume found it done.
std::string summary_line(const CompleteArgs &a, const CompleteOutputs &outputs, int64_t n,
                         const std::vector<uint8_t> &known, double secs, double rate) {
  char line[1024];
  if (outputs.finished) {
    std::snprintf(line, sizeof line, "%s: already complete (%s): nothing completed%s%s\n",
                  a.out_dir.c_str(), count_of(n * a.samples, "completion", "completions").c_str(),
                  a.out.empty() ? "" : "; the grid drawn from them -> ", a.out.c_str());
    return line;
  }
  std::string where;
  for (const std::string &o : {a.out, a.out_dir})
    if (!o.empty())
      where += (where.empty() ? " -> " : ", ") + o;
  std::snprintf(line, sizeof line, "%s x %s (%s) in %.2f s (%.2f completions/s)%s\n",
                count_of(n - outputs.start, "image", "images").c_str(),
                count_of(a.samples, "sample", "samples").c_str(), describe_mask(known).c_str(),
                secs, rate, where.c_str());
  return line;
}

// What a run completes: the file's images chosen by --index (the first 16 by default) and the
// known bytes of each (the mask); their flags' errors are usage errors.
struct Chosen {
  std::vector<int64_t> index;
  std::vector<uint8_t> known;
};
Chosen choose(const CompleteArgs &a, const Config &c, const ImageSet &images) {
  Chosen s;
  s.index = as_usage([&] {
    return parse_index_list(
        a.index.value_or("0-" + std::to_string(std::min<int64_t>(images.count, 16) - 1)),
        images.count);
  });
  // a mask PNG is a file (its errors exit 1); --keep-rows and --keep are flags
  s.known =
      a.mask.png.empty() ? as_usage([&] { return make_mask(a.mask, c); }) : make_mask(a.mask, c);
  check_completions(int64_t(s.index.size()), a.samples);
  return s;
}

// -o's grid, checked before any work: a PNG file that can be written, of a size it can have.
void check_grid_output(const CompleteArgs &a, const Config &c, int64_t n) {
  if (a.out.empty())
    return;
  check_output_file(a.out);
  const PictureSize picture =
      completion_grid_size(n, a.samples, c.height, c.width, c.channels, a.grid.padding);
  check_picture(picture.height, picture.width, picture.channels, a.grid.scale);
}

// The JSON of docs/JSON.md for a run that took `secs`.
nlohmann::json complete_json(const CompleteArgs &a, const std::string &model, const Engine &engine,
                             const Chosen &s, int64_t start, double secs, double rate) {
  nlohmann::json j = json_header("complete");
  j.update({{"model", model},
            {"images_file", a.images},
            {"index", s.index},
            {"samples", a.samples},
            {"seed", a.seed},
            {"temperature", a.temperature},
            {"known_bytes",
             std::count_if(s.known.begin(), s.known.end(), [](uint8_t k) { return k != 0; })},
            {"bytes_per_image", engine.config().bytes_per_image()},
            {"resumed_at", start * a.samples},
            {"seconds", secs},
            {"completions_per_second", rate},
            {"outputs", {{"grid", a.out}, {"out_dir", a.out_dir}}}});
  j.update(numerics_json(engine));
  return j;
}

int run_complete(const CompleteArgs &a) {
  check_flags(a);
  const std::string model = find_model(a.model);
  Engine engine(load_model(model), a.run.options());
  const Config &c = engine.config();
  const ImageSet images = read_images(a.images, c);
  const Chosen s = choose(a, c, images);
  const int64_t n = int64_t(s.index.size());
  // the run's clock, and TARNN_PROGRESS_SECONDS checked before any output is touched
  const ProgressBar bar = progress_bar(c.positions(), a.report.quiet, "completions");
  check_grid_output(a, c, n); // every output checked before any work
  CompleteOutputs outputs(a, model, c, s.index, s.known);
  if (!a.report.json_file.empty())
    check_output_file(a.report.json_file);
  // Batches of whole images (their `samples` completions each), each written (--out-dir) while
  // the next is computed; the grid, which holds them all, last: it exists only after a whole run.
  const int64_t images_per_batch =
      std::max<int64_t>(1, engine.batch_for(n * a.samples) / a.samples);
  const int64_t start = outputs.start, todo = (n - start) * a.samples;
  try {
    run_in_batches(
        n - start, images_per_batch, c.positions() * a.samples, bar.progress,
        [&](int64_t first, int64_t count, const Progress &p) {
          const auto from = s.index.begin() + start + first;
          return complete_images(engine, images, {from, from + count}, s.known, a.samples, a.seed,
                                 p, float(a.temperature));
        },
        [&](const ImageSet &batch) { outputs.write(batch); });
  } catch (const Interrupted &i) {
    return interrupted_exit({i.signal, (start + i.written) * a.samples, n * a.samples,
                             "completions", a.out_dir, !a.out_dir.empty(), !a.out.empty()});
  }
  if (!a.out.empty())
    write_grid_png(a.out,
                   completion_grid(images, s.index, s.known, outputs.done, a.samples,
                                   a.grid.padding, uint8_t(a.grid.pad_value)),
                   a.grid.scale);
  outputs.finish();
  // --resume of a finished run drew no bar: no last line of one
  const double secs = outputs.finished ? 0.0 : bar.finish();
  const double rate = secs > 0 ? double(todo) / secs : 0.0;
  const std::string line = summary_line(a, outputs, n, s.known, secs, rate);
  print_warnings(engine);
  a.report.emit(line, complete_json(a, model, engine, s, start, secs, rate));
  return 0;
}

} // namespace

Command add_complete(CLI::App &app) {
  auto a = std::make_shared<CompleteArgs>();
  CLI::App *cmd = app.add_subcommand("complete", "complete occluded images (the paper's Figure 3)");
  add_model_option(cmd, a->model, kDefaultModel);
  cmd->add_option("--images", a->images,
                  "IDX, .npy or PNG of the model's size and channels (not resized)")
      ->required();
  cmd->add_option_function<std::string>(
      "--index", [a](const std::string &s) { a->index = s; },
      "images of the file to complete: 3, 0-15, 0,5,9-12 (default: the first 16)");
  // no default shown: without any of the three the mask is the top half, not --keep-rows 0
  auto *rows = add_number<int64_t>(cmd, "--keep-rows", a->keep_rows,
                                   "keep the first R pixel rows, 0 keeps none (plain "
                                   "sampling); without --keep-rows, --keep or --mask: the top "
                                   "half (H/2 rows), as Figure 3",
                                   INT64_MIN + 1, INT64_MAX);
  auto *keep = add_number<int64_t>(cmd, "--keep", a->keep, "keep the first N bytes in raster order",
                                   INT64_MIN + 1, INT64_MAX);
  rows->default_str("");
  keep->default_str("");
  auto *mask = cmd->add_option("--mask", a->mask.png,
                               "PNG of the image's height x width: nonzero (white) = known, "
                               "zero (black) = generate; any pattern");
  rows->excludes(keep)->excludes(mask);
  keep->excludes(mask);
  add_number<int>(cmd, "--samples", a->samples, "completions per image", 1, kMaxSamples);
  add_number<uint64_t>(cmd, "--seed", a->seed, "seed (see the RNG rule below)", 0, UINT64_MAX);
  add_temperature_option(cmd, a->temperature);
  cmd->add_option("-o,--output", a->out,
                  "PNG grid: occluded | completions || original, a row per image");
  cmd->add_option("--out-dir", a->out_dir,
                  "each completion as INDEX-K.png (8-digit file index, sample k); give -o, "
                  "--out-dir, --json or --json-file, or several");
  add_resume_options(cmd, a->restart, "--out-dir");
  add_grid_options(cmd, a->grid, false);
  add_run_options(cmd, a->run);
  add_report_options(cmd, a->report);
  cmd->footer(
      "Known bytes are fed through the recurrence when their turn comes (teacher forcing), also\n"
      "after unknown ones, so any mask works; unknown bytes are sampled. Known bytes of every\n"
      "completion equal the input's exactly. p_0 is not modelled: an unknown p_0 is 0.\n"
      "A mask that keeps every byte from p_1 on is an error (nothing to complete); keeping\n"
      "nothing is plain sampling.\n"
      "RNG: completion k of file image i uses image index i * samples + k (docs/SPEC.md section\n"
      "3), so it is the same whatever --batch, --threads and the other images chosen.\n"
      "Grid, a row per image: occluded | completions, then after a light band the original.\n"
      "Grayscale models give an RGB grid, unknown pixels of the occluded image in dim red\n"
      "(120,0,0); RGB models show unknown bytes as a grey checkerboard.");
  return {cmd, [a, rows, keep] {
            CompleteArgs b = *a;
            if (rows->count())
              b.mask.keep_rows = b.keep_rows;
            if (keep->count())
              b.mask.keep = b.keep;
            return run_complete(b);
          }};
}

} // namespace tarnn::cli
