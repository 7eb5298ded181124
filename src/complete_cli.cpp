// The `tarnn complete` subcommand: flags, checks (all before any work), the run and the outputs.
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "backend.h"
#include "cli_util.h"
#include "complete.h"
#include "error.h"

namespace tarnn {

void add_complete_options(CLI::App *cmd, CompleteArgs &a) {
  cmd->add_option("--model", a.model, "model folder: config.json + model.safetensors")
      ->capture_default_str();
  cmd->add_option("--images", a.images,
                  "MNIST IDX file or PNG, of the model's size and channels (not resized)")
      ->required();
  cmd->add_option_function<std::string>(
      "--index", [&a](const std::string &s) { a.index = s; },
      "images of the file to complete: 3, 0-15, 0,5,9-12 (default: the first 16)");
  auto *rows = cmd->add_option_function<int64_t>(
      "--keep-rows", [&a](const int64_t &r) { a.mask.keep_rows = r; },
      "keep the first R pixel rows (default: the top half, as Figure 3)");
  auto *keep = cmd->add_option_function<int64_t>(
      "--keep", [&a](const int64_t &n) { a.mask.keep = n; },
      "keep the first N bytes in raster order");
  auto *mask = cmd->add_option("--mask", a.mask.png,
                               "PNG of the image's height x width: nonzero (white) = known, "
                               "zero (black) = generate; any pattern");
  rows->excludes(keep)->excludes(mask);
  keep->excludes(mask);
  cmd->add_option("--samples", a.samples, "completions per image, 1-64")->capture_default_str();
  cmd->add_option("--seed", a.seed, "seed (see the RNG rule below)")->capture_default_str();
  cmd->add_option("-o,--output", a.out, "PNG grid: occluded | completions | original per row")
      ->required();
  cmd->add_option("--out-dir", a.out_dir,
                  "also write each completion as INDEX-K.png (8-digit file index, sample k)");
  cmd->add_option("--batch", a.batch, "images whose state is in memory at once")
      ->capture_default_str();
  cmd->add_option("--threads", a.threads, "CPU threads (0: all cores)")->capture_default_str();
  cmd->add_option("--device", a.device,
                  "backend: cpu or cuda (cuda: --batch defaults to what fits in GPU memory)")
      ->capture_default_str();
  cmd->add_flag("--tf32", a.tf32, "cuda: TF32 tensor cores in the GEMMs (faster, less exact)");
  cmd->footer(
      "Known bytes are fed through the recurrence when their turn comes (teacher forcing), also\n"
      "after unknown ones, so any mask works; unknown bytes are sampled. Known bytes of every\n"
      "completion equal the input's exactly. p_0 is not modelled: an unknown p_0 is 0.\n"
      "A mask that keeps every byte from p_1 on is an error (nothing to complete); keeping\n"
      "nothing is plain sampling.\n"
      "RNG: completion k of file image i uses image index i * samples + k (SPEC section 3), so\n"
      "it is the same whatever --batch, --threads and the other images chosen.\n"
      "Grid, a row per image: occluded | completions | original. Grayscale models give an RGB\n"
      "grid, unknown pixels of the occluded image in dim red (120,0,0); RGB models show unknown\n"
      "bytes as a grey checkerboard.");
}

int run_complete(const CompleteArgs &a) {
  check_device(a.device);
  if (a.samples < 1 || a.samples > kMaxSamples)
    throw Error("--samples must be in [1, " + std::to_string(kMaxSamples) + "] (got " +
                std::to_string(a.samples) + ")");
  const Model m = load_model(a.model);
  const Config &c = m.config;
  const ImageSet images = read_images(a.images, c);
  const std::vector<int64_t> index = parse_index_list(
      a.index.value_or("0-" + std::to_string(std::min<int64_t>(images.count, 16) - 1)),
      images.count);
  const std::vector<uint8_t> known = make_mask(a.mask, c);
  const int64_t n = int64_t(index.size());
  if (n * a.samples > kMaxCompletions)
    throw Error(std::to_string(n) + " images x " + std::to_string(a.samples) + " samples is over " +
                std::to_string(kMaxCompletions) + " completions: split the job with --index");
  const RunOptions opt{a.batch, a.threads > 0 ? a.threads : default_threads(), false, nullptr};
  if (a.device == "cpu")
    check_run_options(c, opt); // before any work, so a bad flag costs nothing
  const CpuWeights w(m);
  const RolloutRunner run = [&](const Rollout &job,
                                const std::function<void(int64_t, int64_t)> &p) {
    RunOptions o = opt;
    o.progress = p;
    run_rollout(a.device, a.tf32, m, w, job, o);
  };
  const auto t0 = std::chrono::steady_clock::now();
  const ImageSet done =
      complete_images(images, index, known, a.samples, a.seed, run, progress_bar(c.positions()));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!a.out_dir.empty()) {
    std::filesystem::create_directories(a.out_dir);
    const size_t T = size_t(c.bytes_per_image());
    for (int64_t i = 0; i < n; ++i)
      for (int k = 0; k < a.samples; ++k) {
        char name[64];
        std::snprintf(name, sizeof name, "/%08lld-%02d.png", static_cast<long long>(index[i]), k);
        write_png(a.out_dir + name, c.width, c.height, c.channels,
                  &done.bytes[(size_t(i) * a.samples + k) * T]);
      }
  }
  // The grid last: when it exists, the whole run succeeded.
  const ImageSet grid = completion_grid(images, index, known, done, a.samples);
  write_png(a.out, grid.width, grid.height, grid.channels, grid.bytes.data());
  std::printf("%lld images x %d samples (%s) in %.2f s (%.2f completions/s) -> %s\n",
              static_cast<long long>(n), a.samples, describe_mask(known).c_str(), secs,
              double(n * a.samples) / secs, a.out.c_str());
  return 0;
}

} // namespace tarnn
