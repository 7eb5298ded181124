// tarnn serve: the paper's interactive completion demo over HTTP, on the user's own model
// (docs/SERVE.md). One page and a small JSON API; requests from every client are merged into the
// engine's batch by one queue. Built into libtarnn_serve (it needs cpp-httplib), which the command
// links; not part of libtarnn's installed API.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tarnn/run.h"

namespace tarnn {

struct ServeOptions {
  std::string host = "127.0.0.1"; // loopback only, unless another address is asked for
  int port = 8080;                // 0: any free port (on_ready says which)
  int max_queued = 64;            // requests waiting at most; more get 503
  int64_t max_rows = 0;           // images merged into one rollout; 0: the engine's batch
  int max_connections = 512;      // open at once; more are closed as they come
  double client_seconds = 5;      // for a request's line and headers, and again for its body
  // Origins (scheme://host[:port]) of other sites' pages allowed to call the API ("*": any); by
  // default only this server's own page, and clients that send no Origin (curl, scripts).
  std::vector<std::string> allow_origins;
};

// Serves until `should_stop` returns true (asked ten times a second), then ends the running
// batch, fails what is queued and returns. `on_ready` gets the URL once the port is bound.
// Throws Error when the address cannot be bound.
void run_server(Engine &engine, const ServeOptions &options,
                const std::function<bool()> &should_stop,
                const std::function<void(const std::string &url)> &on_ready);

} // namespace tarnn
