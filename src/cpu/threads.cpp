#include "threads.h"

#include <algorithm>
#include <chrono>
#include <immintrin.h>
#include <thread>
#include <utility>
#include <vector>

#include "tarnn/error.h"

namespace tarnn {

void FirstError::keep(std::exception_ptr e) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error_)
    error_ = std::move(e);
  failed_ = true;
}

void FirstError::rethrow() {
  if (error_)
    std::rethrow_exception(error_);
}

std::exception_ptr thread_start_error(const std::exception &e) {
  return std::make_exception_ptr(
      Error({std::string("cannot start a CPU thread: ") + e.what() + " (try fewer ",
             param("threads"), ")"},
            Error::Kind::Runtime));
}

WorkerTeam::WorkerTeam(int n, bool spin) : spin_(spin) {
  helpers_.reserve(size_t(n > 1 ? n - 1 : 0));
  for (int i = 1; i < n; ++i) {
    try {
      helpers_.emplace_back([this, i] { helper(i); });
    } catch (const std::exception &e) {
      stop();
      std::rethrow_exception(thread_start_error(e));
    }
  }
}

WorkerTeam::~WorkerTeam() { stop(); }

void WorkerTeam::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto &h : helpers_)
    h.join();
  helpers_.clear();
}

void WorkerTeam::helper(int i) {
  using Clock = std::chrono::steady_clock;
  uint64_t seen = 0;
  for (;;) {
    // spin a while for the next run (the next GEMM of a prefill is microseconds away), then sleep
    const auto until = Clock::now() + (spin_ ? std::chrono::milliseconds(1) : Clock::duration(0));
    for (int spins = 0; generation_.load(std::memory_order_acquire) == seen && !stopping_;) {
      if (spin_ && (++spins % 256 != 0 || Clock::now() <= until)) {
        _mm_pause();
        continue;
      }
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load() != seen || stopping_; });
    }
    if (stopping_)
      return;
    seen = generation_.load(std::memory_order_acquire);
    run_tasks(i);
    const bool wake = !spin_ || watched_.load(std::memory_order_relaxed); // read before the
    if (pending_.fetch_sub(1, std::memory_order_release) == 1 && wake) {  // caller may reset it
      std::lock_guard<std::mutex> lock(mutex_); // the caller, asleep or about to be, is woken
      done_.notify_one();
    }
  }
}

void WorkerTeam::run_tasks(int thread) {
  const int threads = size() - first_;
  try {
    for (int t = thread - first_; t < tasks_; t += threads)
      (*job_)(t);
  } catch (...) {
    error_->keep(std::current_exception());
  }
}

void WorkerTeam::start(int tasks, int first, const std::function<void(int)> &f, FirstError &error) {
  job_ = &f;
  tasks_ = tasks;
  first_ = first;
  error_ = &error;
  pending_.store(int(helpers_.size()), std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_); // a sleeping helper sees the new generation
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
}

void WorkerTeam::run(int tasks, const std::function<void(int)> &f) {
  FirstError error;
  start(tasks, 0, f, error);
  run_tasks(0);
  if (spin_) {
    while (pending_.load(std::memory_order_acquire) > 0) // the helpers are at work: not long
      _mm_pause();
  } else { // asleep: a helper may be waiting for this very core
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  }
  error.rethrow();
}

void WorkerTeam::run_watched(int tasks, const std::function<void(int)> &f,
                             const std::function<void()> &watch) {
  if (helpers_.empty()) // a bug, said plainly: no thread would run f
    throw Error("run_watched needs a team of 2 or more threads");
  FirstError error;
  watched_ = true;
  start(tasks, 1, f, error);
  std::unique_lock<std::mutex> lock(mutex_);
  do { // at least once, however soon the helpers are done
    lock.unlock();
    try {
      watch();
    } catch (...) {
      error.keep(std::current_exception());
    }
    lock.lock();
    done_.wait_for(lock, std::chrono::milliseconds(200),
                   [&] { return pending_.load(std::memory_order_acquire) == 0; });
  } while (pending_.load(std::memory_order_acquire) > 0);
  watched_ = false;
  lock.unlock();
  error.rethrow();
}

std::shared_ptr<WorkerTeam> TeamPool::lend(int n) {
  std::unique_ptr<WorkerTeam> team;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = idle_.begin(); it != idle_.end(); ++it)
      if ((*it)->size() == n) {
        team = std::move(*it);
        idle_.erase(it);
        break;
      }
  }
  if (!team)
    team = std::make_unique<WorkerTeam>(n, spin_);
  return std::shared_ptr<WorkerTeam>(team.release(), [this](WorkerTeam *t) {
    std::lock_guard<std::mutex> lock(mutex_);
    idle_.emplace_back(t);
  });
}

} // namespace tarnn
