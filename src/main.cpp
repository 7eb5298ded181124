// tarnn: sample, score, inspect and benchmark linear-transformer image models in RNN mode.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "backend.h"
#include "bench.h"
#include "cli_util.h"
#include "complete.h"
#include "engine.h"
#include "error.h"
#include "image_io.h"

using namespace tarnn;

namespace {

struct Common {
  std::string model = "models/mnist";
  int batch = 256;
  int threads = default_threads();
  std::string device = "cpu";
  bool tf32 = false;
};

void add_common(CLI::App *cmd, Common &c, bool with_run_flags = true) {
  cmd->add_option("--model", c.model, "model folder: config.json + model.safetensors")
      ->capture_default_str();
  if (!with_run_flags)
    return;
  cmd->add_option("--batch", c.batch, "images whose state is in memory at once")
      ->capture_default_str();
  cmd->add_option("--threads", c.threads, "CPU threads, each stepping a slice of the batch")
      ->capture_default_str();
  cmd->add_option("--device", c.device,
                  "backend: cpu or cuda (cuda: --batch defaults to what "
                  "fits in GPU memory)")
      ->capture_default_str();
  cmd->add_flag("--tf32", c.tf32, "cuda: TF32 tensor cores in the GEMMs (faster, less exact)");
}

int cmd_sample(const Common &c, int64_t n, uint64_t seed, int64_t first, const std::string &out,
               const std::string &out_dir) {
  check_device(c.device);
  if (n < 1 || n > 10'000'000)
    throw Error("-n must be in [1, 10000000] (got " + std::to_string(n) + ")");
  if (first < 0)
    throw Error("--first must be >= 0");
  const Model m = load_model(c.model);
  const CpuWeights w(m);
  const Config &cfg = m.config;
  ImageSet images{n, cfg.height, cfg.width, cfg.channels, {}};
  images.bytes.resize(size_t(n) * cfg.bytes_per_image());
  Rollout job;
  job.count = n;
  job.seed = seed;
  job.first_index = first;
  job.out = images.bytes.data();
  RunOptions opt{c.batch, c.threads, false, progress_bar(cfg.positions())};
  if (c.device == "cpu")
    check_run_options(cfg, opt); // before any work, so a bad flag costs nothing
  const auto t0 = std::chrono::steady_clock::now();
  run_rollout(c.device, c.tf32, m, w, job, opt);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const ImageSet grid = make_grid(images, int(std::ceil(std::sqrt(double(n)))));
  write_png(out, grid.width, grid.height, grid.channels, grid.bytes.data());
  if (!out_dir.empty()) {
    std::filesystem::create_directories(out_dir);
    const size_t per = size_t(cfg.bytes_per_image());
    for (int64_t i = 0; i < n; ++i) {
      char name[64];
      std::snprintf(name, sizeof name, "/%08lld.png", static_cast<long long>(first + i));
      write_png(out_dir + name, cfg.width, cfg.height, cfg.channels, &images.bytes[i * per]);
    }
  }
  std::printf("%lld images in %.2f s (%.2f images/s) -> %s\n", static_cast<long long>(n), secs,
              double(n) / secs, out.c_str());
  return 0;
}

int cmd_score(const Common &c, const std::string &path, int64_t limit, bool json) {
  check_device(c.device);
  const Model m = load_model(c.model);
  ImageSet images = read_images(path, m.config);
  if (limit < 0)
    throw Error("--limit must be >= 0");
  if (limit > 0 && limit < images.count)
    images.count = limit;
  const CpuWeights w(m);
  std::vector<double> log_prob(size_t(images.count));
  Rollout job;
  job.count = images.count;
  job.given = images.bytes.data();
  job.out = images.bytes.data();
  job.log_prob = log_prob.data();
  run_rollout(c.device, c.tf32, m, w, job,
              RunOptions{c.batch, c.threads, false, progress_bar(m.config.positions())});
  // bits/dim of an image = -sum_t log p(p_{t+1}) / (L ln 2) (SPEC section 2)
  std::vector<double> bpd;
  double mean = 0;
  for (double lp : log_prob) {
    bpd.push_back(-lp / (m.config.positions() * std::log(2.0)));
    mean += bpd.back() / double(log_prob.size());
  }
  if (json) {
    const nlohmann::json j = {{"model", c.model},
                              {"images_file", path},
                              {"images", images.count},
                              {"bits_per_dim", mean},
                              {"per_image", bpd}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("bits/dim %.6f over %lld images\n", mean, static_cast<long long>(images.count));
  }
  return 0;
}

int cmd_info(const Common &c) {
  const Model m = load_model(c.model);
  const Config &cfg = m.config;
  std::printf("model           %s\n", c.model.c_str());
  std::printf("image           %dx%d, %d channel(s): %d bytes, %d positions\n", cfg.height,
              cfg.width, cfg.channels, cfg.bytes_per_image(), cfg.positions());
  std::printf("layers          %d x (%d heads of %d), d_model %d, d_ff %d, %s\n", cfg.n_layers,
              cfg.n_heads, cfg.d_head, cfg.d_model, cfg.d_ff, activation_name(cfg.activation));
  std::printf("output          %d logistics (%d values)\n", cfg.mixtures, cfg.d_out());
  std::printf("attention       %s\n", cfg.attention.c_str());
  std::printf("parameters      %lld (positional table included)\n",
              static_cast<long long>(cfg.parameter_count()));
  std::printf("state per image %lld bytes (S and z of every layer and head, fp32; constant in "
              "the position)\n",
              static_cast<long long>(cfg.state_floats_per_image() * 4));
  std::printf("config.json     %s\n", cfg.to_json().c_str());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"tarnn: autoregressive linear transformers run as RNNs (Katharopoulos et al., "
               "2020): sample, score and benchmark image models"};
  app.require_subcommand(1);
  Common common;

  auto *sample = app.add_subcommand("sample", "generate images pixel by pixel");
  add_common(sample, common);
  int64_t n = 64, first = 0;
  uint64_t seed = 0;
  std::string out, out_dir;
  sample->add_option("-n", n, "number of images")->capture_default_str();
  sample->add_option("--seed", seed, "seed: image i is the same for any batch, thread count")
      ->capture_default_str();
  sample
      ->add_option("--first", first,
                   "index of the first image (split a large job across processes)")
      ->capture_default_str();
  sample->add_option("-o,--output", out, "PNG grid of all images")->required();
  sample->add_option("--out-dir", out_dir, "also write one PNG per image here");

  auto *score = app.add_subcommand("score", "teacher-forced bits/dim of images");
  add_common(score, common);
  std::string images;
  int64_t limit = 0;
  bool json = false;
  score->add_option("--images", images, "MNIST IDX file (idx3-ubyte) or PNG")->required();
  score->add_option("--limit", limit, "score only the first N images (0: all)");
  score->add_flag("--json", json, "print JSON with per-image figures");

  auto *info = app.add_subcommand("info", "config, parameter count and state bytes per image");
  add_common(info, common, false);

  CompleteArgs complete_args;
  auto *complete =
      app.add_subcommand("complete", "complete occluded images (the paper's Figure 3)");
  add_complete_options(complete, complete_args);

  BenchArgs bench_args;
  auto *bench = app.add_subcommand("bench", "images/s of full-length generation");
  add_bench_options(bench, bench_args);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    std::fprintf(stderr, "tarnn: %s (see --help)\n", e.what());
    return 2;
  }
  bool batch_given = false; // on cuda, no --batch means as many as fit in GPU memory
  for (const CLI::App *sub : app.get_subcommands())
    if (const CLI::Option *o = sub->get_option_no_throw("--batch"))
      batch_given = batch_given || o->count() > 0;
  if (common.device == "cuda" && !batch_given)
    common.batch = 0;
  if (complete_args.device == "cuda" && !batch_given)
    complete_args.batch = 0;
  try {
    if (*sample)
      return cmd_sample(common, n, seed, first, out, out_dir);
    if (*score)
      return cmd_score(common, images, limit, json);
    if (*info)
      return cmd_info(common);
    if (*bench)
      return run_bench(bench_args);
    if (*complete)
      return run_complete(complete_args);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "tarnn: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
