// tarnn sample: images pixel by pixel, streamed: each chunk of images goes to the outputs as soon
// as it is done (--out-dir PNGs, a --npy array filled in order), so memory does not grow with -n;
// a grid (-o) collects what it shows. An interrupted run says how far it got and --resume goes on
// from there; --shard K/N takes one of N contiguous ranges of images.
#include <cstdio>
#include <memory>

#include "options.h"

namespace tarnn::cli {

namespace {

struct SampleArgs {
  std::string model;
  RunOptions run;
  int64_t n = 64, first = 0;
  uint64_t seed = 0;
  std::string out, out_dir, npy, shard;
  bool resume = false;
  int scale = 0, cols = 0; // 0: chosen for the grid's size
  Report report;
};

bool ends_with(const std::string &s, const std::string &tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// --shard K/N: images [first + n K / N, first + n (K + 1) / N) of the run.
void apply_shard(SampleArgs &a) {
  int64_t k = 0, of = 0;
  char tail = 0;
  if (std::sscanf(a.shard.c_str(), "%ld/%ld%c", &k, &of, &tail) != 2 || of < 1 || k < 0 || k >= of)
    throw Error("--shard must be K/N with 0 <= K < N (got " + a.shard + ")");
  const int64_t begin = a.n * k / of, end = a.n * (k + 1) / of; // n <= 10^7: no overflow
  if (end == begin)
    throw Error("--shard " + a.shard + " holds no image of " + std::to_string(a.n));
  a.first += begin;
  a.n = end - begin;
}

// The run record beside a streamed output: what a --resume must match, and how many images are
// written (after each chunk, once the outputs are on the disk).
struct Record {
  std::string path;
  nlohmann::json run;
  int64_t done = 0;

  void save() const {
    nlohmann::json j = run;
    j["done"] = done;
    write_file_atomic(path, j.dump(2) + "\n");
  }
  // The images an earlier run of the same job wrote; Error if the record is another job's.
  int64_t load() {
    std::vector<char> text;
    if (FILE *f = std::fopen(path.c_str(), "rb")) {
      char buf[4096];
      for (size_t got; (got = std::fread(buf, 1, sizeof buf, f)) > 0;)
        text.insert(text.end(), buf, buf + got);
      std::fclose(f);
    } else {
      return 0; // nothing written yet: start from the beginning
    }
    const nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("done"))
      throw Error(path + ": not a tarnn run record");
    for (const auto &[key, value] : run.items())
      if (!j.contains(key) || j[key] != value)
        throw Error(path + ": was written by another run (" + key + " differs): --resume needs " +
                    "the same model, -n, --seed, --first, --shard and outputs");
    done = j["done"].get<int64_t>();
    return done;
  }
};

int run_sample(SampleArgs a) {
  if (a.out.empty() && a.out_dir.empty() && a.npy.empty())
    throw Error("name an output: -o GRID.png, --out-dir FOLDER and/or --npy FILE.npy");
  if (!a.out.empty() && !ends_with(a.out, ".png"))
    throw Error("-o " + a.out + ": a grid is a .png (arrays: --npy FILE.npy)");
  if (!a.npy.empty() && !ends_with(a.npy, ".npy"))
    throw Error("--npy " + a.npy + ": the file must end in .npy");
  if (a.resume && a.out_dir.empty() && a.npy.empty())
    throw Error("--resume continues an --out-dir or --npy output; a grid alone is not resumable");
  if (!a.shard.empty())
    apply_shard(a);
  const std::string model = find_model(a.model);
  Engine engine(load_model(model), a.run);
  const Config &c = engine.config();
  const size_t T = size_t(c.bytes_per_image());

  // Every output checked before any work.
  const int cols = a.cols > 0 ? a.cols : grid_columns(a.n);
  int64_t grid_bytes = 0;
  if (!a.out.empty()) {
    grid_bytes = check_grid(a.n, c.height, c.width, c.channels, cols);
    check_output_file(a.out);
  }
  if (!a.out_dir.empty())
    make_output_folder(a.out_dir);
  if (!a.npy.empty())
    check_output_file(a.npy);
  if (!a.report.json_file.empty())
    check_output_file(a.report.json_file);
  const int64_t chunk = 4 * engine.batch_for(a.n); // a few batches: every thread kept busy
  check_memory(double(std::min(a.n, chunk)) * T + state_bytes(engine, a.n) +
                   (a.out.empty() ? 0.0 : double(a.n) * T + 2.0 * double(grid_bytes)),
               "sampling " + count_of(a.n, "image", "images"));

  Record record;
  if (!a.npy.empty() || !a.out_dir.empty()) {
    record.path = !a.npy.empty() ? a.npy + ".partial.json" : a.out_dir + "/.tarnn-sample.json";
    record.run = {{"model", model},
                  {"n", a.n},
                  {"first", a.first},
                  {"seed", a.seed},
                  {"npy", a.npy},
                  {"out_dir", a.out_dir},
                  {"shape", {c.height, c.width, c.channels}}};
  }
  const int64_t start = a.resume ? record.load() : 0;
  std::unique_ptr<NpyWriter> npy;
  if (!a.npy.empty())
    npy = std::make_unique<NpyWriter>(a.npy, a.n, c.height, c.width, c.channels,
                                      start > 0 ? start : -1);
  ImageSet all; // the grid's images
  if (!a.out.empty()) {
    all = ImageSet{a.n, c.height, c.width, c.channels, std::vector<uint8_t>(size_t(a.n) * T)};
    if (start > 0) { // a resumed grid: the images written before, read back
      const ImageSet before = !a.npy.empty() ? read_images(npy->partial(), c) : ImageSet{};
      for (int64_t i = 0; i < start; ++i) {
        if (!a.npy.empty()) {
          std::copy_n(before.image(i), T, all.bytes.begin() + long(size_t(i) * T));
        } else {
          char name[64];
          std::snprintf(name, sizeof name, "/%08lld.png", static_cast<long long>(a.first + i));
          const ImageSet one = read_images(a.out_dir + name, c);
          std::copy_n(one.image(0), T, all.bytes.begin() + long(size_t(i) * T));
        }
      }
    }
  }

  const auto t0 = std::chrono::steady_clock::now();
  const int64_t todo = a.n - start;
  const Progress bar = progress_bar(c.positions(), a.report.quiet);
  int64_t done = start;
  try {
    for (int64_t off = start; off < a.n; off += chunk) {
      const int64_t m = std::min(chunk, a.n - off);
      const Progress p = [&](int64_t d, int64_t) {
        bar((off - start) * c.positions() + d, todo * c.positions());
      };
      const ImageSet images = sample_images(engine, m, a.seed, a.first + off, p);
      for (int64_t i = 0; !a.out_dir.empty() && i < m; ++i) {
        char name[64];
        std::snprintf(name, sizeof name, "/%08lld.png", static_cast<long long>(a.first + off + i));
        write_png(a.out_dir + name, c.width, c.height, c.channels, images.image(i));
      }
      if (npy)
        npy->append(images.bytes.data(), m);
      if (!a.out.empty())
        std::copy(images.bytes.begin(), images.bytes.end(),
                  all.bytes.begin() + long(size_t(off) * T));
      done = off + m;
      if (!record.path.empty()) {
        record.done = done;
        record.save();
      }
      if (const int sig = interrupted())
        throw Interrupted{sig};
    }
  } catch (const Interrupted &i) {
    std::fprintf(stderr,
                 "tarnn: interrupted (signal %d): %lld of %lld images written%s; the same command "
                 "with --resume goes on from there\n",
                 i.signal, static_cast<long long>(done), static_cast<long long>(a.n),
                 record.path.empty() ? " (the grid is written only at the end)" : "");
    return 128 + i.signal;
  }
  const double secs = seconds_since(t0);
  if (npy)
    npy->finish();
  if (!a.out.empty()) {
    const ImageSet grid = make_grid(all, cols);
    const int scale = a.scale > 0 ? a.scale : grid_scale(grid.width, grid.height);
    const ImageSet big = scale_image(grid, scale);
    write_png(a.out, big.width, big.height, big.channels, big.bytes.data());
  }
  if (!record.path.empty())
    std::remove(record.path.c_str()); // the run is complete: nothing to resume
  std::string where;
  for (const std::string &o : {a.out, a.out_dir, a.npy})
    if (!o.empty())
      where += (where.empty() ? "" : ", ") + o;
  char line[512];
  std::snprintf(line, sizeof line, "%s in %.2f s (%.2f images/s) -> %s\n",
                count_of(todo, "image", "images").c_str(), secs, double(todo) / secs,
                where.c_str());
  nlohmann::json j = json_header("sample");
  j.update({{"model", model},
            {"device", engine.device()},
            {"images", a.n},
            {"first", a.first},
            {"seed", a.seed},
            {"resumed_at", start},
            {"seconds", secs},
            {"images_per_second", double(todo) / secs},
            {"outputs", {{"grid", a.out}, {"out_dir", a.out_dir}, {"npy", a.npy}}}});
  a.report.emit(line, j);
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
  add_number<int64_t>(cmd, "--first", a->first,
                      "index of the first image (split a large job across processes)", 0,
                      INT64_MAX);
  cmd->add_option("-o,--output", a->out, "a PNG grid of the images (at most 65,536)");
  cmd->add_option("--out-dir", a->out_dir, "one PNG per image here, named by image index");
  cmd->add_option("--npy", a->npy, "a NumPy .npy of uint8 (N, H, W, C), filled as it goes");
  cmd->add_flag("--resume", a->resume,
                "go on with an interrupted run of the same command (its --out-dir or --npy)");
  cmd->add_option("--shard", a->shard,
                  "K/N: only the K-th (from 0) of N contiguous ranges of the -n images");
  add_number<int>(cmd, "--scale", a->scale, "grid pixels per image pixel (0: to about 600 px)", 0,
                  16);
  add_number<int>(cmd, "--cols", a->cols, "grid columns (0: a square)", 0, 65536);
  add_report_options(cmd, a->report);
  return {cmd, [a] { return run_sample(*a); }};
}

} // namespace tarnn::cli
