#include "threads.h"

#include <thread>
#include <vector>

#include "tarnn/error.h"

namespace tarnn {

void FirstError::keep(std::exception_ptr e) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error_)
    error_ = e;
  failed_ = true;
}

void FirstError::rethrow() {
  if (error_)
    std::rethrow_exception(error_);
}

std::exception_ptr thread_start_error(const std::exception &e) {
  return std::make_exception_ptr(
      Error(std::string("cannot start a CPU thread: ") + e.what() + " (try fewer --threads)",
            Error::Kind::Runtime));
}

void run_parallel(int n, const std::function<void(int)> &f) {
  FirstError error;
  auto guarded = [&](int i) {
    try {
      f(i);
    } catch (...) {
      error.keep(std::current_exception());
    }
  };
  std::vector<std::thread> workers;
  workers.reserve(size_t(n > 1 ? n - 1 : 0));
  for (int i = 1; i < n && !error.failed(); ++i) {
    try {
      workers.emplace_back(guarded, i);
    } catch (const std::exception &e) {
      error.keep(thread_start_error(e));
    }
  }
  if (!error.failed())
    guarded(0);
  for (auto &w : workers)
    w.join();
  error.rethrow();
}

} // namespace tarnn
