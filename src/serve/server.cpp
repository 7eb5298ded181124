// The HTTP side of tarnn serve (serve.h): the page's files from the binary, the JSON
// API, and each run streamed as server-sent events. Nothing in a request names a file.
#include <arpa/inet.h>
#include <atomic>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>

#include "batcher.h"
#include "serve.h"
#include "tarnn/error.h"
#include "tarnn/jobs.h"
#include "tarnn/version.h"

namespace tarnn {

namespace serve {
struct PageFile {
  const char *name;
  const char *data;
  unsigned long size;
};
const std::vector<PageFile> &page_files(); // generated: tools/cmake/embed_files.cmake
} // namespace serve

namespace {

using namespace serve;
using nlohmann::json;

void send_json(httplib::Response &res, int status, const json &j) {
  res.status = status;
  res.set_content(j.dump(), "application/json");
}

void send_error(httplib::Response &res, int status, const std::string &message) {
  send_json(res, status, {{"error", message}});
}

const char *content_type(const std::string &name) {
  const std::string ext = name.substr(name.rfind('.') + 1);
  return ext == "html"  ? "text/html; charset=utf-8"
         : ext == "js"  ? "text/javascript; charset=utf-8"
         : ext == "css" ? "text/css; charset=utf-8"
                        : "application/json";
}

// httplib 0.11 listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into Debian's
// library). Clients that connect while the accept loop waits for a CPU overflow it: the kernel
// drops their handshakes, and a connection accepted later, whose request arrives after httplib's
// 5-s wait for it, is reset (tools/serve_load.py saw it under CI's load; a server stopped for 3 s
// while 64 clients connect reproduces it). listen() again on the bound socket raises the backlog
// (Linux); the socket is found by its port, since httplib keeps it private.
void widen_backlog(int port) {
  for (int fd = 0; fd < 1024; ++fd) {
    int listening = 0;
    socklen_t len = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening)
      continue;
    sockaddr_storage addr{};
    socklen_t alen = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &alen) != 0)
      continue;
    const int bound =
        addr.ss_family == AF_INET    ? ntohs(reinterpret_cast<const sockaddr_in &>(addr).sin_port)
        : addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<const sockaddr_in6 &>(addr).sin6_port)
                                     : -1;
    if (bound == port)
      ::listen(fd, SOMAXCONN);
  }
}

std::string sse(const Ticket::Event &e) {
  return "event: " + e.name + "\ndata: " + e.data.dump() + "\n\n";
}

class Handlers {
public:
  Handlers(Engine &engine, Batcher &batcher) : engine_(engine), batcher_(batcher) {}

  json info() const {
    const Config &c = engine_.config();
    return {{"model", engine_.model().source},
            {"height", c.height},
            {"width", c.width},
            {"channels", c.channels},
            {"positions", c.positions()},
            {"device", engine_.device()},
            {"precision", name(engine_.options().precision)},
            {"state", name(engine_.options().state)},
            {"max_samples", serve::kMaxSamples},
            {"default_samples", kDefaultSamples},
            {"default_seed", kDefaultSeed},
            {"max_batch_images", batcher_.max_rows()},
            {"max_queued", batcher_.max_queued()},
            {"version", std::string(version())}};
  }

  json stats() const {
    const BatcherStats s = batcher_.stats();
    return {{"queued", s.queued},
            {"running", s.running},
            {"requests_done", s.requests_done},
            {"images_done", s.images_done},
            {"rejected", s.rejected}};
  }

  // POST /api/KIND: parsed, queued, then streamed (or, for a score, answered when done).
  void run(Kind kind, const httplib::Request &req, httplib::Response &res) {
    Job job;
    try {
      job = parse_request(kind, req.body, engine_.config());
    } catch (const RequestError &e) {
      return send_error(res, e.status, e.what());
    }
    std::shared_ptr<Ticket> ticket = batcher_.submit(std::move(job));
    if (!ticket) {
      res.set_header("Retry-After", "1");
      return send_error(res, 503,
                        "busy: " + std::to_string(batcher_.max_queued()) +
                            " requests are waiting already; try again shortly");
    }
    if (kind == Kind::Score) { // one small answer: wait for it here
      for (;;) {
        auto e = ticket->next(std::chrono::milliseconds(100));
        if (!e)
          continue;
        if (e->name == "done")
          return send_json(
              res, 200,
              {{"bits_per_dim", e->data["bits_per_dim"]}, {"seconds", e->data["seconds"]}});
        if (e->name == "error")
          return send_error(res, 503, e->data["error"]);
      }
    }
    res.set_header("Cache-Control", "no-store");
    ++streams_;
    res.set_chunked_content_provider(
        "text/event-stream",
        [ticket](size_t, httplib::DataSink &sink) {
          auto e = ticket->next(std::chrono::milliseconds(1000));
          if (!e) { // a comment now and then: a client that left is noticed when it fails
            static const std::string ping = ": waiting\n\n";
            return sink.write(ping.data(), ping.size());
          }
          const std::string text = sse(*e);
          if (!sink.write(text.data(), text.size()))
            return false;
          if (e->name == "done" || e->name == "error")
            sink.done();
          return true;
        },
        [this, ticket](bool) { // finished or dropped: nothing more to send
          ticket->cancel();
          --streams_;
        });
  }

  int streams() const { return streams_; } // responses still streaming

private:
  Engine &engine_;
  Batcher &batcher_;
  std::atomic<int> streams_{0};
};

} // namespace

void run_server(Engine &engine, const ServeOptions &o, const std::function<bool()> &should_stop,
                const std::function<void(const std::string &url)> &on_ready) {
  if (o.port < 0 || o.port > 65535)
    throw Error("--port must be in [0, 65535] (got " + std::to_string(o.port) + ")");
  if (o.max_queued < 1 || o.max_queued > 4096)
    throw Error("--max-queued must be in [1, 4096] (got " + std::to_string(o.max_queued) + ")");
  const int64_t rows = o.max_rows > 0 ? o.max_rows : engine.batch_for(kMaxBatch);
  Batcher batcher(engine, rows, o.max_queued);
  Handlers api(engine, batcher);
  httplib::Server http;
  // Every waiting request holds a thread while it streams: room for the whole queue and more.
  const size_t threads = size_t(o.max_queued) + 8;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a second server on the
  // same port would start silently and share its connections
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  http.set_payload_max_length(kMaxBodyBytes);
  http.set_read_timeout(10, 0);
  http.set_write_timeout(10, 0);
  http.set_default_headers(
      {{"X-Content-Type-Options", "nosniff"},
       {"Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'"}});
  for (const PageFile &f : page_files()) {
    const std::string path = std::string(f.name) == "index.html" ? "/" : "/" + std::string(f.name);
    http.Get(path, [&f](const httplib::Request &, httplib::Response &res) {
      res.set_content(f.data, size_t(f.size), content_type(f.name));
    });
  }
  http.Get("/api/info", [&](const httplib::Request &, httplib::Response &res) {
    send_json(res, 200, api.info());
  });
  http.Get("/api/stats", [&](const httplib::Request &, httplib::Response &res) {
    send_json(res, 200, api.stats());
  });
  const std::pair<const char *, Kind> routes[] = {{"/api/complete", Kind::Complete},
                                                  {"/api/sample", Kind::Sample},
                                                  {"/api/score", Kind::Score}};
  for (const auto &[path, kind] : routes) {
    const Kind k = kind;
    http.Post(path, [&api, k](const httplib::Request &req, httplib::Response &res) {
      api.run(k, req, res);
    });
  }
  http.set_error_handler([](const httplib::Request &req, httplib::Response &res) {
    if (res.body.empty()) // the handlers' own errors already carry JSON
      send_error(res, res.status,
                 res.status == 404 ? "no such page: " + req.path
                 : res.status == 413
                     ? "request body over " + std::to_string(kMaxBodyBytes) + " bytes"
                     : "HTTP " + std::to_string(res.status));
  });
  http.set_exception_handler(
      [](const httplib::Request &, httplib::Response &res, std::exception_ptr ep) {
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception &e) {
          send_error(res, 500, e.what());
        } catch (...) {
          send_error(res, 500, "internal error");
        }
      });

  const int port = o.port == 0 ? http.bind_to_any_port(o.host) : o.port;
  if (port < 0 || (o.port != 0 && !http.bind_to_port(o.host, o.port)))
    throw Error("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                    " (in use, or not an address of this machine)",
                Error::Kind::Runtime);
  widen_backlog(port);
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done && !should_stop())
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    batcher.stop(); // the running batch ends at its next report; the queue is told
    // every stream gets its last event ("error: the server is stopping") before the sockets close
    for (int i = 0; i < 50 && api.streams() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    http.stop();
  });
  const std::string host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
  on_ready("http://" + host + ":" + std::to_string(port) + "/");
  http.listen_after_bind();
  done = true;
  watcher.join();
}

} // namespace tarnn
