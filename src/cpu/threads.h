// Work on several CPU threads with nothing escaping: every thread is joined, whatever fails, and
// the first exception of any of them (a failed thread start included) is rethrown on the caller.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

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

// The Error a failed std::thread start becomes.
std::exception_ptr thread_start_error(const std::exception &e);

// run(tasks, f): f(0) .. f(tasks - 1), each once, thread i of the team's n taking tasks i, i + n,
// ... (f(0) on the caller's thread and the rest on n - 1 helper threads started once); returns
// when all are done, rethrowing the first exception of any. No index at or past `tasks` is given:
// a thread with no task does nothing (the work need not fill the team). Made for many
// short calls in a row (a prefill's GEMMs, 33 per chunk): starting a thread per call cost about
// 70 us each (docs/COMPLETE.md), and waking a core that had gone idle more. With `spin`, a helper
// spins for about a millisecond after its last call, then sleeps until the next, and the caller
// spins while the helpers finish; without it (where the threads at work could outnumber the cores
// this process may use: spinning there would take a core from a thread at work) a helper sleeps at
// once, and so does the caller until the last helper is done. All are joined by the destructor. A
// failed thread start throws from the constructor (thread_start_error).
class WorkerTeam {
public:
  WorkerTeam(int n, bool spin);
  ~WorkerTeam();
  WorkerTeam(const WorkerTeam &) = delete;
  WorkerTeam &operator=(const WorkerTeam &) = delete;

  int size() const { return int(helpers_.size()) + 1; }
  void run(int tasks, const std::function<void(int)> &f);
  // The same, but the caller runs none of f: the n - 1 helpers run f(0) .. f(tasks - 1) (helper h
  // tasks h - 1, h - 1 + n - 1, ...) while the caller calls watch() once, then about 5 times a
  // second until they are done (a job's progress, reported on the calling thread; an exception
  // of watch stops nothing by itself: it is rethrown at the end, and f should watch failed() of
  // what watch() reports to). The team must have a helper (n >= 2).
  void run_watched(int tasks, const std::function<void(int)> &f,
                   const std::function<void()> &watch);

private:
  void helper(int i);
  void stop();
  // f's tasks handed out from thread `first` on, `tasks` in all; the helpers woken to run theirs
  void start(int tasks, int first, const std::function<void(int)> &f, FirstError &error);
  void run_tasks(int thread); // thread's tasks of the current run (0: the caller's)

  std::vector<std::thread> helpers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_; // helpers wait for a run; the caller (no spin) for them
  std::atomic<uint64_t> generation_{0}; // one more per run
  std::atomic<int> pending_{0};         // helpers still in the current run
  std::atomic<bool> stopping_{false};
  bool spin_;                        // no more threads at work than cores
  std::atomic<bool> watched_{false}; // the caller waits in run_watched: wake it whatever spin_
  const std::function<void(int)> *job_ = nullptr;
  int tasks_ = 0, first_ = 0; // the current run's tasks, and the thread that takes task 0
  FirstError *error_ = nullptr;
};

// Teams kept from run to run (a backend's), so that their threads start once and the scheduler
// has placed them on their own cores by the next run. lend(n) gives an idle team of n threads, or
// a new one; it comes back when the last copy of the pointer goes. The pool must outlive them.
// Its teams spin (WorkerTeam) where `spin`: the backend's threads, every team's together, are no
// more than the cores this process may use (cores.h).
class TeamPool {
public:
  explicit TeamPool(bool spin) : spin_(spin) {}
  std::shared_ptr<WorkerTeam> lend(int n);

private:
  bool spin_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<WorkerTeam>> idle_;
};

} // namespace tarnn
