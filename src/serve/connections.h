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
#include <set>
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
  // Its request is read (or refused unread): no deadline while the answer is made and sent
  // (streams last long), and the answer goes out through a relay. httplib checks before each
  // write that the client has not left, by peeking at its socket, and takes a client that only
  // closed its sending side (shutdown(SHUT_WR): nc -N, a script that says it has sent all) for
  // one that left: it answered nothing. httplib's descriptor becomes one end of a socket pair,
  // whose only end of input is the relay's; the relay's thread copies what httplib writes to
  // the client, and closes the pair (httplib's next write fails) when the client has gone.
  void answering(const httplib::Request &req);

  int open() const; // connections open now

private:
  enum class Phase { Headers, Body, Answering };
  using Peer = std::pair<std::string, int>; // the client's address and port, as httplib names it
  struct Conn {
    int fd;
    Phase phase;
    Clock::time_point deadline;
    bool relayed = false; // fd is a socket pair's end now (answering)
  };

  // The socket accept() just returned: the one connected socket on our port not yet known.
  bool find_new(int &fd, Peer &peer) const;
  void set_phase(const httplib::Request &req, Phase phase);
  void watch();
  // Copies `from` (the pair's end) to `client` until either ends, then closes both.
  void relay(int from, int client);

  const int port_, max_open_;
  const Clock::duration deadline_;
  mutable std::mutex mutex_;
  std::condition_variable all_closed_, stop_watching_;
  std::map<Peer, Conn> conns_;
  std::set<int> relayed_; // the clients' sockets the relays hold: not new connections
  int threads_ = 0;       // connection threads still running
  bool stopping_ = false;
  std::thread watchdog_;
};

} // namespace tarnn::serve
