// The forward pass and the rollout (src/model) on the CPU backend in RNN mode against the PyTorch
// parallel reference (goldens), the fast path against the plain path over a full rollout, and the
// reproducibility contract of SPEC section 3.
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "src/cpu/cpu_ops.h"
#include "src/engine/testing.h"
#include "src/model/decoder.h"
#include "tarnn/tarnn.h"
#include "test_util.h"
#include "threads_util.h"

using namespace tarnn;
using namespace tarnn_test;

namespace {

RunOptions run_options(int64_t batch, int threads, Precision precision = Precision::Fp32) {
  RunOptions o;
  o.batch = batch;
  o.threads = threads;
  o.precision = precision;
  return o;
}

// An engine on the packed GEMM, or with `reference` on the plain one.
Engine engine_of(const Model &m, const RunOptions &o, bool reference) {
  Knobs k;
  k.set("reference_gemm", reference ? "on" : "off");
  return engine_with(m, o, k);
}

// Teacher-forces the golden inputs through the decoder; checks every position's mixture
// parameters and each image's bits/dim against tools/random_model.py's float64 reference
// (expected.json; with bf16, expected-bf16.json: the reference with bf16 GEMM inputs).
void check_golden(const std::string &dir, double param_tol, double bpd_tol, bool reference,
                  Precision precision = Precision::Fp32, double mean_tol = 1.0) {
  const Model m = load_model(dir);
  const Config &c = m.config;
  const CpuWeights w(m, precision);
  const ImageSet in = read_images(dir + "/inputs-idx-ubyte", c);
  const auto fp32 = nlohmann::json::parse(read_file(dir + "/expected.json"));
  const auto expected = precision == Precision::Bf16
                            ? nlohmann::json::parse(read_file(dir + "/expected-bf16.json"))
                            : fp32;
  const int n = int(in.count), K3 = c.d_out();
  const int limit = positions_unless_sanitized(100);
  const int T = c.bytes_per_image();                           // the images' stride
  const int last = limit < 0 ? T - 1 : std::min(T - 1, limit); // positions checked
  Decoder<CpuOps> dec(c, w.view(), n, StateFormat::Fp32, CpuKernels{reference});
  std::vector<uint8_t> cur(n);
  std::vector<float> o(size_t(n) * K3);
  double worst = 0, sum = 0, sum_fp32 = 0;
  for (int t = 0; t < last; ++t) {
    for (int r = 0; r < n; ++r)
      cur[r] = in.bytes[size_t(r) * T + t];
    dec.step(t, cur.data(), o.data());
    for (int r = 0; r < n; ++r)
      for (int j = 0; j < K3; ++j) {
        const double want = expected["mixture_params"][r][t][j];
        worst = std::max(worst, std::fabs(o[size_t(r) * K3 + j] - want));
        sum += std::fabs(o[size_t(r) * K3 + j] - want);
        sum_fp32 +=
            std::fabs(o[size_t(r) * K3 + j] - fp32["mixture_params"][r][t][j].get<double>());
        ASSERT_NEAR(o[size_t(r) * K3 + j], want, param_tol) << "image " << r << " t " << t;
      }
  }
  const double mean = sum / (double(n) * last * K3);
  EXPECT_LT(mean, mean_tol);
  if (precision != Precision::Fp32) { // and it is that precision's model, not fp32's: nearer its
                                      // reference than fp32's over every parameter
    EXPECT_LT(sum, sum_fp32);
    std::printf("%s: mean parameter error %.3g against the %s reference, %.3g against fp32's\n",
                dir.c_str(), mean, name(precision), sum_fp32 / (double(n) * last * K3));
  }
  if (last < T - 1) { // the sanitizers' pass: the positions above, not the rollout
    std::printf("%s: %d positions checked (sanitizers)\n", dir.c_str(), last);
    return;
  }
  std::vector<double> lp(n);
  std::vector<uint8_t> out(in.bytes.size());
  Rollout job;
  job.count = n;
  job.given = in.bytes.data();
  job.out = out.data();
  job.log_prob = lp.data();
  engine_of(m, run_options(2, 2, precision), reference).run(job);
  double worst_bpd = 0;
  for (int r = 0; r < n; ++r) {
    const double bpd = -lp[r] / (c.positions() * std::log(2.0));
    const double want = expected["bits_per_dim"][r].get<double>();
    worst_bpd = std::max(worst_bpd, std::fabs(bpd - want));
    EXPECT_NEAR(bpd, want, bpd_tol) << "image " << r;
  }
  EXPECT_EQ(out, in.bytes); // teacher forcing reproduces the input
  std::printf("%s (%s): mixture-parameter error worst %.3g, mean %.3g over %d positions; "
              "bits/dim %.3g\n",
              dir.c_str(), name(precision), worst, mean, T - 1, worst_bpd);
}

// The images of a run; under the sanitizers, their first 100 positions (the rest stay 0).
std::vector<uint8_t> sample(const Model &m, int64_t count, uint64_t seed, int batch, int threads,
                            int64_t first = 0, bool reference = false) {
  Engine engine = engine_of(m, run_options(batch, threads), reference);
  std::vector<uint8_t> out(size_t(count) * m.config.bytes_per_image());
  Rollout job;
  job.count = count;
  job.seed = seed;
  job.first_index = first;
  job.out = out.data();
  job.positions = positions_unless_sanitized(100);
  engine.run(job);
  return out;
}

const Model &mnist_random() {
  static const Model m = random_model(Config::mnist(), 42);
  return m;
}

} // namespace

TEST(Parity, SmallGoldenFastPath) { check_golden(small_golden(), 2e-5, 1e-5, false); }

// Every feature map but elu + 1 (docs/SPEC.md "Feature maps"; the random-feature ones with S of F
// x d_head, F != d_head) against the PyTorch reference of tools/tarnn_model.py in float64, at
// every position, on the fast path and the plain one, and the CUDA backend's twin: its images
// and log-likelihoods the CPU backend's, to the bit.
TEST(Parity, EveryFeatureMapMatchesPyTorch) {
  const char *root = std::getenv("TARNN_GOLDEN_MAPS");
  if (!root || !std::filesystem::exists(std::string(root) + "/relu/config.json"))
    GTEST_SKIP() << "make_golden_maps made no goldens (it needs python3-torch)";
  int kinds = 0;
  for (const char *kind :
       {"relu", "random_fourier", "smoothed_random_fourier", "favor", "generalized_random"}) {
    const std::string dir = std::string(root) + "/" + kind;
    SCOPED_TRACE(kind);
    check_golden(dir, 2e-5, 1e-5, false);
    check_golden(dir, 2e-5, 1e-5, true);
    const Model m = load_model(dir);
    EXPECT_EQ(m.config.feature_map.kind == FeatureMapKind::Relu, std::string(kind) == "relu");
    // the same images whatever the batch and threads
    EXPECT_EQ(sample(m, 5, 3, 2, 1), sample(m, 5, 3, 5, 3));
    ++kinds;
  }
  EXPECT_EQ(kinds, 5);
}
TEST(Parity, SmallGoldenReferencePath) { check_golden(small_golden(), 2e-5, 1e-5, true); }

// The paper's MNIST size, 783 positions: mixture parameters to 1e-4, bits/dim to 1e-4.
TEST(Parity, MnistSizeGolden) {
  if (mnist_golden().empty())
    GTEST_FAIL() << "TARNN_GOLDEN_MNIST is not set: run through ctest, whose fixture makes it";
  if (!std::filesystem::exists(mnist_golden() + "/config.json")) // ctest made no golden: no torch
    GTEST_SKIP() << mnist_golden() << " was not made (make_golden_mnist needs python3-torch)";
  check_golden(mnist_golden(), 1e-4, 1e-4, false);
}

// --precision bf16 against the reference with bf16 GEMM inputs, weights and biases
// (tools/tarnn_model.py bf16_matmul_inputs). Rounding to bf16 is a step function: an activation
// within fp32's error of a rounding boundary rounds one way here and the other in float64, a jump
// of 2^-8 of itself, and the state carries it on. So the tolerances are those of PyTorch's own
// fp32 run of the same reference against its float64 one (this golden: parameters worst 0.0060,
// mean 0.0010; bits/dim 2.9e-5 and 3.2e-6), about doubled; the issue asks 1e-3 of bits/dim, this
// asks 1e-4. The fp32 model is 0.0017 away on average in the parameters (in bits/dim 1.2e-5 and
// 3.9e-4: the first image too near to tell them apart): the engine must be nearer the bf16 one.
TEST(Parity, MnistSizeGoldenBf16) {
  if (mnist_golden().empty())
    GTEST_FAIL() << "TARNN_GOLDEN_MNIST is not set: run through ctest, whose fixture makes it";
  if (!std::filesystem::exists(mnist_golden() + "/config.json"))
    GTEST_SKIP() << mnist_golden() << " was not made (make_golden_mnist needs python3-torch)";
  check_golden(mnist_golden(), 0.015, 1e-4, false, Precision::Bf16, 0.002);
}

// The fast path (AVX-512 GEMM) and the plain path agree to the bit over a whole rollout of
// sampling at the MNIST size, so state, outputs and sampled bytes are all identical.
TEST(FastVsReference, FullRolloutIsBitIdentical) {
  const Model &w = mnist_random();
  EXPECT_EQ(sample(w, 2, 9, 2, 1, 0, false), sample(w, 2, 9, 2, 1, 0, true));
}

TEST(Reproducibility, SameSeedSameImagesWhateverBatchAndThreads) {
  const Model &w = mnist_random();
  const std::vector<uint8_t> base = sample(w, 6, 1234, 6, 1);
  EXPECT_EQ(base, sample(w, 6, 1234, 1, 1));
  EXPECT_EQ(base, sample(w, 6, 1234, 4, 2)); // batches of 4 then 2, slices of 2 and 1
  EXPECT_EQ(base, sample(w, 6, 1234, 6, 3));
  EXPECT_EQ(base, sample(w, 6, 1234, 5, 4));
  EXPECT_NE(base, sample(w, 6, 1235, 6, 1));
}

TEST(Reproducibility, ImageIndexRangesSplitAJob) {
  const Model &w = mnist_random();
  const size_t T = Config::mnist().bytes_per_image();
  const std::vector<uint8_t> all = sample(w, 5, 77, 5, 2);
  const std::vector<uint8_t> tail = sample(w, 3, 77, 3, 1, /*first=*/2);
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), all.begin() + 2 * T));
  // and images differ from one another
  EXPECT_FALSE(std::equal(all.begin(), all.begin() + T, all.begin() + T));
}

TEST(Memory, StateIsConstantPerImageWhateverThePosition) {
  const Config c = Config::mnist();
  // 8 layers x 8 heads x (32 x 32 + 32) floats = 270,336 bytes, as the paper's size implies
  EXPECT_EQ(c.state_elements_per_image() * 4, 270336);
  EXPECT_EQ(state_bytes_per_image(c, StateFormat::Fp32), 270336);
  const Model &m = mnist_random();
  const CpuWeights w(m, Precision::Fp32);
  EXPECT_EQ((Decoder<CpuOps>(c, w.view(), 10, StateFormat::Fp32).state_bytes()), 10 * 270336);
}

// Every default is resolved in one place, with one meaning for 0 on every device and command.
TEST(RunOptions, DefaultsAndBadValues) {
  const Config c = Config::mnist();
  const RunOptions d = resolve_run_options(c, RunOptions{});
  EXPECT_EQ(d.batch, kDefaultCpuBatch);
  EXPECT_GE(d.threads, 1); // 0: every core
  EXPECT_EQ(resolve_run_options(c, run_options(7, 3)).batch, 7);
  EXPECT_EQ(resolve_run_options(c, run_options(7, 3)).threads, 3);
  EXPECT_THROW(resolve_run_options(c, run_options(-1, 1)), Error);
  EXPECT_THROW(resolve_run_options(c, run_options(kMaxBatch + 1, 1)), Error);
  EXPECT_THROW(resolve_run_options(c, run_options(1, -1)), Error);
  EXPECT_THROW(resolve_run_options(c, run_options(1, kMaxThreads + 1)), Error);
  EXPECT_THROW(resolve_run_options(c, run_options(4'000'000, 1)), Error); // 1 TB of state
  EXPECT_THROW(parse_device("tpu"), Error);
  RunOptions gpu;
  gpu.device = Device::Cuda;
  EXPECT_EQ(resolve_run_options(c, gpu).batch, 0); // what fits, known when a job runs
}

// A worker's failure is an Error on the calling thread, not a crash, and the engine stays usable.
TEST(Engine, ProgressThatThrowsStopsTheRunAndTheEngineStaysUsable) {
  Engine engine(load_model(small_golden()), run_options(2, 2));
  int calls = 0;
  EXPECT_THROW(sample_images(engine, 50, 1, 0,
                             [&](int64_t, int64_t) {
                               if (++calls == 1)
                                 throw Error("interrupted");
                             }),
               Error);
  EXPECT_EQ(sample_images(engine, 3, 1).bytes, sample_images(engine, 3, 1).bytes);
}

// One Engine used from several threads at once, in fp32 and with the fp16 state.
TEST(Engine, SeveralThreadsAtOnceGetWhatEachGetsAlone) {
  for (StateFormat state : {StateFormat::Fp32, StateFormat::Fp16}) {
    RunOptions o = run_options(3, 2);
    o.state = state;
    Engine engine(load_model(small_golden()), o);
    expect_threads_get_what_each_gets_alone(engine, 5, name(state));
  }
}
