// The known leading run in the parallel form (src/model/prefill.h) against the step-by-step
// rollout: the same state after P positions, the same log-likelihoods and the same images, bit
// for bit, for scoring (everything known), completion (the paper's top half, K samples sharing
// one prefill) and masks whose leading runs differ.
#include <cstring>
#include <gtest/gtest.h>

#include "src/cpu/cpu_ops.h"
#include "src/cpu/threads.h"
#include "src/model/decoder.h"
#include "src/model/prefill.h"
#include "src/model/rollout.h"
#include "tarnn/tarnn.h"
#include "test_util.h"

using namespace tarnn;
using namespace tarnn_test;

namespace {

const Model &mnist_random() {
  static const Model m = random_model(Config::mnist(), 42);
  return m;
}

Engine engine(const Model &m, bool prefill, int batch = 8, int threads = 2) {
  RunOptions o;
  o.prefill = prefill;
  o.batch = batch;
  o.threads = threads;
  return Engine(m, o);
}

ImageSet noise(const Config &c, int64_t n, uint32_t seed) {
  ImageSet s{n, c.height, c.width, c.channels,
             std::vector<uint8_t>(size_t(n) * c.bytes_per_image())};
  for (auto &b : s.bytes) {
    seed = seed * 1664525u + 1013904223u;
    b = uint8_t(seed >> 24);
  }
  return s;
}

// P positions of `image` prefilled in format f with `rows` rows of the prefill's buffers (the
// layout's total, no slack: a row past its end is ASan's), on one thread and on each team of
// `teams`: the state and the last outputs of the steps, bit for bit.
void expect_prefill_as_the_steps(const Config &c, const CpuWeights &w, const uint8_t *image, int P,
                                 StateFormat f, int64_t rows, std::initializer_list<int> teams) {
  Decoder<CpuOps> stepped(c, w.view(), 1, f);
  std::vector<float> o(size_t(c.d_out()));
  for (int t = 0; t < P; ++t)
    stepped.step(t, image + t, o.data());
  for (int threads : teams) {
    const BatchLayout layout = batch_layout(c, rows, f, 1);
    std::vector<double> memory(layout.total / 8);
    const StepBuffers b = step_buffers(memory.data(), layout);
    WorkerTeam team(threads, false);
    PrefillOps pre(c, w.view(), b, CpuKernels{}, threads > 1 ? &team : nullptr);
    std::vector<float> last;
    prefill_one(pre, c, image, P, last);
    EXPECT_EQ(0, std::memcmp(b.state, stepped.buffers().state, b.state_row_bytes))
        << name(f) << ", " << threads << " threads";
    EXPECT_EQ(0, std::memcmp(last.data(), o.data(), o.size() * 4)) << name(f) << threads;
  }
}

} // namespace

// The state after P = 392 positions (the top half of an MNIST image), every layer and head, in
// every state format the engine offers (fp16: rounded at each row as at each step).
TEST(Prefill, StateAfterTheKnownHalfIsTheSteppedState) {
  const Model &m = mnist_random();
  const Config &c = m.config;
  const CpuWeights w(m, Precision::Fp32);
  const ImageSet img = noise(c, 1, 3);
  const int P = positions_unless_sanitized(392) < 0 ? 392 : 64;
  // on one thread, and on teams of 2 and 3 (GEMM and LayerNorm rows, attention heads split)
  for (StateFormat f : all_state_formats())
    if (!refusal(f))
      expect_prefill_as_the_steps(c, w, img.image(0), P, f, 128, {1, 2, 3});
}

// A team larger than the slices a prefill cuts (src/cpu/cpu_kernels.cpp: PrefillOps::split): the
// small golden's 39 rows make 2 GEMM and LayerNorm slices of at least 16 rows and its 3 heads 3
// attention slices, so a team of 3, 4 or 5 has threads with no slice. They must do nothing: in
// the engine's own layout (rows = the positions) a thread past the slices wrote rows past the
// buffers' end and heads past the layer's (the next layer's state), which a run on a machine with
// more cores than images met (the GPU suite's CPU reference on an H100's 16 cores, 2026-11-25).
TEST(Prefill, TeamsWithMoreThreadsThanSlices) {
  const Model m = load_model(small_golden());
  const Config &c = m.config;
  const CpuWeights w(m, Precision::Fp32);
  const ImageSet img = noise(c, 1, 5);
  const int P = c.positions();
  for (StateFormat f : {StateFormat::Fp32, StateFormat::Fp16}) // the engine's rows: P
    expect_prefill_as_the_steps(c, w, img.image(0), P, f, std::min(kPrefillRows, P),
                                {1, 2, 3, 4, 5});
  // and through the engine: one image scored and completed on 1 to 5 threads (one worker, the
  // rest its prefill's team) as on one
  const std::vector<uint8_t> top = make_mask({}, c);
  const ImageSet in = noise(c, 1, 9);
  Engine one = engine(m, true, 1, 1);
  const std::vector<double> scored = score_images(one, in);
  const std::vector<uint8_t> completed = complete_images(one, in, {0}, top, 1, 3).bytes;
  for (int threads : {2, 3, 4, 5}) {
    Engine e = engine(m, true, 1, threads);
    EXPECT_EQ(score_images(e, in), scored) << threads << " threads";
    EXPECT_TRUE(complete_images(e, in, {0}, top, 1, 3).bytes == completed)
        << "completed on " << threads << " threads";
  }
}

TEST(Prefill, ScoresAsTheStepsDo) {
  const Model &m = mnist_random();
  const ImageSet in = noise(m.config, 3, 7);
  Engine a = engine(m, true), b = engine(m, false);
  const std::vector<double> fast = score_images(a, in), slow = score_images(b, in);
  EXPECT_EQ(fast, slow); // the same doubles, added in the same order
  Engine one = engine(m, true, 1, 1);
  EXPECT_EQ(score_images(one, in), slow);
}

// The paper's Figure 3: the top half known, 4 samples each sharing one prefill.
TEST(Prefill, CompletesAsTheStepsDo) {
  const Model &m = mnist_random();
  const Config &c = m.config;
  const ImageSet in = noise(c, 3, 11);
  const std::vector<uint8_t> top = make_mask({}, c);
  Engine a = engine(m, true), b = engine(m, false);
  const int K = positions_unless_sanitized(1) < 0 ? 4 : 2;
  const ImageSet fast = complete_images(a, in, {2, 0}, top, K, 5);
  const ImageSet slow = complete_images(b, in, {2, 0}, top, K, 5);
  EXPECT_EQ(fast.bytes, slow.bytes);
  // and whatever the batch and threads
  Engine c1 = engine(m, true, 1, 1);
  EXPECT_EQ(complete_images(c1, in, {2, 0}, top, K, 5).bytes, fast.bytes);
}

// Per-image masks with different leading runs: the chunk prefills the shortest, the steps do the
// rest (known bytes fed as before).
TEST(Prefill, LeadingRunsOfDifferentLengths) {
  const Model m = load_model(small_golden());
  const Config &c = m.config;
  const ImageSet in = noise(c, 4, 13);
  std::vector<uint8_t> known(size_t(in.count) * c.bytes_per_image(), 0);
  const int runs[4] = {30, 12, 39, 1};
  for (int i = 0; i < 4; ++i)
    for (int t = 0; t < runs[i]; ++t)
      known[size_t(i) * c.bytes_per_image() + t] = 1;
  for (int i = 0; i < 4; ++i) // and a known byte after the run: teacher-forced by the steps
    known[size_t(i) * c.bytes_per_image() + 35] = 1;
  Engine a = engine(m, true, 3, 1), b = engine(m, false, 3, 1);
  const std::vector<int64_t> all = {0, 1, 2, 3};
  EXPECT_EQ(complete_images(a, in, all, known, 3, 9).bytes,
            complete_images(b, in, all, known, 3, 9).bytes);
  EXPECT_EQ(score_images(a, in), score_images(b, in));
}

TEST(Prefill, LeadingRunIsTheCommonKnownPrefix) {
  const Config c = load_model(small_golden()).config; // T = 40, L = 39
  std::vector<uint8_t> given(80, 1), known(80, 1);
  Rollout job;
  job.count = 2;
  job.given = given.data();
  EXPECT_EQ(leading_run(c, job, 0, 2), 39); // everything known: all L positions
  job.known = known.data();
  known[10] = 0;
  known[40 + 20] = 0;
  EXPECT_EQ(leading_run(c, job, 0, 2), 10); // p_0 .. p_9 fed; p_10 is the first to sample
  EXPECT_EQ(leading_run(c, job, 1, 1), 20);
  known[40 + 1] = 0;
  EXPECT_EQ(leading_run(c, job, 0, 2), 1); // nothing to gain: the steps do it
  job.given = nullptr;
  EXPECT_EQ(leading_run(c, job, 0, 2), 0);
}

// Issue 42, point 5: score answered Ctrl-C only after a whole chunk's prefill (a 256-image batch:
// 9.6 s on one thread), since the rollout reported only after it. The prefill reports after each
// image, and a stop asked for there is taken there: the first report, which stops the rollout
// here, comes after one image's positions, not after the chunk's.
TEST(Prefill, AStopIsTakenAfterTheImageItIsOn) {
  const Model m = load_model(small_golden());
  const Config &c = m.config;
  const CpuWeights w(m, Precision::Fp32);
  const int n = 8, L = c.positions();
  const BatchLayout layout = batch_layout(c, n, StateFormat::Fp32);
  std::vector<double> memory(layout.total / 8 + 1);
  const BatchLayout pre_layout = batch_layout(c, L, StateFormat::Fp32, 1);
  std::vector<double> pre_memory(pre_layout.total / 8 + 1);
  const StepBuffers b = step_buffers(memory.data(), layout);
  const StepBuffers pre_b = step_buffers(pre_memory.data(), pre_layout);
  const CpuKernels kernels{}; // (the ops keep references to the buffers and the kernels)
  CpuOps ops(c, w.view(), b, kernels);
  PrefillOps pre(c, w.view(), pre_b, kernels, nullptr);
  const ImageSet in = noise(c, n, 17);
  std::vector<uint8_t> out(in.bytes.size());
  std::vector<double> log_prob(n);
  Rollout job; // a score: every byte given
  job.count = n;
  job.given = in.bytes.data();
  job.out = out.data();
  job.log_prob = log_prob.data();
  struct Stop {};
  std::vector<int64_t> reports;
  EXPECT_THROW(rollout(
                   ops, c, job,
                   [&](int64_t done) {
                     reports.push_back(done);
                     throw Stop{};
                   },
                   8, &pre),
               Stop);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0], L) << "the first report came after " << reports[0] / L << " images";
  // undisturbed, the reports count every image's positions, up to the chunk's
  reports.clear();
  rollout(
      ops, c, job, [&](int64_t done) { reports.push_back(done); }, 8, &pre);
  ASSERT_GE(reports.size(), size_t(n));
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(reports[size_t(r)], int64_t(r + 1) * L);
  EXPECT_EQ(reports.back(), int64_t(n) * L);
}
