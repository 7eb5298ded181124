#include "options.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <future>
#include <memory>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

#include "../jobs/test_interrupt.h"

namespace tarnn::cli {

void add_model_option(CLI::App *cmd, std::string &model, const std::string &default_model) {
  model = default_model;
  auto *o = cmd->add_option("--model", model,
                            "model folder (config.json + model.safetensors): a path, or the name "
                            "of an installed model");
  if (!default_model.empty())
    o->capture_default_str();
}

void add_report_options(CLI::App *cmd, Report &r) {
  cmd->add_flag("--json", r.json, "print the result as JSON on stdout (docs/JSON.md)");
  cmd->add_option("--json-file", r.json_file, "also write the JSON result to this file");
  cmd->add_flag("--quiet", r.quiet, "no progress on stderr");
}

void Report::emit(const std::string &human, const nlohmann::json &j) const {
  if (json)
    std::printf("%s\n", j.dump(2).c_str());
  else
    std::fputs(human.c_str(), stdout);
  std::fflush(stdout); // before a --json-file that is stdout (/dev/stdout: written into)
  if (!json_file.empty())
    write_file_atomic(json_file, j.dump(2) + "\n");
}

nlohmann::json json_header(const std::string &command) {
  char when[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return {{"schema_version", kJsonSchemaVersion},
          {"command", command},
          {"tarnn_version", version()},
          {"git_commit", git_commit()},
          {"time", when}};
}

nlohmann::json numerics_json(const Engine &engine) {
  const RunOptions &o = engine.options();
  std::vector<std::string> warnings;
  for (const Message &w : engine.warnings())
    warnings.push_back(in_flags(w));
  return {{"device", name(o.device)},
          {"device_name", engine.device()},
          {"precision", name(o.precision)},
          {"state", name(o.state)},
          {"threads", o.threads},
          {"threads_from", o.threads_from},
          {"warnings", warnings}};
}

int interrupted_exit(const InterruptedRun &r) {
  const char *grid = r.grid ? " (the grid is written only at the end)" : "";
  const long long written = r.written, all = r.all;
  if (written > 0 && r.resumable)
    std::fprintf(stderr,
                 "tarnn: interrupted (signal %d): %lld of %lld %s written%s%s; the same command "
                 "with --resume goes on from there%s\n",
                 r.signal, written, all, r.unit, r.into.empty() ? "" : " to ", r.into.c_str(),
                 grid);
  else if (written > 0 && !r.into.empty()) // a stream, alone: nothing resumable
    std::fprintf(stderr,
                 "tarnn: interrupted (signal %d): %lld of %lld %s written into %s, a stream (not "
                 "resumable)%s\n",
                 r.signal, written, all, r.unit, r.into.c_str(), grid);
  else
    std::fprintf(stderr,
                 "tarnn: interrupted (signal %d) after %lld of %lld %s: nothing written%s\n",
                 r.signal, written, all, r.unit, grid);
  return 128 + r.signal;
}

void print_warnings(const Engine &engine) {
  for (const Message &w : engine.warnings())
    std::fprintf(stderr, "tarnn: warning: %s\n", in_flags(w).c_str());
}

namespace {

volatile std::sig_atomic_t caught = 0;

extern "C" void on_interrupt(int sig) {
  if (caught) // the second: end now
    remove_temporaries_and_die(sig);
  caught = sig;
}

} // namespace

void catch_interrupts() {
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN)
      continue;
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

int interrupted() { return caught; }

void interrupt_for_test(int64_t done) {
  if (const int sig = test_interrupt_due(done)) {
    ::raise(sig); // through the handler catch_interrupts installed
    if (!caught)  // a process started with the signal ignored (a background job): caught all the
                  // same
      caught = sig;
  }
}

RunOptions RunArgs::options() const {
  return as_usage([&] {
    RunOptions o = run;
    o.device = parse_device(device);
    o.precision = parse_precision(precision);
    o.state = parse_state_format(state);
    if (tf32 && o.precision == Precision::Fp32) // fp32 is the default: --tf32 alone
      o.precision = Precision::Tf32;
    if (tf32 && o.precision != Precision::Tf32)
      throw Error("--tf32 and --precision " + precision + " disagree: give one");
    check_run_options(o);
    return o;
  });
}

void add_run_options(CLI::App *cmd, RunArgs &a) {
  RunOptions &run = a.run;
  add_number<int64_t>(cmd, "--batch", run.batch,
                      "images whose state is in memory at once (0, the default: " + batch_help() +
                          ")",
                      0, kMaxBatch);
  add_number<int>(cmd, "--threads", run.threads, "CPU threads (0, the default: every core)", 0,
                  kMaxThreads);
  cmd->add_option("--device", a.device, "backend: " + device_help())->capture_default_str();
  cmd->add_option("--precision", a.precision, "the GEMMs: " + precision_help())
      ->capture_default_str();
  cmd->add_option("--state", a.state, "how S and z are stored: " + state_format_help())
      ->capture_default_str();
  cmd->add_flag("--tf32", a.tf32, "the same as --precision tf32");
  cmd->add_flag_callback(
      "--no-prefill", [&run] { run.prefill = false; },
      "feed the known leading bytes step by step instead of all at once (the same bits, slower: "
      "for comparisons)");
}

void add_resume_options(CLI::App *cmd, ResumeArgs &r, const std::string &streamed) {
  cmd->add_flag("--resume", r.resume,
                "go on with an interrupted run of the same command (its " + streamed +
                    "); on a finished one, do nothing");
  cmd->add_flag("--overwrite", r.overwrite,
                "start over where an interrupted run left its " + streamed +
                    ", discarding its images and record");
}

void ResumeArgs::check(bool streams, const std::string &streamed) const {
  if (resume && overwrite)
    throw UsageError("--resume goes on with an interrupted run, --overwrite starts over: give one");
  if ((resume || overwrite) && !streams)
    throw UsageError(std::string(resume ? "--resume" : "--overwrite") + " is for " + streamed +
                     " outputs; a grid alone is not resumable");
}

void ResumeArgs::refuse_unasked_restart(const ResumeRecord &record, const std::string &outputs,
                                        int64_t total, const char *unit) const {
  if (resume || overwrite || !record.exists())
    return;
  const int64_t count = record.count_on_disk();
  throw Error(outputs + ": an interrupted run " +
              (count >= 0 ? "wrote " + std::to_string(count) + " of " + std::to_string(total) +
                                " " + unit + " there"
                          : "left its " + std::string(unit) + " there") +
              " (its record: " + record.where() +
              "): --resume goes on from there, --overwrite starts over and discards them");
}

void add_temperature_option(CLI::App *cmd, double &t) {
  auto parse = [&t](const std::string &s) {
    char *end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    const bool decimal = !s.empty() && s.find_first_not_of("0123456789.eE+-") == std::string::npos;
    try {
      if (!decimal || end != s.c_str() + s.size())
        throw Error("--temperature must be a finite number above 0 (got '" + s.substr(0, 40) +
                    "')");
      sampling_temperature(v);
    } catch (const Error &e) {
      throw CLI::ValidationError(in_flags(e));
    }
    t = v;
  };
  cmd->add_option_function<std::string>(
         "--temperature", parse,
         "the sampler's temperature: the mixture's logits divided by T, its scales multiplied "
         "(docs/SPEC.md section 2); 1 is the model's own distribution, below 1 sharper")
      ->default_str("1")
      ->type_name("FLOAT");
}

void add_grid_options(CLI::App *cmd, GridLayout &g, bool nrow) {
  if (nrow)
    add_number<int>(cmd, "--nrow,--cols", g.nrow, "grid: images per row (0: a square-ish grid)", 0,
                    int(kMaxGridImages));
  add_number<int>(cmd, "--padding", g.padding,
                  "grid: pixels between and around the images (before --scale)", 0,
                  kMaxGridPadding);
  add_number<int>(cmd, "--pad-value", g.pad_value, "grid: the padding's grey level, 0 to 255", 0,
                  255);
  add_number<int>(cmd, "--scale", g.scale,
                  "grid: pixels per image pixel (0: whole pixels toward 600 px, at most 8)", 0,
                  kMaxGridScale);
}

template <class T>
CLI::Option *add_number(CLI::App *cmd, const std::string &name, T &var, const std::string &help,
                        T lo, T hi) {
  const std::string flag = name.substr(0, name.find(','));
  auto parse = [&var, flag, lo, hi](const std::string &s) {
    const bool negative = !s.empty() && s[0] == '-';
    const std::string digits = negative ? s.substr(1) : s;
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
      throw CLI::ValidationError(flag, "'" + s.substr(0, 40) + "' is not a whole number in [" +
                                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
    errno = digits.size() > 20 ? ERANGE : 0; // beyond any 64-bit number
    const auto value = negative ? static_cast<long double>(std::strtoll(s.c_str(), nullptr, 10))
                                : static_cast<long double>(std::strtoull(s.c_str(), nullptr, 10));
    if (errno == ERANGE || (negative && lo >= 0) || value < static_cast<long double>(lo) ||
        value > static_cast<long double>(hi))
      throw CLI::ValidationError(flag + " must be in [" + std::to_string(lo) + ", " +
                                 std::to_string(hi) + "] (got " + s + ")");
    var = negative ? T(std::strtoll(s.c_str(), nullptr, 10))
                   : T(std::strtoull(s.c_str(), nullptr, 10));
  };
  CLI::Option *o = cmd->add_option_function<std::string>(name, parse, help);
  o->default_str(std::to_string(var))->type_name("INT");
  return o;
}

template CLI::Option *add_number<int>(CLI::App *, const std::string &, int &, const std::string &,
                                      int, int);
template CLI::Option *add_number<int64_t>(CLI::App *, const std::string &, int64_t &,
                                          const std::string &, int64_t, int64_t);
template CLI::Option *add_number<uint64_t>(CLI::App *, const std::string &, uint64_t &,
                                           const std::string &, uint64_t, uint64_t);

ProgressBar progress_bar(int positions_per_image, bool quiet, const char *unit) {
  const bool terminal = isatty(STDERR_FILENO);
  const auto start = std::chrono::steady_clock::now();
  auto text =
      std::make_shared<ProgressText>(unit, terminal, quiet || terminal ? 0.0 : progress_interval());
  auto units = std::make_shared<double>(0.0); // the job's total, as last reported
  const double per = std::max(positions_per_image, 1);
  auto write = [](const std::string &s) {
    std::fputs(s.c_str(), stderr);
    std::fflush(stderr);
  };
  ProgressBar bar;
  bar.progress = [=](int64_t done, int64_t total) {
    if (const int sig = interrupted(); sig && done < total) { // a finished job is kept
      if (terminal && !quiet)
        write("\n"); // the message that follows starts on a line of its own
      throw Interrupted{sig};
    }
    *units = double(total) / per;
    if (!quiet)
      write(text->update(double(done) / per, *units, seconds_since(start)));
  };
  bar.finish = [=] {
    const double secs = seconds_since(start);
    if (!quiet)
      write(text->finish(*units, secs));
    return secs;
  };
  return bar;
}

void run_in_batches(int64_t total, int64_t batch, int positions_per_image, const Progress &bar,
                    const ComputeBatch &compute,
                    const std::function<void(const ImageSet &)> &write) {
  const int64_t per = positions_per_image;
  std::future<void> writing; // the last batch computed, being written
  int64_t handed = 0;        // images handed to write()
  auto written = [&] {       // every batch handed over is written (a write's Error thrown)
    if (writing.valid())
      writing.get();
    return handed;
  };
  int64_t outputs = 0; // the images of the ImageSets computed (complete: its completions)
  try {
    for (int64_t first = 0; first < total;) {
      interrupt_for_test(outputs);
      if (first > 0 && bar) // each batch's end is a report (it throws Interrupted once caught)
        bar(first * per, total * per);
      if (const int sig = interrupted())
        throw Interrupted{sig};
      const int64_t count = std::min(batch, total - first);
      const Progress progress = [&, first](int64_t done, int64_t all) {
        if (!bar)
          return;
        if (done < all) // (it throws Interrupted)
          bar(first * per + done, total * per);
        else if (first + count == total) // the job's end; a batch's is never thrown away
          bar(total * per, total * per);
      };
      auto images = std::make_shared<const ImageSet>(compute(first, count, progress));
      outputs += images->count;
      written();
      try {
        writing = std::async(std::launch::async, [&write, images] { write(*images); });
      } catch (const std::system_error &) { // no thread to be had: written here, in turn
        write(*images);
      }
      handed = first += count;
    }
    written();
  } catch (Interrupted &i) {
    i.written = written();
    throw;
  }
}

} // namespace tarnn::cli
