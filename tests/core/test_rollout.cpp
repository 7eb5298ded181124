// What a server relies on from a rollout: images of different runs merged into one batch (each
// image its own RNG key) come out as each run alone would give them, and the images can be
// watched as they grow (Rollout::grown), the columns shown being the final ones.
#include <cmath>
#include <gtest/gtest.h>
#include <map>
#include <mutex>

#include "tarnn/tarnn.h"
#include "test_util.h"

using namespace tarnn;
using namespace tarnn_test;

namespace {

Engine small_engine(int64_t batch, int threads) {
  RunOptions o;
  o.batch = batch;
  o.threads = threads;
  return Engine(load_model(small_golden()), o);
}

// `count` images of the run with `seed` from image `first`, completed where `known` says (null:
// sampled).
std::vector<uint8_t> run_alone(Engine &e, int64_t count, uint64_t seed, int64_t first,
                               const std::vector<uint8_t> *given = nullptr,
                               const std::vector<uint8_t> *known = nullptr,
                               float temperature = 1.0f) {
  std::vector<uint8_t> out(size_t(count) * e.config().bytes_per_image());
  Rollout job;
  job.count = count;
  job.seed = seed;
  job.temperature = temperature;
  job.first_index = first;
  job.given = given ? given->data() : nullptr;
  job.known = known ? known->data() : nullptr;
  job.out = out.data();
  e.run(job);
  return out;
}

} // namespace

// Two runs (seed 5 images 3..5 at temperature 0.7, seed 9 images 0..1 at 1.3) merged in one job,
// interleaved, give each run's own images, whatever the batch and threads; sampling and
// completion (the prefill path).
TEST(RolloutKeys, MergedRunsGiveEachRunsOwnImages) {
  Engine alone = small_engine(8, 1);
  const size_t T = size_t(alone.config().bytes_per_image());
  std::vector<uint8_t> given(5 * T), known(5 * T, 0);
  for (size_t i = 0; i < given.size(); ++i)
    given[i] = uint8_t(i * 37 % 251);
  for (int r = 0; r < 5; ++r) // the first third of each image known: the prefill runs
    std::fill_n(known.begin() + long(r * T), T / 3, 1);
  for (const bool complete : {false, true}) {
    const auto *g = complete ? &given : nullptr;
    const auto *k = complete ? &known : nullptr;
    // run a: given rows 0..2; run b: rows 3..4; merged: a0 b0 a1 b1 a2
    const std::vector<uint8_t> ga(given.begin(), given.begin() + long(3 * T));
    const std::vector<uint8_t> gb(given.begin() + long(3 * T), given.end());
    const std::vector<uint8_t> a = run_alone(alone, 3, 5, 3, complete ? &ga : nullptr, k, 0.7f);
    const std::vector<uint8_t> b = run_alone(alone, 2, 9, 0, complete ? &gb : nullptr, k, 1.3f);
    EXPECT_NE(a, run_alone(alone, 3, 5, 3, complete ? &ga : nullptr, k)) << "T = 0.7 and 1 alike";
    std::vector<uint8_t> merged;
    for (const int row : {0, 3, 1, 4, 2})
      merged.insert(merged.end(), given.begin() + long(row * T), given.begin() + long(row * T + T));
    g = complete ? &merged : nullptr;
    const std::vector<uint64_t> seeds = {5, 9, 5, 9, 5}, images = {3, 0, 4, 1, 5};
    const std::vector<float> temperatures = {0.7f, 1.3f, 0.7f, 1.3f, 0.7f};
    for (const auto &[batch, threads] : {std::pair{5, 1}, {2, 1}, {5, 2}, {1, 3}}) {
      Engine e = small_engine(batch, threads);
      std::vector<uint8_t> out(5 * T);
      Rollout job;
      job.count = 5;
      job.seed = 12345; // not used: every image has its own key
      job.seeds = seeds.data();
      job.images = images.data();
      job.temperature = 5.0f; // not used either: every image has its own
      job.temperatures = temperatures.data();
      job.given = g ? g->data() : nullptr;
      job.known = k ? k->data() : nullptr;
      job.out = out.data();
      e.run(job);
      for (int r = 0; r < 5; ++r) {
        const auto &want = r % 2 ? b : a;
        const size_t at = size_t(r / 2) * T;
        EXPECT_TRUE(std::equal(out.begin() + long(r * T), out.begin() + long((r + 1) * T),
                               want.begin() + long(at)))
            << "row " << r << " batch " << batch << " threads " << threads << " complete "
            << complete;
      }
    }
  }
  Engine e = small_engine(4, 1);
  std::vector<uint8_t> out(T);
  const uint64_t seed = 1;
  Rollout half;
  half.count = 1;
  half.out = out.data();
  half.seeds = &seed; // images missing
  EXPECT_THROW(e.run(half), Error);
}

// A temperature is a finite float above 0, for the job and for each image; per-image ones go with
// per-image keys. Each refusal is an Error before any work.
TEST(RolloutKeys, TemperaturesOutOfRangeAreRefused) {
  Engine e = small_engine(4, 1);
  std::vector<uint8_t> out(size_t(e.config().bytes_per_image()));
  for (const float t : {0.0f, -1.0f, NAN, INFINITY, -0.0f}) {
    Rollout job;
    job.count = 1;
    job.out = out.data();
    job.temperature = t;
    EXPECT_THROW(e.run(job), Error) << t;
    const uint64_t seed = 1, image = 0;
    job.temperature = 1.0f;
    job.seeds = &seed;
    job.images = &image;
    job.temperatures = &t;
    EXPECT_THROW(e.run(job), Error) << t;
  }
  const float t = 0.7f;
  Rollout loose; // temperatures without per-image keys
  loose.count = 1;
  loose.out = out.data();
  loose.temperatures = &t;
  EXPECT_THROW(e.run(loose), Error);
  EXPECT_THROW(sampling_temperature(1e-50), Error); // 0 as a float
  EXPECT_THROW(sampling_temperature(1e39), Error);  // infinite as a float
  EXPECT_EQ(sampling_temperature(0.7), 0.7f);
}

// Every call of `grown` shows columns [0, t] as they end up, t grows per image to the last
// position, and every image is shown; with 1 or several threads and batches.
TEST(RolloutGrown, ShowsFinalColumnsAsTheyGrow) {
  for (const auto &[batch, threads] : {std::pair{6, 1}, {2, 2}, {6, 3}}) {
    Engine e = small_engine(batch, threads);
    const Config &c = e.config();
    const size_t T = size_t(c.bytes_per_image());
    const std::vector<uint8_t> want = run_alone(e, 6, 4, 0);
    std::vector<uint8_t> out(6 * T, 0);
    std::vector<int> last(6, -1);
    std::mutex m;
    int calls = 0;
    Rollout job;
    job.count = 6;
    job.seed = 4;
    job.out = out.data();
    job.grown = [&](int64_t image, int64_t n, int t) {
      std::lock_guard<std::mutex> lock(m);
      ++calls;
      ASSERT_GE(image, 0);
      ASSERT_LE(image + n, 6);
      for (int64_t r = image; r < image + n; ++r) {
        EXPECT_GT(t, last[size_t(r)]) << "image " << r;
        last[size_t(r)] = t;
        EXPECT_TRUE(std::equal(out.begin() + long(r * T), out.begin() + long(r * T) + t + 1,
                               want.begin() + long(r * T)))
            << "image " << r << " t " << t;
      }
    };
    e.run(job);
    EXPECT_EQ(out, want);
    EXPECT_GE(calls, 5); // 39 positions, a call every 8 at most
    for (int r = 0; r < 6; ++r)
      EXPECT_EQ(last[size_t(r)], c.positions()) << "image " << r;
  }
}

// The benchmark times the job users run through Rollout::stepped: each step reported once by every
// thread's share of each chunk, with a time, a prefill (a completion's first positions) as one
// call at its last position, and the images the same bytes as without the hook.
TEST(RolloutStepped, EveryStepAfterThePrefillOncePerShareSameImages) {
  for (const auto &[batch, threads] : {std::pair{6, 1}, {2, 2}, {6, 3}}) {
    Engine e = small_engine(batch, threads);
    const Config &c = e.config();
    const int T = c.bytes_per_image(), L = c.positions(), P = 10;
    std::vector<uint8_t> given(size_t(6) * T, 7), known(given.size(), 0);
    for (int r = 0; r < 6; ++r)
      std::fill_n(known.begin() + long(r) * T, P, 1);
    for (const bool complete : {false, true}) {
      const std::vector<uint8_t> want =
          complete ? run_alone(e, 6, 4, 0, &given, &known) : run_alone(e, 6, 4, 0);
      std::vector<uint8_t> out(size_t(6) * T);
      std::map<int, int> calls;
      std::mutex m;
      Rollout job;
      job.count = 6;
      job.seed = 4;
      job.given = complete ? given.data() : nullptr;
      job.known = complete ? known.data() : nullptr;
      job.out = out.data();
      job.stepped = [&](int t, double seconds) {
        std::lock_guard<std::mutex> lock(m);
        ++calls[t];
        EXPECT_GE(seconds, 0.0);
      };
      e.run(job);
      EXPECT_EQ(out, want) << "batch " << batch << " threads " << threads;
      // chunks: each thread's share of 6 images, ceil(batch / threads) rows at a time
      const int rows = (batch + threads - 1) / threads,
                chunks = threads * ((6 / threads + rows - 1) / rows);
      const int first = complete ? P - 1 : 0; // the prefill: one call at its last position
      ASSERT_EQ(int(calls.size()), L - first) << "batch " << batch << " threads " << threads;
      for (const auto &[t, n] : calls) {
        EXPECT_GE(t, first);
        EXPECT_EQ(n, chunks) << "t " << t;
      }
    }
  }
}
