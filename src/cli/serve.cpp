// tarnn serve: the interactive completion page and its JSON API on this machine
// (src/serve/serve.h, docs/SERVE.md). Ctrl-C (SIGINT) or SIGTERM ends it gracefully.
#include <csignal>
#include <cstdio>
#include <memory>

#include "../serve/serve.h"
#include "options.h"

namespace tarnn::cli {

namespace {

struct ServeArgs {
  std::string model;
  RunArgs run;
  ServeOptions serve;
};

int run_serve(ServeArgs &a) {
  const RunOptions run = a.run.options(); // flags first: a usage error before loading
  Engine engine(load_model(find_model(a.model)), run);
  std::signal(SIGPIPE, SIG_IGN); // a client that left is an error on its socket, not our end
  run_server(
      engine, a.serve, [] { return interrupted() != 0; },
      [&](const std::string &url) { // bound: the address is one of this machine's
        if (a.serve.host != "127.0.0.1" && a.serve.host != "localhost" && a.serve.host != "::1")
          std::fprintf(stderr,
                       "tarnn serve: listening on %s: other machines can reach it (no "
                       "authentication; 127.0.0.1 keeps it to this one)\n",
                       a.serve.host.c_str());
        std::printf("tarnn serve: %s on %s at %s\n", engine.model().source.c_str(),
                    engine.device().c_str(), url.c_str());
        std::fflush(stdout);
      });
  std::printf("tarnn serve: stopped (signal %d)\n", interrupted());
  return 0;
}

} // namespace

Command add_serve(CLI::App &app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App *cmd = app.add_subcommand(
      "serve",
      "the interactive completion page (draw, occlude, complete) and a JSON API over HTTP");
  add_model_option(cmd, a->model, kDefaultModel);
  add_run_options(cmd, a->run);
  cmd->add_option("--host", a->serve.host, "address to listen on (other machines: 0.0.0.0)")
      ->capture_default_str();
  add_number<int>(cmd, "--port", a->serve.port, "port (0: any free one)", 0, 65535)
      ->capture_default_str();
  add_number<int>(cmd, "--max-queued", a->serve.max_queued,
                  "requests waiting at most; more are answered 503", 1, 4096)
      ->capture_default_str();
  add_number<int>(cmd, "--max-connections", a->serve.max_connections,
                  "connections open at once; more are closed as they come", 1, 65536)
      ->capture_default_str();
  cmd->add_option("--client-timeout", a->serve.client_seconds,
                  "seconds a client has to send a request's line and headers, and again its body")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  cmd->add_option("--allow-origin", a->serve.allow_origins,
                  "an origin (http://host:port) whose pages may call the API; repeatable, * for "
                  "any (by default only this server's own page)");
  return {cmd, [a] { return run_serve(*a); }};
}

} // namespace tarnn::cli
