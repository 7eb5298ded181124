// tarnn sample: images pixel by pixel, streamed: each batch of images goes to the outputs as soon
// as it is done (--out-dir PNGs, a --npy array filled in order), so memory does not grow with -n;
// a grid (-o) collects what it shows. An interrupted run says how far it got and --resume goes on
// from there; --shard K/N takes one of N contiguous ranges of images.
#include <cstdio>
#include <memory>
#include <optional>

#include "options.h"

namespace tarnn::cli {

namespace {

struct SampleArgs {
  std::string model;
  RunArgs run;
  int64_t n = 64, first = 0;
  uint64_t seed = kDefaultSeed;
  double temperature = 1.0; // as given (docs/SPEC.md section 2)
  std::string out, out_dir, npy, shard;
  ResumeArgs restart; // --resume, --overwrite
  GridLayout grid;    // -o: --nrow (--cols), --padding, --pad-value, --scale
  Report report;
};

// --shard K/N: images [first + n K / N, first + n (K + 1) / N) of the run.
void apply_shard(SampleArgs &a) {
  int64_t k = 0, of = 0;
  char tail = 0;
  if (std::sscanf(a.shard.c_str(), "%ld/%ld%c", &k, &of, &tail) != 2 || of < 1 || k < 0 || k >= of)
    throw UsageError("--shard must be K/N with 0 <= K < N (got " + a.shard + ")");
  const int64_t begin = a.n * k / of, end = a.n * (k + 1) / of; // n <= 10^7: no overflow
  if (end == begin)
    throw UsageError("--shard " + a.shard + " holds no image of " + std::to_string(a.n));
  a.first += begin;
  a.n = end - begin;
}

// Every flag's value, before the model is loaded (usage errors: exit 2).
void check_flags(const SampleArgs &a) {
  if (a.out.empty() && a.out_dir.empty() && a.npy.empty())
    throw UsageError("name an output: -o GRID.png, --out-dir FOLDER and/or --npy FILE.npy");
  if (!a.out.empty())
    require_extension("-o", a.out, ".png", "; a grid is a PNG (arrays: --npy FILE.npy)");
  if (!a.npy.empty())
    require_extension("--npy", a.npy, ".npy");
  a.restart.check(!a.out_dir.empty() || !a.npy.empty(), "--out-dir or --npy");
  a.run.options();
}

// --out-dir's names: image i of the run (from --first) is FIRST+i.png.
std::function<std::string(int64_t)> png_names(const SampleArgs &a) {
  return [first = a.first](int64_t i) { return image_png_name(first + i); };
}

// The outputs asked for, checked before any work (include/tarnn/outputs.h), the resume record
// last; a resumed run starts at the record's count, and its grid gets the images written before.
// An interrupted run's record is not written over unasked (--resume, --overwrite); --resume of a
// finished run (no record, every image there) samples nothing and draws the grid from them.
struct Outputs {
  std::optional<OutputFolder> folder; // --out-dir: removed again if the run leaves it empty
  std::vector<std::unique_ptr<ImageSink>> sinks;
  int64_t start = 0;      // images an interrupted run wrote
  bool resumable = false; // a record is kept (--out-dir or --npy)
  bool finished = false;  // --resume found the outputs complete

  Outputs(const SampleArgs &a, const std::string &model, const Engine &engine) {
    const Config &c = engine.config();
    const int H = c.height, W = c.width, C = c.channels;
    ImageSink *grid = nullptr;
    if (!a.out.empty())
      grid = sinks.emplace_back(grid_sink(a.out, a.n, H, W, C, a.grid)).get();
    if (!a.out_dir.empty())
      folder.emplace(a.out_dir);
    for (const std::string &file : {a.npy, a.report.json_file})
      if (!file.empty())
        check_output_file(file);
    check_sample_memory(a, engine);
    // the record of a resumable run: an .npy that is a file (not a stream: output_target, its
    // record beside the file a link leads to) or an --out-dir; a stream is written into from its
    // first image, and where it is the only output streamed nothing is resumable
    const bool npy_file = !a.npy.empty() && !output_target(a.npy).stream;
    if (!npy_file && a.out_dir.empty()) {
      if (!a.npy.empty() && a.restart.resume)
        throw Error(a.npy + ": not a file (a device, a FIFO or a descriptor): a run writing into "
                            "it cannot be resumed");
      if (!a.npy.empty())
        sinks.emplace_back(npy_sink(a.npy, a.n, H, W, C));
      return;
    }
    auto record = std::make_unique<ResumeRecord>(
        npy_file ? companion_path(output_target(a.npy).path, ".partial.json")
                 : a.out_dir + "/.tarnn-sample.json",
        run_record(a, model, H, W, C).dump());
    a.restart.refuse_unasked_restart(*record, streamed_names(a), a.n, "images");
    if (a.restart.resume && !record->exists() && whole(a, H, W, C)) {
      finished = true, start = a.n;
      if (grid) // drawn from the images there
        grid->add(npy_file
                      ? read_images(a.npy)
                      : png_folder_sink(a.out_dir, H, W, C, png_names(a), a.n)->read_back(a.n));
      return;
    }
    start = a.restart.resume ? record->load() : 0;
    if (!a.out_dir.empty())
      check_folder_space(a.out_dir, a.n - start); // (an .npy checks its own: its size is known)
    std::vector<ImageSink *> streamed; // what a resumed run checks, and its grid reads back
    if (!a.out_dir.empty())
      streamed.push_back(
          sinks.emplace_back(png_folder_sink(a.out_dir, H, W, C, png_names(a), start)).get());
    if (!a.npy.empty()) {
      ImageSink *npy = sinks.emplace_back(npy_sink(a.npy, a.n, H, W, C, start)).get();
      if (npy_file)
        streamed.push_back(npy);
    }
    if (a.restart.overwrite) // the outputs are locked (a running run is not touched): start over
      record->discard();
    for (const ImageSink *s : streamed)
      record->verify(*s);  // what was written before is still there, and unchanged
    if (grid && start > 0) // a resumed grid: the images written before, read back
      grid->add(streamed.back()->read_back(start));
    sinks.push_back(std::move(record));
    resumable = true;
  }

  // The run's memory: the state, a batch being computed and the one before it being written, and
  // what the sinks hold (a grid, its images).
  void check_sample_memory(const SampleArgs &a, const Engine &engine) const {
    double memory =
        engine.host_state_bytes(a.n) +
        double(std::min(a.n, 2 * engine.batch_for(a.n))) * engine.config().bytes_per_image();
    for (const auto &s : sinks)
      memory += s->memory_bytes();
    check_memory(memory, "sampling " + count_of(a.n, "image", "images"));
  }

  // What a resume must match (a record without "temperature", as any run before it existed
  // wrote, means 1).
  static nlohmann::json run_record(const SampleArgs &a, const std::string &model, int H, int W,
                                   int C) {
    nlohmann::json run{{"model", model},    {"n", a.n},     {"first", a.first},
                       {"seed", a.seed},    {"npy", a.npy}, {"out_dir", a.out_dir},
                       {"shape", {H, W, C}}};
    if (a.temperature != 1.0)
      run["temperature"] = a.temperature;
    return run;
  }

  // "DIR, FILE.npy": the streamed outputs, for messages.
  static std::string streamed_names(const SampleArgs &a) {
    return a.out_dir + (a.out_dir.empty() || a.npy.empty() ? "" : ", ") + a.npy;
  }

  // Every streamed output asked for is a finished run's: each PNG there, the .npy whole (through
  // its links; a stream never is: it gets this run's images).
  static bool whole(const SampleArgs &a, int H, int W, int C) {
    return (a.npy.empty() || npy_is_whole(a.npy, a.n, H, W, C)) &&
           (a.out_dir.empty() || png_folder_is_whole(a.out_dir, a.n, png_names(a)));
  }

  void add(const ImageSet &images) {
    for (const auto &s : sinks)
      s->add(images);
  }
  void finish() {
    for (const auto &s : sinks)
      s->finish();
  }
};

// The summary's line: what was done, or that --resume found it done.
std::string summary_line(const SampleArgs &a, const Outputs &outputs, int64_t todo, double secs,
                         double rate) {
  std::string where;
  for (const std::string &o : {a.out, a.out_dir, a.npy})
    if (!o.empty())
      where += (where.empty() ? "" : ", ") + o;
  char line[1024];
  if (outputs.finished)
    std::snprintf(line, sizeof line, "%s: already complete (%s): nothing sampled%s%s\n",
                  Outputs::streamed_names(a).c_str(), count_of(a.n, "image", "images").c_str(),
                  a.out.empty() ? "" : "; the grid drawn from them -> ", a.out.c_str());
  else
    std::snprintf(line, sizeof line, "%s in %.2f s (%.2f images/s) -> %s\n",
                  count_of(todo, "image", "images").c_str(), secs, rate, where.c_str());
  return line;
}

// The JSON of docs/JSON.md for a run that took `secs`.
nlohmann::json sample_json(const SampleArgs &a, const std::string &model, const Engine &engine,
                           int64_t start, double secs, double rate) {
  nlohmann::json j = json_header("sample");
  j.update({{"model", model},
            {"images", a.n},
            {"first", a.first},
            {"seed", a.seed},
            {"temperature", a.temperature},
            {"resumed_at", start},
            {"seconds", secs},
            {"images_per_second", rate},
            {"outputs", {{"grid", a.out}, {"out_dir", a.out_dir}, {"npy", a.npy}}}});
  j.update(numerics_json(engine));
  return j;
}

int run_sample(SampleArgs a) {
  check_flags(a);
  if (!a.shard.empty())
    apply_shard(a);
  const std::string model = find_model(a.model);
  Engine engine(load_model(model), a.run.options()); // checked by check_flags
  const int positions = engine.config().positions();
  // the run's clock, and TARNN_PROGRESS_SECONDS checked before any output is touched
  const ProgressBar bar = progress_bar(positions, a.report.quiet);
  Outputs outputs(a, model, engine);
  const int64_t start = outputs.start, todo = a.n - start;
  int64_t written = 0; // images of this invocation on the disk and in the record
  try {
    run_in_batches(
        todo, engine.batch_for(a.n), positions, bar.progress,
        [&](int64_t first, int64_t count, const Progress &p) {
          return sample_images(engine, count, a.seed, a.first + start + first, p, 0,
                               float(a.temperature));
        },
        [&](const ImageSet &images) {
          outputs.add(images);
          written += images.count;
        });
  } catch (const Error &e) { // a write that failed (a full disk): what was written is kept
    if (!outputs.resumable || start + written == 0 || e.kind() != Error::Kind::File)
      throw;
    throw Error(in_flags(e) + "; the " + std::to_string(start + written) +
                    " images written before are kept: the same command with --resume goes on",
                e.kind());
  } catch (const Interrupted &i) {
    // a stream (an --npy FIFO) has what it was given but keeps no record
    return interrupted_exit({i.signal, start + i.written, a.n, "images",
                             outputs.resumable ? "" : a.npy, outputs.resumable, !a.out.empty()});
  }
  outputs.finish();
  // --resume of a finished run drew no bar: no last line of one
  const double secs = outputs.finished ? 0.0 : bar.finish();
  const double rate = secs > 0 ? double(todo) / secs : 0.0;
  print_warnings(engine);
  a.report.emit(summary_line(a, outputs, todo, secs, rate),
                sample_json(a, model, engine, start, secs, rate));
  return 0;
}

} // namespace

Command add_sample(CLI::App &app) {
  auto a = std::make_shared<SampleArgs>();
  CLI::App *cmd = app.add_subcommand("sample", "generate images pixel by pixel");
  add_model_option(cmd, a->model, kDefaultModel);
  add_run_options(cmd, a->run);
  add_number<int64_t>(cmd, "-n", a->n, "number of images", 1, kMaxSampleImages);
  add_number<uint64_t>(cmd, "--seed", a->seed,
                       "seed: image i is the same for any batch, thread count", 0, UINT64_MAX);
  add_temperature_option(cmd, a->temperature);
  add_number<int64_t>(cmd, "--first", a->first,
                      "index of the first image (split a large job across processes)", 0,
                      INT64_MAX);
  cmd->add_option("-o,--output", a->out, "a PNG grid of the images (at most 65,536)");
  cmd->add_option("--out-dir", a->out_dir, "one PNG per image here, named by image index");
  cmd->add_option("--npy", a->npy, "a NumPy .npy of uint8 (N, H, W, C), filled as it goes");
  add_resume_options(cmd, a->restart, "--out-dir or --npy");
  cmd->add_option("--shard", a->shard,
                  "K/N: only the K-th (from 0) of N contiguous ranges of the -n images");
  add_grid_options(cmd, a->grid, true);
  add_report_options(cmd, a->report);
  return {cmd, [a] { return run_sample(*a); }};
}

} // namespace tarnn::cli
