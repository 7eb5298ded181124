// Reading whole files, and writing them so that an output is either complete or not there.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../base/util.h"
#include "files.h"
#include "tarnn/error.h"
#include "tarnn/io.h"

namespace tarnn {

std::string os_error(const std::string &path, const char *what) {
  return path + ": " + what + ": " + std::strerror(errno);
}

void lock_output(int fd, const std::string &path) {
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR)
      continue;
    if (errno == EWOULDBLOCK)
      throw Error(path + ": another tarnn run is writing it (one run per output at a time: wait " +
                      "for it to end, or write elsewhere)",
                  Error::Kind::File);
    return; // a filesystem without locks: nothing to hold, and nothing to refuse
  }
}

namespace {

std::string name_of(const std::string &path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The umask, read without setting it (umask() would race with other threads creating files).
mode_t process_umask() {
  static const mode_t mask = [] {
    mode_t m = 022;
    if (FILE *f = std::fopen("/proc/self/status", "r")) {
      char line[128];
      unsigned v = 0;
      while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "Umask: %o", &v) == 1) {
          m = mode_t(v);
          break;
        }
      std::fclose(f);
    }
    return m;
  }();
  return mask;
}

// The temporaries being written, for the signal handler: a fixed table, each slot's path written
// before its state says so, read by the handler with async-signal-safe calls only.
constexpr int kSlots = 64;
struct Slot {
  std::atomic<int> state{0}; // 0 free, 1 being filled, 2 holds a temporary
  char path[PATH_MAX];
};
Slot slots[kSlots];

int remember(const std::string &tmp) {
  if (tmp.size() >= PATH_MAX)
    return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (slots[i].state.compare_exchange_strong(expected, 1)) {
      std::memcpy(slots[i].path, tmp.c_str(), tmp.size() + 1);
      slots[i].state = 2;
      return i;
    }
  }
  return -1; // more than 64 writes at once: this one is not cleaned on a signal
}

void forget(int slot) {
  if (slot >= 0)
    slots[slot].state = 0;
}

extern "C" void on_signal(int sig) { remove_temporaries_and_die(sig); }

} // namespace

void remove_temporaries_and_die(int sig) {
  for (Slot &s : slots)
    if (s.state.load() == 2)
      ::unlink(s.path);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
  ::_exit(128 + sig); // where the signal was blocked
}

void remove_temporaries_on_signals() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN)
      continue; // ignored by whoever started us (nohup, a background job): stays ignored
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

void check_free_space(const std::string &path, uint64_t bytes, uint64_t files) {
  struct stat st {};
  const std::string where =
      ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? path : folder_of(path);
  struct statvfs fs {};
  if (::statvfs(where.c_str(), &fs) != 0)
    return; // the filesystem cannot say: the writes will
  const double free_bytes = double(fs.f_bavail) * double(fs.f_frsize);
  if (double(bytes) > free_bytes)
    throw Error(path + ": needs " + size_text(double(bytes)) + " and its disk has " +
                    size_text(free_bytes) + " free: free some space, or write it elsewhere",
                Error::Kind::File);
  if (fs.f_files > 0 && files > uint64_t(fs.f_favail)) // f_files 0: no fixed count of files
    throw Error(path + ": needs " + std::to_string(files) + " new files and its disk has room " +
                    "for " + std::to_string(uint64_t(fs.f_favail)) + ": free some, or write it " +
                    "elsewhere",
                Error::Kind::File);
}

FileStamp stamp_of(const struct stat &st) {
  auto ns = [](const timespec &t) { return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec; };
  return FileStamp{uint64_t(st.st_dev), uint64_t(st.st_ino), int64_t(st.st_size), ns(st.st_mtim),
                   ns(st.st_ctim)};
}

bool unchanged(int fd, const FileStamp &before) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && stamp_of(st) == before;
}

std::string changed_while_read(const std::string &path) {
  return path + ": changed while it was read (being written or copied?): run again once it is " +
         "complete";
}

int open_regular_file(const std::string &path) {
  // stat first: opening a FIFO for reading waits for a writer, for ever if none comes.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error(os_error(path, "cannot open"), Error::Kind::File);
  auto refuse = [&](const struct stat &s) {
    throw Error(path + ": " +
                    (S_ISDIR(s.st_mode) ? "is a folder, not a file" : "not a regular file") +
                    (S_ISFIFO(s.st_mode)  ? " (a FIFO)"
                     : S_ISCHR(s.st_mode) ? " (a device)"
                                          : ""),
                Error::Kind::File);
  };
  if (!S_ISREG(st.st_mode))
    refuse(st);
  // Without waiting, and checked again on what was opened: the name may have been replaced by a
  // FIFO in between.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    throw Error(os_error(path, "cannot open"), Error::Kind::File);
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    refuse(st);
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

std::vector<uint8_t> read_file(const std::string &path) {
  const int fd = open_regular_file(path);
  struct stat st {};
  ::fstat(fd, &st);
  const FileStamp before = stamp_of(st);
  std::vector<uint8_t> data(size_t(st.st_size));
  size_t at = 0;
  while (at < data.size()) {
    const ssize_t n = ::read(fd, data.data() + at, data.size() - at);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      const std::string e = n < 0 ? os_error(path, "cannot read") : changed_while_read(path);
      ::close(fd);
      throw Error(e, Error::Kind::File);
    }
    at += size_t(n);
  }
  const bool same = unchanged(fd, before);
  ::close(fd);
  if (!same)
    throw Error(changed_while_read(path), Error::Kind::File);
  return data;
}

std::string companion_path(const std::string &path, const std::string &suffix, bool hidden) {
  const std::string name = name_of(path), dir = path.substr(0, path.size() - name.size());
  const std::string dot = hidden ? "." : "";
  if (dot.size() + name.size() + suffix.size() <= NAME_MAX)
    return dir + dot + name + suffix;
  // Too long for a name: the name's first bytes (whole characters) and a hash of all of it, so
  // that two long names differing at the end keep different companions.
  uint64_t h = 14695981039346656037ull; // FNV-1a
  for (const char c : name)
    h = (h ^ uint8_t(c)) * 1099511628211ull;
  char hash[18];
  std::snprintf(hash, sizeof hash, "~%016llx", static_cast<unsigned long long>(h));
  size_t keep = NAME_MAX - dot.size() - suffix.size() - 17;
  while (keep > 0 && (uint8_t(name[keep]) & 0xc0) == 0x80)
    --keep; // not inside a UTF-8 character
  return dir + dot + name.substr(0, keep) + hash + suffix;
}

OutputTarget output_target(const std::string &path) {
  OutputTarget t{path, false};
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0; // through every link
  if (exists && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    t.stream = true; // a device, a FIFO, a terminal, a socket: written into, never replaced
    return t;
  }
  for (int hops = 0; hops < 40; ++hops) { // the kernel's own limit on a chain
    struct stat link {};
    if (::lstat(t.path.c_str(), &link) != 0 || !S_ISLNK(link.st_mode))
      return t;
    // A descriptor (/dev/stdout is /proc/self/fd/1): its link names no file to replace, but an
    // open file, written into.
    if (t.path.rfind("/proc/", 0) == 0)
      return {path, true};
    std::string to(PATH_MAX, '\0');
    const ssize_t n = ::readlink(t.path.c_str(), to.data(), to.size());
    if (n <= 0 || size_t(n) >= to.size())
      throw Error(os_error(path, "cannot follow its link"), Error::Kind::File);
    to.resize(size_t(n));
    // A relative link is read from its own folder.
    t.path = to[0] == '/' ? to : t.path.substr(0, t.path.size() - name_of(t.path).size()) + to;
  }
  throw Error(path + ": cannot write: a chain of more than 40 symbolic links", Error::Kind::File);
}

void write_all(int fd, const void *data, size_t size, const std::string &path) {
  const auto *p = static_cast<const char *>(data);
  for (size_t at = 0; at < size;) {
    const ssize_t n = ::write(fd, p + at, size - at);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n == 0)
        errno = ENOSPC;
      throw Error(os_error(path, "cannot write"), Error::Kind::File);
    }
    at += size_t(n);
  }
}

namespace {

// A new temporary beside `real` (the file an output's links lead to), registered for the signal
// handler; unlinked when destroyed unless it was renamed over `real`. Errors name `path`, the
// output as the user named it.
class Temporary {
public:
  Temporary(const std::string &real, const std::string &path)
      : path_(path), tmp_(companion_path(real, ".tmp-XXXXXX", true)) {
    // Created exclusively (O_EXCL through mkstemp): a planted link is never followed and two runs
    // writing the same output never share a temporary. Created and registered for the signal
    // handler with the signals held back: one arriving in between would leave it behind.
    sigset_t signals, before;
    sigemptyset(&signals);
    for (int sig : {SIGINT, SIGTERM, SIGHUP})
      sigaddset(&signals, sig);
    ::pthread_sigmask(SIG_BLOCK, &signals, &before);
    fd_ = ::mkstemp(tmp_.data());
    const int mkstemp_errno = errno;
    slot_ = fd_ < 0 ? -1 : remember(tmp_);
    ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
    errno = mkstemp_errno;
    if (fd_ < 0)
      throw Error(os_error(path, "cannot write"), Error::Kind::File);
    ::fchmod(fd_, 0666 & ~process_umask()); // mkstemp makes 0600; an output is an ordinary file
  }
  ~Temporary() {
    if (fd_ >= 0)
      ::close(fd_);
    if (!renamed_)
      ::unlink(tmp_.c_str());
    forget(slot_);
  }
  Temporary(const Temporary &) = delete;
  Temporary &operator=(const Temporary &) = delete;

  void write(const void *data, size_t size) { write_all(fd_, data, size, path_); }

  // Synced, closed and renamed over `real`.
  void commit(const std::string &real) {
    if (::fsync(fd_) != 0)
      fail("cannot write (fsync)");
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0)
      fail("cannot write (close)");
    if (::rename(tmp_.c_str(), real.c_str()) != 0)
      fail("cannot write");
    renamed_ = true;
  }

private:
  [[noreturn]] void fail(const char *what) {
    throw Error(os_error(path_, what), Error::Kind::File);
  }

  std::string path_, tmp_;
  int fd_ = -1, slot_ = -1;
  bool renamed_ = false;
};

// Into an output that is not replaced (OutputTarget::stream): opened as it is, never created or
// truncated (a FIFO, a terminal or /dev/null cannot be; a file behind /dev/stdout is the shell's
// to truncate), appending.
void write_into(const std::string &path, const void *data, size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    throw Error(os_error(path, "cannot write"), Error::Kind::File);
  try {
    write_all(fd, data, size, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0)
    throw Error(os_error(path, "cannot write (close)"), Error::Kind::File);
}

} // namespace

void check_writable(const std::string &path) {
  const OutputTarget t = output_target(path);
  if (t.stream) {
    if (::access(path.c_str(), W_OK) != 0)
      throw Error(os_error(path, "cannot write"), Error::Kind::File);
    return;
  }
  if (name_of(t.path).size() > NAME_MAX)
    throw Error(path + ": cannot write: its name is " + std::to_string(name_of(t.path).size()) +
                    " bytes, longer than the " + std::to_string(NAME_MAX) + " a name may have",
                Error::Kind::File);
  Temporary probe(t.path, path); // what the write will make, made now and removed
}

void write_file_atomic(const std::string &path, const void *data, size_t size) {
  if (path.empty())
    throw Error("an output path is empty");
  const OutputTarget t = output_target(path);
  if (t.stream)
    return write_into(path, data, size);
  Temporary tmp(t.path, path);
  tmp.write(data, size);
  tmp.commit(t.path);
}

void write_file_atomic(const std::string &path, const std::string &text) {
  write_file_atomic(path, text.data(), text.size());
}

bool has_extension(const std::string &path, const std::string &ext) {
  if (path.size() < ext.size())
    return false;
  const std::string tail = path.substr(path.size() - ext.size());
  return std::equal(tail.begin(), tail.end(), ext.begin(), ext.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) ==
           std::tolower(static_cast<unsigned char>(b));
  });
}

void write_png(const std::string &path, int width, int height, int channels, const uint8_t *data) {
  if (!has_extension(path, ".png"))
    throw Error(path + ": a PNG's name must end in .png (any case)");
  const std::vector<uint8_t> png = encode_png(width, height, channels, data);
  write_file_atomic(path, png.data(), png.size());
}

} // namespace tarnn
