// tarnn: sample, score, complete, inspect and benchmark linear-transformer image models run as
// RNNs. A thin command over the library (include/tarnn/tarnn.h): each subcommand is one file.
#include <cstdio>
#include <new>
#include <vector>

#include "options.h"

int main(int argc, char **argv) {
  using namespace tarnn;
  remove_temporaries_on_signals();
  cli::catch_interrupts(); // a first SIGINT or SIGTERM ends a run between steps, saying so
  CLI::App app{"tarnn: autoregressive linear transformers run as RNNs (Katharopoulos et al., "
               "2020): sample, score, complete and benchmark image models. The maths, the file "
               "format and the RNG contract: docs/SPEC.md"};
  app.set_version_flag("--version", std::string("tarnn ") + version() + " (" + git_commit() + ")");
  app.require_subcommand(1);
  std::vector<cli::Command> commands = {cli::add_sample(app), cli::add_score(app),
                                        cli::add_info(app), cli::add_complete(app),
                                        cli::add_bench(app)};
#ifdef TARNN_HAVE_SERVE
  commands.push_back(cli::add_serve(app));
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) { // a mistyped command or flag, a value out of range: exit 2
    return cli::report_usage_error(cli::explain_parse_error(app, argc, argv, e.what()), app, argc,
                                   argv);
  }
  try {
    for (const cli::Command &c : commands)
      if (c.app->parsed())
        return c.run();
  } catch (const cli::UsageError &e) { // a flag's value refused by the command's own checks
    return cli::report_usage_error(e.what(), app, argc, argv);
  } catch (const cli::Interrupted &i) {
    std::fprintf(stderr, "tarnn: interrupted (signal %d)\n", i.signal);
    return 128 + i.signal;
  } catch (const std::bad_alloc &) {
    // advice that fits the command: info holds the model's weights and nothing else
    const bool info = app.got_subcommand("info");
    std::fprintf(stderr, "tarnn: error: out of memory (%s)\n",
                 info ? "the model's weights do not fit in the memory this process may use"
                      : "try a smaller --batch, fewer images or fewer --threads");
    return 1;
  } catch (const Error &e) {
    std::fprintf(stderr, "tarnn: error: %s\n", cli::in_flags(e).c_str());
    return 1;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "tarnn: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
