// What the subcommands share: the run options (one struct, one add_run_options, every default
// resolved by the library's resolve_run_options), output checks made before any work, and the
// progress bar. Each subcommand is one file (sample.cpp, score.cpp, ...) over the public API.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "../base/util.h"
#include "tarnn/tarnn.h"
#include "usage.h"

namespace tarnn::cli {

// A subcommand: its parser, and what runs when it was chosen.
struct Command {
  CLI::App *app;
  std::function<int()> run;
};

Command add_sample(CLI::App &app);
Command add_score(CLI::App &app);
Command add_info(CLI::App &app);
Command add_complete(CLI::App &app);
Command add_bench(CLI::App &app);
Command add_serve(CLI::App &app); // where built with cpp-httplib (TARNN_HAVE_SERVE)

constexpr const char *kDefaultModel = "models/mnist";

// --model: a folder with config.json and model.safetensors (tarnn::find_model resolves it).
void add_model_option(CLI::App *cmd, std::string &model, const std::string &default_model);

// One convention for every command: --json prints its summary as JSON on stdout (instead of the
// human lines), --json-file F writes the same to F, --quiet draws no progress.
struct Report {
  bool json = false, quiet = false;
  std::string json_file;
  // Prints `human` unless --json; the JSON to stdout (--json) and to --json-file.
  void emit(const std::string &human, const nlohmann::json &j) const;
};
void add_report_options(CLI::App *cmd, Report &r);

// The summary every JSON output starts with: the tarnn version, its commit, the time (UTC).
nlohmann::json json_header(const std::string &command);
// What a run used, for its JSON, the same fields in every command: {"device": "cpu",
// "device_name": "cpu: ..., 8 threads", "precision": "fp32", "state": "fp32", "threads": 8,
// "threads_from": "affinity", "warnings": [...]} (the engine's: Engine::warnings).
nlohmann::json numerics_json(const Engine &engine);
// The engine's warnings (Engine::warnings: what a result does not show), each on stderr, once.
void print_warnings(const Engine &engine);

// --batch --threads --device --precision --state --tf32 --no-prefill: the numerics as the strings
// given, parsed and checked (check_run_options) into the library's RunOptions by options(), which
// every command calls before it loads a model: a value refused is a UsageError (exit 2).
struct RunArgs {
  RunOptions run;
  std::string device = name(Device::Cpu), precision = name(Precision::Fp32),
              state = name(StateFormat::Fp32);
  bool tf32 = false; // the older --tf32 flag: --precision tf32
  RunOptions options() const;
};
void add_run_options(CLI::App *cmd, RunArgs &run);

// A whole-number option parsed strictly: decimal digits (and a leading '-' where lo < 0), in
// [lo, hi]; anything else ("1e23", "2^64", "-1" for a count) is a parse error naming the option,
// never clamped or wrapped.
template <class T>
CLI::Option *add_number(CLI::App *cmd, const std::string &name, T &var, const std::string &help,
                        T lo, T hi);

// --resume and --overwrite, for a command that streams its outputs beside a ResumeRecord
// (include/tarnn/outputs.h): an earlier run's work is never thrown away without being asked.
struct ResumeArgs {
  bool resume = false, overwrite = false;
  // Usage errors: both given, or either where nothing is streamed (`streamed`: the flags that
  // stream, for the message).
  void check(bool streams, const std::string &streamed) const;
  // Before the sinks: without --resume or --overwrite, an interrupted run's record beside
  // `outputs` is refused in one line naming both (an Error).
  void refuse_unasked_restart(const ResumeRecord &record, const std::string &outputs, int64_t total,
                              const char *unit) const;
};
void add_resume_options(CLI::App *cmd, ResumeArgs &r, const std::string &streamed);

// --temperature T, the sampler's (docs/SPEC.md section 2; default 1, the model's distribution):
// a decimal number, finite and above 0 as a float (sampling_temperature), else a usage error.
// `t` keeps the number as given (the JSON records it); run with float(t).
void add_temperature_option(CLI::App *cmd, double &t);

// The look of -o's grid (GridLayout, include/tarnn/outputs.h): --padding, --pad-value, --scale
// and, where a grid's rows are the user's to choose (sample), --nrow (alias --cols).
void add_grid_options(CLI::App *cmd, GridLayout &grid, bool nrow);

// A job's progress on stderr unless --quiet (tarnn/progress.h: on a terminal tqdm's bar redrawn
// about 5 times a second; otherwise, a log file or a batch job, a line with count, rate and ETA
// every 10 seconds, TARNN_PROGRESS_SECONDS sets it, docs/ENVIRONMENT.md), and the job's clock,
// started when the bar is made. `progress` also stops the run (throws Interrupted) once SIGINT or
// SIGTERM was caught (catch_interrupts), but never a job it is told is complete. `finish()`
// writes the last line (the last total reported, done) and returns the job's seconds, which the
// summary prints: one clock, one rounding.
struct ProgressBar {
  Progress progress;
  std::function<double()> finish;
};
ProgressBar progress_bar(int positions_per_image, bool quiet, const char *unit = "images");

// The first SIGINT or SIGTERM only sets a flag, which progress_bar and the commands check, so a
// streamed run ends between batches and says how far it got; a second one ends the process (its
// temporaries removed).
struct Interrupted {
  int signal;
  int64_t written = 0; // run_in_batches: the images written before it stopped
};
void catch_interrupts();
int interrupted(); // the signal caught, or 0

// What an interrupted run says on stderr (how far it got, where, whether --resume goes on, that a
// grid is written only at the end), and its exit status, 128 + the signal. No unit written: nothing
// to resume (an --out-dir the run made is removed again: OutputFolder).
struct InterruptedRun {
  int signal;
  int64_t written, all;
  const char *unit; // "images", "completions"
  std::string into; // where they were written, where it helps to say
  bool resumable;   // a record is kept: --resume goes on (else `into`, if any, a stream)
  bool grid;        // -o: written only at the end
};
int interrupted_exit(const InterruptedRun &r);

// The test hook (src/jobs/test_interrupt.h): with TARNN_TEST_INTERRUPT_AFTER=N (or N:TERM) set,
// a job that calls this with `done` >= N of its outputs finished (and more to do) raises SIGINT
// (SIGTERM) at itself, once per process: the run then stops as after a Ctrl-C at that moment, at
// a point its tests know instead of one that races the machine's speed. Unset: nothing.
void interrupt_for_test(int64_t done);

// A job of `total` images in batches of `batch`: compute(first, count, progress) makes images
// [first, first + count) and each finished batch goes to write() before the next batch is
// written, on a thread of its own while the next one is computed (the engine's threads stay
// busy). Progress on `bar` over the whole job, and at each batch's end. An interrupt stops it
// once the batches already computed are written: Interrupted, with `written` their images, is
// thrown. Its outputs (the images of the ImageSets computed: images, or completions) are what
// TARNN_TEST_INTERRUPT_AFTER counts, checked before each batch.
using ComputeBatch = std::function<ImageSet(int64_t first, int64_t count, const Progress &)>;
void run_in_batches(int64_t total, int64_t batch, int positions_per_image, const Progress &bar,
                    const ComputeBatch &compute,
                    const std::function<void(const ImageSet &)> &write);

} // namespace tarnn::cli
