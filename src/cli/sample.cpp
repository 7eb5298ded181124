// tarnn sample: images pixel by pixel, as a grid and/or one PNG per image.
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
  std::string out, out_dir;
};

int run_sample(const SampleArgs &a) {
  if (a.out.empty() && a.out_dir.empty())
    throw Error("name an output: -o GRID.png and/or --out-dir FOLDER");
  if (a.n < 1 || a.n > kMaxSampleImages)
    throw Error("-n must be in [1, " + std::to_string(kMaxSampleImages) + "] (got " +
                std::to_string(a.n) + ")");
  Engine engine(load_model(a.model), a.run);
  const Config &c = engine.config();
  const int cols = grid_columns(a.n);
  int64_t grid = 0;
  if (!a.out.empty()) { // every output checked before any work
    grid = check_grid(a.n, c.height, c.width, c.channels, cols);
    check_output_file(a.out);
  }
  // the images, the state, and the grid twice (its pixels and their PNG encoding)
  check_memory(double(a.n) * c.bytes_per_image() + state_bytes(engine, a.n) + 2.0 * double(grid),
               "sampling " + std::to_string(a.n) + " images" + (grid ? " with a grid" : ""));
  if (!a.out_dir.empty())
    make_output_folder(a.out_dir);
  const auto t0 = std::chrono::steady_clock::now();
  const ImageSet images = sample_images(engine, a.n, a.seed, a.first, progress_bar(c.positions()));
  const double secs = seconds_since(t0);
  if (!a.out.empty()) {
    const ImageSet grid = make_grid(images, cols);
    write_png(a.out, grid.width, grid.height, grid.channels, grid.bytes.data());
  }
  for (int64_t i = 0; !a.out_dir.empty() && i < a.n; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "/%08lld.png", static_cast<long long>(a.first + i));
    write_png(a.out_dir + name, c.width, c.height, c.channels, images.image(i));
  }
  std::printf("%lld images in %.2f s (%.2f images/s) -> %s\n", static_cast<long long>(a.n), secs,
              double(a.n) / secs, (a.out.empty() ? a.out_dir : a.out).c_str());
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
  cmd->add_option("-o,--output", a->out, "PNG grid of all images");
  cmd->add_option("--out-dir", a->out_dir, "one PNG per image here, named by image index");
  return {cmd, [a] { return run_sample(*a); }};
}

} // namespace tarnn::cli
