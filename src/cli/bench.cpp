// tarnn bench: images/s of full-length generation (include/tarnn/bench.h).
#include <cstdio>
#include <memory>

#include "options.h"

namespace tarnn::cli {

namespace {

struct BenchArgs {
  BenchOptions bench;
  std::string json;
};

int run_bench_command(const BenchArgs &a) {
  if (!a.json.empty())
    check_output_file(a.json);
  const BenchResult r = run_bench(a.bench);
  std::fputs(bench_text(r).c_str(), stdout);
  if (!a.json.empty())
    write_file_atomic(a.json, bench_json(r));
  return 0;
}

} // namespace

Command add_bench(CLI::App &app) {
  auto a = std::make_shared<BenchArgs>();
  BenchOptions &b = a->bench;
  CLI::App *cmd = app.add_subcommand("bench", "images/s of full-length generation");
  add_model_option(cmd, b.model, "");
  cmd->add_option("--shape", b.shape,
                  "without --model: the paper's model with random weights, mnist or cifar10")
      ->check(CLI::IsMember({"mnist", "cifar10"}))
      ->capture_default_str();
  cmd->add_option("--attention", b.attention,
                  "linear (RNN mode), softmax (KV cache) or softmax-recompute (the whole prefix "
                  "every step, the paper's baseline); same weights")
      ->check(CLI::IsMember({"linear", "softmax", "softmax-recompute"}))
      ->capture_default_str();
  add_run_options(cmd, b.run);
  add_number<int>(cmd, "--steps", b.steps,
                  "time N positions and extrapolate to all (0: all); linear: the first N, "
                  "softmax: N spread over the image, interpolated",
                  0, INT32_MAX);
  cmd->add_option("--json", a->json, "also write the figures as JSON here");
  return {cmd, [a] { return run_bench_command(*a); }};
}

} // namespace tarnn::cli
