// tarnn serve's one engine, shared: requests wait in a bounded queue and a single thread runs
// them, as many as fit merged into one rollout (each row keeps its own RNG key, so a request's
// images do not depend on what it was merged with). Each request reads its events from a Ticket:
// the columns of its images as the rollout produces them, then a summary.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "request.h"
#include "tarnn/run.h"

namespace tarnn::serve {

// One request's side: the events of its run, in order, and a way to give up on it.
class Ticket {
public:
  struct Event {
    std::string name; // "grow" (columns of every image), "done", "error"
    nlohmann::json data;
  };
  // The next event, waiting up to `wait`; nothing when none came. After "done" or "error" there
  // are no more.
  std::optional<Event> next(std::chrono::milliseconds wait);
  // The client went away: its rows are skipped if still queued, and a running batch whose every
  // request was cancelled stops.
  void cancel();
  bool cancelled() const;

private:
  friend class Batcher;
  void push(Event e);
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Event> events_;
  bool cancelled_ = false;
  Job job_;
  int shown_ = -1;         // columns [0, shown_] of its images were sent
  std::vector<int> grown_; // [rows] the last column each row holds
  std::chrono::steady_clock::time_point queued_at_;
};

struct BatcherStats {
  int64_t queued = 0, running = 0, requests_done = 0, images_done = 0, rejected = 0;
};

class Batcher {
public:
  // max_rows: images merged into one rollout at most; max_queued: requests waiting at most.
  Batcher(Engine &engine, int64_t max_rows, int max_queued);
  ~Batcher(); // stops
  // Queues a parsed request; null when the queue is full (the caller answers 503).
  std::shared_ptr<Ticket> submit(Job job);
  // Ends the running batch at its next report and every queued request with an "error" event.
  void stop();
  BatcherStats stats() const;
  int64_t max_rows() const { return max_rows_; }
  int max_queued() const { return max_queued_; }

private:
  void loop();
  void run_batch(std::vector<std::shared_ptr<Ticket>> batch);
  // run_batch's steps: the requests merged, their growth reported, the run stopped when no one
  // listens or the server stops, and the answers (batcher.cpp).
  struct Merged;
  bool report_growth(const std::vector<std::shared_ptr<Ticket>> &batch, const Merged &m,
                     int64_t image, int64_t n, int t);
  void check_continues(bool listened);
  void answer(const std::vector<std::shared_ptr<Ticket>> &batch, const Merged &m);

  Engine &engine_;
  const int64_t max_rows_;
  const int max_queued_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Ticket>> queue_;
  bool stopping_ = false;
  BatcherStats stats_;
  std::thread thread_;
};

} // namespace tarnn::serve
