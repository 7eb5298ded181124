// Connections (connections.h): a thread per connection, a cap, and the watchdog's deadlines.
#include "connections.h"

#include <cerrno>
#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <system_error>

namespace tarnn::serve {

namespace {

// The socket's port on this side and its peer as httplib names it (getnameinfo, numeric).
bool describe(int fd, int &local_port, std::pair<std::string, int> &peer) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) != 0)
    return false;
  if (addr.ss_family == AF_INET)
    local_port = ntohs(reinterpret_cast<const sockaddr_in &>(addr).sin_port);
  else if (addr.ss_family == AF_INET6)
    local_port = ntohs(reinterpret_cast<const sockaddr_in6 &>(addr).sin6_port);
  else
    return false;
  len = sizeof addr;
  if (getpeername(fd, reinterpret_cast<sockaddr *>(&addr), &len) != 0)
    return false; // a listening socket, or one already closed by its client
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<sockaddr *>(&addr), len, host, sizeof host, port, sizeof port,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return false;
  peer = {host, std::atoi(port)};
  return true;
}

} // namespace

Connections::Connections(int port, int max_open, Clock::duration deadline)
    : port_(port), max_open_(max_open), deadline_(deadline), watchdog_([this] { watch(); }) {}

Connections::~Connections() {
  shutdown();
  watchdog_.join();
}

bool Connections::find_new(int &fd, Peer &peer) const {
  DIR *dir = opendir("/proc/self/fd");
  if (!dir)
    return false;
  bool found = false;
  while (dirent *e = readdir(dir)) {
    const int candidate = std::atoi(e->d_name);
    if (e->d_name[0] == '.' || candidate == dirfd(dir))
      continue;
    int local = -1;
    Peer p;
    if (relayed_.count(candidate) || !describe(candidate, local, p) || local != port_)
      continue;
    const auto it = conns_.find(p);
    if (it != conns_.end() && it->second.fd == candidate)
      continue; // known already
    fd = candidate, peer = p, found = true;
    break;
  }
  closedir(dir);
  return found;
}

void Connections::enqueue(std::function<void()> fn) {
  std::unique_lock<std::mutex> lock(mutex_);
  int fd = -1;
  Peer peer;
  if (!find_new(fd, peer)) { // not found (it closed already): httplib's own read ends it
    lock.unlock();
    fn();
    return;
  }
  if (stopping_ || int(conns_.size()) >= max_open_) {
    ::shutdown(fd, SHUT_RDWR); // too many: httplib reads nothing and closes it at once
    lock.unlock();
    fn();
    return;
  }
  conns_[peer] = Conn{fd, Phase::Headers, Clock::now() + deadline_};
  ++threads_;
  std::thread([this, fn = std::move(fn), peer, fd] {
    fn(); // httplib reads the request, answers, closes the socket
    std::lock_guard<std::mutex> done(mutex_);
    const auto it = conns_.find(peer);
    if (it != conns_.end() && it->second.fd == fd)
      conns_.erase(it);
    if (--threads_ == 0)
      all_closed_.notify_all();
  }).detach();
}

void Connections::set_phase(const httplib::Request &req, Phase phase) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = conns_.find({req.remote_addr, req.remote_port});
  if (it == conns_.end())
    return;
  it->second.phase = phase;
  it->second.deadline = Clock::now() + deadline_;
}

void Connections::headers_read(const httplib::Request &req, bool has_body) {
  set_phase(req, has_body ? Phase::Body : Phase::Answering);
}

void Connections::answering(const httplib::Request &req) {
  set_phase(req, Phase::Answering);
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = conns_.find({req.remote_addr, req.remote_port});
  if (it == conns_.end() || it->second.relayed)
    return;
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
    return; // answered directly, as before
  const int fd = it->second.fd, client = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (client < 0 || ::dup3(pair[0], fd, O_CLOEXEC) < 0) {
    ::close(pair[0]), ::close(pair[1]);
    if (client >= 0)
      ::close(client);
    return;
  }
  ::close(pair[0]); // httplib's descriptor is that end now
  // a client that reads nothing holds the relay no longer than httplib's own writes wait
  const timeval wait{10, 0};
  ::setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof wait);
  it->second.relayed = true;
  relayed_.insert(client);
  ++threads_; // the server stops once the relay has sent all
  try {
    std::thread([this, from = pair[1], client] { relay(from, client); }).detach();
  } catch (const std::system_error &) { // no thread: the pair closed, httplib's writes fail
    relayed_.erase(client);
    --threads_;
    ::close(pair[1]), ::close(client);
  }
}

void Connections::relay(int from, int client) {
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(from, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break; // httplib has sent all and closed its end
    for (ssize_t at = 0; n > 0 && at < n;) {
      const ssize_t w = ::send(client, buf + at, size_t(n - at), MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        n = 0; // the client has gone
      else
        at += w;
    }
    if (n == 0)
      break;
  }
  ::close(from);
  std::lock_guard<std::mutex> done(mutex_);
  relayed_.erase(client);
  ::close(client);
  if (--threads_ == 0)
    all_closed_.notify_all();
}

int Connections::open() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return int(conns_.size());
}

// Ten times a second: a connection past its deadline while its request is still coming is shut
// down (its thread's read then fails, and httplib closes it). The peer is checked again first, so
// a number reused by a newer connection is left alone.
void Connections::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_watching_.wait_for(lock, std::chrono::milliseconds(100),
                                  [&] { return stopping_ && threads_ == 0; })) {
    const Clock::time_point now = Clock::now();
    for (auto &[peer, c] : conns_) {
      if (c.phase == Phase::Answering || (!stopping_ && now < c.deadline))
        continue;
      int local = -1;
      Peer p;
      if (describe(c.fd, local, p) && p == peer)
        ::shutdown(c.fd, SHUT_RDWR);
      c.phase = Phase::Answering; // once is enough
    }
  }
}

void Connections::shutdown() {
  std::unique_lock<std::mutex> lock(mutex_);
  stopping_ = true; // the watchdog closes every request still coming
  all_closed_.wait(lock, [&] { return threads_ == 0; });
  stop_watching_.notify_all();
}

} // namespace tarnn::serve
