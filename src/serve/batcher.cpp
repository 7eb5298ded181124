#include "batcher.h"

#include <algorithm>
#include <cmath>
#include <csignal>

#include "../jobs/test_interrupt.h"
#include "tarnn/error.h"
#include "tarnn/jobs.h"

namespace tarnn::serve {

using Clock = std::chrono::steady_clock;

std::optional<Ticket::Event> Ticket::next(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!ready_.wait_for(lock, wait, [&] { return !events_.empty(); }))
    return std::nullopt;
  Event e = std::move(events_.front());
  events_.pop_front();
  return e;
}

void Ticket::cancel() {
  std::lock_guard<std::mutex> lock(mutex_);
  cancelled_ = true;
}

bool Ticket::cancelled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cancelled_;
}

void Ticket::push(Event e) {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(std::move(e));
  ready_.notify_all();
}

Batcher::Batcher(Engine &engine, int64_t max_rows, int max_queued)
    : engine_(engine), max_rows_(std::max<int64_t>(max_rows, kMaxSamples)),
      max_queued_(std::max(max_queued, 1)), thread_([this] { loop(); }) {}

Batcher::~Batcher() {
  stop();
  thread_.join();
}

std::shared_ptr<Ticket> Batcher::submit(Job job) {
  auto ticket = std::make_shared<Ticket>();
  ticket->job_ = std::move(job);
  ticket->grown_.assign(size_t(ticket->job_.rows), -1);
  ticket->queued_at_ = Clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_ || int(queue_.size()) >= max_queued_) {
    ++stats_.rejected;
    return nullptr;
  }
  queue_.push_back(ticket);
  stats_.queued = int64_t(queue_.size());
  wake_.notify_all();
  return ticket;
}

void Batcher::stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  stopping_ = true;
  wake_.notify_all();
}

BatcherStats Batcher::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void Batcher::loop() {
  for (;;) {
    std::vector<std::shared_ptr<Ticket>> batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_)
        break;
      // first come, first served: requests in order while their rows fit
      int64_t rows = 0;
      while (!queue_.empty()) {
        const std::shared_ptr<Ticket> t = queue_.front();
        if (!t->cancelled() && rows > 0 && rows + t->job_.rows > max_rows_)
          break;
        queue_.pop_front();
        if (t->cancelled()) // its client left while it waited: its slots go to the next
          continue;
        rows += t->job_.rows;
        batch.push_back(t);
      }
      stats_.queued = int64_t(queue_.size());
      stats_.running = int64_t(batch.size());
    }
    if (!batch.empty())
      run_batch(batch);
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.running = 0;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto &t : queue_)
    t->push({"error", {{"error", "the server is stopping"}}});
  queue_.clear();
}

namespace {

// Columns [from, to] of each of `rows` images (stride T) from `out`, base64.
nlohmann::json columns(const uint8_t *out, int64_t rows, size_t T, int from, int to) {
  nlohmann::json images = nlohmann::json::array();
  for (int64_t r = 0; r < rows; ++r)
    images.push_back(base64_encode(out + size_t(r) * T + size_t(from), size_t(to - from + 1)));
  return images;
}

} // namespace

// The requests of a batch as one rollout's inputs: their rows one after another, each row with
// its request's RNG key and temperature (a row's DrawKey), and where each request's rows start.
struct Batcher::Merged {
  const Config &c;
  size_t T;
  std::vector<int64_t> start;
  std::vector<uint8_t> given, known, out;
  std::vector<uint64_t> seeds, images;
  std::vector<float> temperatures;
  std::vector<double> log_prob;
  int64_t rows = 0, generated = 0;
  nlohmann::json summary; // batch_images, batch_requests: in every event
  Clock::time_point t0 = Clock::now();

  Merged(const Config &config, const std::vector<std::shared_ptr<Ticket>> &batch)
      : c(config), T(size_t(config.bytes_per_image())) {
    for (const auto &t : batch) {
      const Job &j = t->job_;
      start.push_back(rows);
      rows += j.rows;
      generated += j.rows * (int64_t(T) - j.known_bytes);
      given.insert(given.end(), j.given.begin(), j.given.end());
      known.insert(known.end(), j.known.begin(), j.known.end());
      seeds.insert(seeds.end(), size_t(j.rows), j.seed);
      temperatures.insert(temperatures.end(), size_t(j.rows), float(j.temperature));
      images.insert(images.end(), j.images.begin(), j.images.end());
    }
    out.resize(size_t(rows) * T);
    log_prob.resize(size_t(rows));
    summary = {{"batch_images", rows}, {"batch_requests", batch.size()}};
  }

  Rollout rollout() {
    Rollout job;
    job.count = rows;
    job.given = given.data();
    job.known = known.data();
    job.out = out.data();
    job.log_prob = log_prob.data();
    job.seeds = seeds.data();
    job.images = images.data();
    job.temperatures = temperatures.data();
    return job;
  }

  double seconds() const { return std::chrono::duration<double>(Clock::now() - t0).count(); }

  // A "grow" event of columns [from, to] of the images of request k (its rows from `a`).
  Ticket::Event grow(const Ticket &k, int64_t a, int from, int to, double seconds) const {
    nlohmann::json data = summary;
    data["from"] = from;
    data["to"] = to;
    data["seconds"] = seconds;
    data["images"] = columns(out.data() + size_t(a) * T, k.job_.rows, T, from, to);
    return {"grow", std::move(data)};
  }
};

// On the engine's workers (under grown_mutex_): rows [image, image + n) hold columns [0, t]; a
// request's columns go out once every one of its rows holds them. Whether any client listens.
bool Batcher::report_growth(const std::vector<std::shared_ptr<Ticket>> &batch, const Merged &m,
                            int64_t image, int64_t n, int t) {
  bool listened = false;
  for (size_t i = 0; i < batch.size(); ++i) {
    Ticket &k = *batch[i];
    listened = listened || !k.cancelled();
    const int64_t a = m.start[i], b = a + k.job_.rows;
    if (b <= image || a >= image + n || k.job_.kind == Kind::Score)
      continue;
    for (int64_t r = std::max(a, image); r < std::min(b, image + n); ++r)
      k.grown_[size_t(r - a)] = t;
    const int lo = *std::min_element(k.grown_.begin(), k.grown_.end());
    if (lo > k.shown_) {
      k.push(m.grow(k, a, k.shown_ + 1, lo, m.seconds()));
      k.shown_ = lo;
    }
  }
  return listened;
}

// At each report of a run: Error (which ends the run) when the server is stopping or no client
// of the batch listens any more.
void Batcher::check_continues(bool listened) {
  bool stopping;
  int64_t finished; // images of the requests answered before
  {
    std::lock_guard<std::mutex> l(mutex_);
    stopping = stopping_;
    finished = stats_.images_done;
  }
  // TARNN_TEST_INTERRUPT_AFTER: the signal at a known report of a run, which then ends here
  if (const int sig = stopping ? 0 : test_interrupt_due(finished)) {
    std::raise(sig); // the command's handler: the server stops, as on a signal from outside
    stop();
    stopping = true;
  }
  if (stopping)
    throw Error("the server is stopping");
  if (!listened)
    throw Error("every client of this batch left");
}

// Each request's "done" (after its last columns, for a client that follows the growth).
void Batcher::answer(const std::vector<std::shared_ptr<Ticket>> &batch, const Merged &m) {
  const double seconds = m.seconds();
  const int last = m.c.positions(); // the last column
  { // counted before the answers go out: a client that asks for the stats next sees its request
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.requests_done += int64_t(batch.size());
    stats_.images_done += m.rows;
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    Ticket &k = *batch[i];
    const int64_t a = m.start[i];
    nlohmann::json done = m.summary;
    done["run_seconds"] = seconds;
    done["seconds"] = std::chrono::duration<double>(Clock::now() - k.queued_at_).count();
    done["images_per_second"] = double(m.rows) / seconds;
    done["pixels_per_second"] = double(m.generated) / seconds;
    done["images"] = columns(m.out.data() + size_t(a) * m.T, k.job_.rows, m.T, 0, last);
    if (k.job_.kind == Kind::Score)
      done["bits_per_dim"] = bits_per_dim(m.log_prob[size_t(a)], m.c);
    else
      done["temperature"] = k.job_.temperature;
    if (k.job_.kind != Kind::Score && k.shown_ < last)
      k.push(m.grow(k, a, k.shown_ + 1, last, seconds));
    k.push({"done", std::move(done)});
  }
}

void Batcher::run_batch(std::vector<std::shared_ptr<Ticket>> batch) {
  Merged m(engine_.config(), batch);
  Rollout job = m.rollout();
  std::mutex grown_mutex;
  job.grown = [&](int64_t image, int64_t n, int t) {
    std::lock_guard<std::mutex> lock(grown_mutex);
    check_continues(report_growth(batch, m, image, n, t));
  };
  try {
    engine_.run(job);
  } catch (const std::exception &e) {
    for (const auto &t : batch)
      t->push({"error", {{"error", e.what()}}});
    return;
  }
  answer(batch, m);
}

} // namespace tarnn::serve
