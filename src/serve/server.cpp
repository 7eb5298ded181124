// The HTTP side of tarnn serve (serve.h): the page's files from the binary, the JSON
// API, and each run streamed as server-sent events. Nothing in a request names a file.
#include <arpa/inet.h>
#include <atomic>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>

#include "batcher.h"
#include "connections.h"
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
  // bytes that are not UTF-8 (a header quoted in an error) as U+FFFD, not an exception
  res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
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

// Who may ask. A Host header must name this server: a loopback name, the --host address, or, when
// listening on every address, any IP literal; so a page whose own name was rebound to 127.0.0.1
// (DNS rebinding) cannot read the API under its name. A browser's Origin, where one is sent, must
// be this server's own or one given with --allow-origin, so that no page of another site can start
// a job (a cross-origin text/plain POST needs no preflight). Clients sending no Origin (curl,
// scripts) are not browsers acting for a page.
class Access {
public:
  Access(const ServeOptions &o, int port) : o_(o), port_(std::to_string(port)) {}

  // An empty string where the request may go on; otherwise why not.
  std::string refusal(const httplib::Request &req) const {
    const std::string host = req.get_header_value("Host");
    if (!host_allowed(host))
      return "Host \"" + host.substr(0, 100) + "\" does not name this server";
    const std::string origin = req.get_header_value("Origin");
    if (req.has_header("Origin") && !origin_allowed(origin, host))
      return "requests from pages of " + origin.substr(0, 100) +
             " are refused (tarnn serve --allow-origin " + origin.substr(0, 100) + " allows them)";
    return "";
  }

  // The Access-Control-Allow-Origin an allowed other site's page needs to read the answer.
  bool cross_origin_allowed(const std::string &origin) const {
    for (const std::string &a : o_.allow_origins)
      if (a == "*" || a == origin)
        return true;
    return false;
  }

private:
  static bool ip_literal(const std::string &name) {
    unsigned char buf[16];
    if (name.size() > 2 && name.front() == '[' && name.back() == ']')
      return inet_pton(AF_INET6, name.substr(1, name.size() - 2).c_str(), buf) == 1;
    return inet_pton(AF_INET, name.c_str(), buf) == 1;
  }

  bool host_allowed(const std::string &host) const {
    std::string name = host, port;
    const size_t colon = host.rfind(':');
    if (colon != std::string::npos && host.find(']', colon) == std::string::npos) {
      name = host.substr(0, colon);
      port = host.substr(colon + 1);
    }
    if (!port.empty() && port != port_)
      return false;
    const std::string listening =
        o_.host.find(':') != std::string::npos ? "[" + o_.host + "]" : o_.host;
    if (name == "localhost" || name == "127.0.0.1" || name == "[::1]" || name == listening)
      return true;
    return (o_.host == "0.0.0.0" || o_.host == "::") && ip_literal(name);
  }

  bool origin_allowed(const std::string &origin, const std::string &host) const {
    return origin == "http://" + host || cross_origin_allowed(origin);
  }

  const ServeOptions &o_;
  std::string port_;
};

std::string sse(const Ticket::Event &e) {
  return "event: " + e.name + "\ndata: " + e.data.dump() + "\n\n";
}

class Handlers {
public:
  Handlers(Engine &engine, Batcher &batcher) : engine_(engine), batcher_(batcher) {}

  json info() const {
    const Config &c = engine_.config();
    // the model's name, not where it lies on this machine's disk
    std::string model = engine_.model().source;
    while (model.size() > 1 && model.back() == '/')
      model.pop_back();
    model = model.substr(model.find_last_of('/') + 1);
    return {{"model", model},
            {"height", c.height},
            {"width", c.width},
            {"channels", c.channels},
            {"positions", c.positions()},
            {"device", name(engine_.options().device)}, // cpu or cuda, as every JSON's
            {"device_name", engine_.device()},
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

// Each serve option in its range, before anything is bound.
void check_serve_options(const ServeOptions &o) {
  if (o.port < 0 || o.port > 65535)
    throw Error({param("port"), " must be in [0, 65535] (got " + std::to_string(o.port) + ")"});
  if (o.max_queued < 1 || o.max_queued > 4096)
    throw Error(
        {param("max_queued"), " must be in [1, 4096] (got " + std::to_string(o.max_queued) + ")"});
  if (o.max_connections < 1 || o.max_connections > 65536)
    throw Error({param("max_connections"),
                 " must be in [1, 65536] (got " + std::to_string(o.max_connections) + ")"});
  if (!(o.client_seconds >= 0.1 && o.client_seconds <= 3600))
    throw Error({param("client_seconds"),
                 " must be in [0.1, 3600] seconds (got " + std::to_string(o.client_seconds) + ")"});
}

// The connection discipline and the limits every request meets. A thread per connection with
// deadlines (connections.h); one request per connection, so a pipelined second request is refused
// explicitly (the first answer says Connection: close) rather than dropped unanswered.
// `connections` is set when httplib makes its task queue (httplib owns it, for the time of
// listen_after_bind); `port` is read then, once bound.
void harden(httplib::Server &http, const ServeOptions &o, const int &port,
            Connections *&connections) {
  http.new_task_queue = [&o, &port, &connections] {
    return connections = new Connections(port, o.max_connections,
                                         std::chrono::duration_cast<Connections::Clock::duration>(
                                             std::chrono::duration<double>(o.client_seconds)));
  };
  http.set_keep_alive_max_count(1);
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
}

// The page's files, /api/info and /api/stats, and the three jobs (POST; a GET is told so).
void add_routes(httplib::Server &http, Handlers &api, Connections *const &connections) {
  for (const PageFile &f : page_files()) {
    const std::string path = std::string(f.name) == "index.html" ? "/" : "/" + std::string(f.name);
    http.Get(path, [&f, &connections](const httplib::Request &req, httplib::Response &res) {
      connections->answering(req);
      res.set_content(f.data, size_t(f.size), content_type(f.name));
    });
  }
  http.Get("/api/info", [&](const httplib::Request &req, httplib::Response &res) {
    connections->answering(req);
    send_json(res, 200, api.info());
  });
  http.Get("/api/stats", [&](const httplib::Request &req, httplib::Response &res) {
    connections->answering(req);
    send_json(res, 200, api.stats());
  });
  const std::pair<const char *, Kind> routes[] = {{"/api/complete", Kind::Complete},
                                                  {"/api/sample", Kind::Sample},
                                                  {"/api/score", Kind::Score}};
  for (const auto &[path, kind] : routes) {
    const Kind k = kind;
    http.Post(path, [&api, &connections, k](const httplib::Request &req, httplib::Response &res) {
      connections->answering(req); // no deadline while it is answered
      api.run(k, req, res);
    });
    http.Get(path, [&connections](const httplib::Request &req, httplib::Response &res) {
      connections->answering(req);
      res.set_header("Allow", "POST");
      send_error(res, 405, req.path + " takes a POST with a JSON body (docs/SERVE.md)");
    });
  }
}

// Every failure answered as JSON: httplib's own (404, 413, 400) and a handler's exception (500).
void add_error_handlers(httplib::Server &http, Connections *const &connections) {
  http.set_error_handler([&connections](const httplib::Request &req, httplib::Response &res) {
    connections->answering(req);
    if (res.body.empty()) // the handlers' own errors already carry JSON
      send_error(res, res.status,
                 res.status == 404 ? "no such page: " + req.path
                 : res.status == 413
                     ? "request body over " + std::to_string(kMaxBodyBytes) + " bytes"
                 : res.status == 400 ? "malformed HTTP request"
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
}

// The port bound (o.port, or any free one for 0), its backlog widened; Error where it cannot be.
int bind_port(httplib::Server &http, const ServeOptions &o) {
  const int port = o.port == 0 ? http.bind_to_any_port(o.host) : o.port;
  if (port < 0 || (o.port != 0 && !http.bind_to_port(o.host, o.port)))
    throw Error("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                    " (in use, or not an address of this machine)",
                Error::Kind::Runtime);
  widen_backlog(port);
  return port;
}

// A request's Content-Length before its body is read: why it is refused (status, message), or
// status 0 where it may go on.
std::pair<int, std::string> length_refusal(const httplib::Request &req, const std::string &length) {
  // Only digits: httplib reads "-1" as 2^64 - 1 and waited to skip that many bytes, unanswered
  if (req.has_header("Content-Length") &&
      (length.empty() || length.find_first_not_of("0123456789") != std::string::npos))
    return {400, "Content-Length must be the body's size in bytes, digits only (got \"" +
                     length.substr(0, 40) + "\")"};
  // No length and no chunks: httplib would read the body until the client closes, answering
  // only when its 10 s read timeout ends
  if (req.method == "POST" && length.empty() && !req.has_header("Transfer-Encoding"))
    return {411, "a POST needs its body's Content-Length (a JSON object, docs/SERVE.md)"};
  // The declared length against the limit now, not after waiting for (and skipping) the body.
  if (!length.empty() && (length.size() > 12 || std::stoll(length) > int64_t(kMaxBodyBytes)))
    return {413, "request body over " + std::to_string(kMaxBodyBytes) + " bytes"};
  return {0, ""};
}

// Admission, before routing: who may ask (Access), a sane Content-Length, the connection's
// deadline for the body, and CORS for the other sites' pages allowed (a preflight answered here).
void add_admission(httplib::Server &http, const Access &access, Connections *const &connections) {
  http.set_pre_routing_handler([&](const httplib::Request &req, httplib::Response &res) {
    const std::string why = access.refusal(req);
    if (!why.empty()) {
      send_error(res, 403, why); // (the error handler relays it)
      return httplib::Server::HandlerResponse::Handled;
    }
    const std::string length = req.get_header_value("Content-Length");
    const auto [status, refused] = length_refusal(req, length);
    if (status != 0) {
      send_error(res, status, refused);
      return httplib::Server::HandlerResponse::Handled;
    }
    connections->headers_read(req, (!length.empty() && length != "0") ||
                                       req.has_header("Transfer-Encoding"));
    const std::string origin = req.get_header_value("Origin");
    if (access.cross_origin_allowed(origin)) {
      res.set_header("Access-Control-Allow-Origin", origin);
      res.set_header("Vary", "Origin");
      if (req.method == "OPTIONS") { // a preflight: what the page may send
        res.set_header("Access-Control-Allow-Methods", "GET, POST");
        res.set_header("Access-Control-Allow-Headers", "Content-Type");
        res.status = 204;
        connections->answering(req);
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
}

// Listens until should_stop() says so, then stops the batcher, lets every stream send its last
// event ("error: the server is stopping", for up to 5 s) and closes the sockets.
void serve_until_stopped(httplib::Server &http, Batcher &batcher, const Handlers &api,
                         const std::function<bool()> &should_stop) {
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done && !should_stop())
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    batcher.stop(); // the running batch ends at its next report; the queue is told
    for (int i = 0; i < 50 && api.streams() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    http.stop();
  });
  http.listen_after_bind();
  done = true;
  watcher.join();
}

} // namespace

void run_server(Engine &engine, const ServeOptions &o, const std::function<bool()> &should_stop,
                const std::function<void(const std::string &url)> &on_ready) {
  check_serve_options(o);
  Batcher batcher(engine, o.max_rows > 0 ? o.max_rows : engine.batch_for(kMaxBatch), o.max_queued);
  Handlers api(engine, batcher);
  httplib::Server http;
  int port = -1;
  Connections *connections = nullptr;
  harden(http, o, port, connections);
  add_routes(http, api, connections);
  add_error_handlers(http, connections);
  port = bind_port(http, o);
  const Access access(o, port);
  add_admission(http, access, connections);
  const std::string host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
  on_ready("http://" + host + ":" + std::to_string(port) + "/");
  serve_until_stopped(http, batcher, api, should_stop);
}

} // namespace tarnn
