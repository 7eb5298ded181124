// Work on several CPU threads with nothing escaping: every thread is joined, whatever fails, and
// the first exception of any of them (a failed thread start included) is rethrown on the caller.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <mutex>

namespace tarnn {

// The first exception of any worker, kept to be rethrown on the calling thread; once one is kept,
// failed() tells the others to stop at their next chance.
class FirstError {
public:
  void keep(std::exception_ptr e);
  bool failed() const { return failed_; }
  void rethrow();

private:
  std::mutex mutex_;
  std::exception_ptr error_;
  std::atomic<bool> failed_{false};
};

// f(0) .. f(n - 1), each on its own thread (f(0) on the caller's); returns when all are done.
void run_parallel(int n, const std::function<void(int)> &f);

// The Error a failed std::thread start becomes.
std::exception_ptr thread_start_error(const std::exception &e);

} // namespace tarnn
