// tarnn serve's connections: one thread each, a cap on how many are open, and deadlines for the
// request's line and headers and for its body (docs/SERVE.md, "Slow clients").
//
// httplib 0.11 hands each connection to a pool thread that reads its request with a timeout per
// read only: a client that sent a line and a header and then nothing, or a byte every 2 s, held a
// thread until it left, and about 72 of them held every thread of the pool, locking every other
// client out. Here a connection has its own thread, so a slow one holds only itself; at most
// `max_open` are open (more are closed as they come); and a watchdog closes one whose headers, or
// whose body, are not in within their deadline, so slow ones do not stay.
#pragma once

#include <chrono>
#include <condition_variable>
#include <httplib.h>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace tarnn::serve {

class Connections : public httplib::TaskQueue {
public:
  using Clock = std::chrono::steady_clock;

  // `port`: the server's own, by which its accepted sockets are told from others.
  Connections(int port, int max_open, Clock::duration deadline);
  ~Connections() override;

  // httplib's accept loop, for each connection it accepted (the socket is found by its port).
  void enqueue(std::function<void()> fn) override;
  // The server stops: connections still reading a request are closed, the others finish.
  void shutdown() override;

  // A request's line and headers are in: its body, if it has one, gets its own deadline.
  void headers_read(const httplib::Request &req, bool has_body);
  // Its body is in: no deadline while the answer is made and sent (streams last long).
  void body_read(const httplib::Request &req);

  int open() const; // connections open now

private:
  enum class Phase { Headers, Body, Answering };
  using Peer = std::pair<std::string, int>; // the client's address and port, as httplib names it
  struct Conn {
    int fd;
    Phase phase;
    Clock::time_point deadline;
  };

  // The socket accept() just returned: the one connected socket on our port not yet known.
  bool find_new(int &fd, Peer &peer) const;
  void set_phase(const httplib::Request &req, Phase phase);
  void watch();

  const int port_, max_open_;
  const Clock::duration deadline_;
  mutable std::mutex mutex_;
  std::condition_variable all_closed_, stop_watching_;
  std::map<Peer, Conn> conns_;
  int threads_ = 0; // connection threads still running
  bool stopping_ = false;
  std::thread watchdog_;
};

} // namespace tarnn::serve
