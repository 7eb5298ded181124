// tarnn bench: images/s of full-length generation (include/tarnn/bench.h).
#include <cstdio>
#include <memory>

#include "options.h"

namespace tarnn::cli {

namespace {

struct BenchArgs {
  BenchOptions bench;
  RunArgs run;
  Report report;
};

int run_bench_command(BenchArgs a) {
  a.bench.run = a.run.options();
  as_usage([&] { check_bench_options(a.bench); });
  if (!a.report.json_file.empty())
    check_output_file(a.report.json_file);
  if (!a.bench.model.empty())
    a.bench.model = find_model(a.bench.model);
  // every measured position counts as a batch of "images" done
  const ProgressBar bar = progress_bar(1, a.report.quiet, "image-steps");
  a.bench.progress = bar.progress;
  try {
    const BenchResult r = run_bench(a.bench);
    bar.finish();
    nlohmann::json j = json_header("bench");
    j.update(nlohmann::json::parse(bench_json(r)));
    a.report.emit(bench_text(r), j);
  } catch (const Interrupted &i) {
    std::fprintf(stderr, "tarnn: interrupted (signal %d)\n", i.signal);
    return 128 + i.signal;
  }
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
  cmd->add_flag("--complete", b.complete,
                "time completion instead: the paper's Figure 3, the known half prefilled and step "
                "by step, and the time to the first sampled pixel");
  add_number<int>(cmd, "-n", b.images, "--complete: images to complete", 1, 100000);
  // the older spelling, hidden: in every other command --images names files
  add_number<int>(cmd, "--images", b.images, "", 1, 100000)->group("");
  add_number<int>(cmd, "--samples", b.samples, "--complete: completions per image", 1, 64);
  add_run_options(cmd, a->run);
  add_number<int>(cmd, "--steps", b.steps,
                  "time N positions and extrapolate to all (0: all); linear: the first N, "
                  "softmax: N spread over the image, interpolated",
                  0, INT32_MAX);
  add_report_options(cmd, a->report);
  return {cmd, [a] { return run_bench_command(*a); }};
}

} // namespace tarnn::cli
