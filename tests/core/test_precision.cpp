// --precision bf16 on the CPU over whole rollouts: the same images for any batch and thread count
// (each GEMM row is its own chain, src/cpu/gemm_bf16.h), the fast path equal to the plain
// reference to the bit, scores close to fp32's but not equal to them (the rounding happens), and
// a clear error for each precision a device does not have.
#include <cmath>
#include <gtest/gtest.h>

#include "tarnn/tarnn.h"
#include "test_util.h"

using namespace tarnn;
using namespace tarnn_test;

namespace {

// MNIST's 783 positions, narrower layers: the plain reference GEMM takes seconds, not minutes.
const Model &model() {
  static const Model m = [] {
    Config c = Config::mnist();
    c.n_layers = 2;
    c.n_heads = 4;
    c.d_head = 16;
    c.d_model = 64;
    c.d_ff = 128;
    return random_model(c, 7);
  }();
  return m;
}

Engine engine(const std::string &precision, int batch, int threads, bool reference = false) {
  RunOptions o;
  o.precision = precision;
  o.batch = batch;
  o.threads = threads;
  o.reference = reference;
  return Engine(model(), o);
}

} // namespace

TEST(PrecisionBf16, SameImagesForAnyBatchAndThreadCount) {
  Engine a = engine("bf16", 6, 1), b = engine("bf16", 1, 1), c = engine("bf16", 4, 2);
  const ImageSet want = sample_images(a, 6, 11);
  EXPECT_EQ(sample_images(b, 6, 11).bytes, want.bytes);
  EXPECT_EQ(sample_images(c, 6, 11).bytes, want.bytes);
}

TEST(PrecisionBf16, FastPathEqualsTheReferenceOverAFullRollout) {
  Engine fast = engine("bf16", 3, 1), ref = engine("bf16", 3, 1, /*reference=*/true);
  const ImageSet images = sample_images(fast, 3, 5);
  EXPECT_EQ(sample_images(ref, 3, 5).bytes, images.bytes);
  EXPECT_EQ(score_images(ref, images), score_images(fast, images)); // doubles, to the bit
}

TEST(PrecisionBf16, ScoresCloseToFp32ButRounded) {
  Engine full = engine("fp32", 6, 2), half = engine("bf16", 6, 2);
  const ImageSet images = sample_images(full, 6, 3);
  const std::vector<double> a = score_images(full, images), b = score_images(half, images);
  double worst = 0, mean = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::fabs(a[i] - b[i]));
    mean += std::fabs(a[i] - b[i]) / double(a.size());
  }
  std::printf("bf16 against fp32 bits/dim: worst %.3g, mean %.3g\n", worst, mean);
  EXPECT_LT(worst, 0.02);
  EXPECT_GT(mean, 0.0);
}

TEST(Precision, EachDeviceRefusesWhatItLacks) {
  const Config &c = model().config;
  auto error_of = [&](const std::string &device, const std::string &precision, bool tf32) {
    RunOptions o;
    o.device = device;
    o.precision = precision;
    o.tf32 = tf32;
    try {
      resolve_run_options(c, o);
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("cpu", "tf32", false).find("cuda only"), std::string::npos);
  EXPECT_NE(error_of("cpu", "fp32", true).find("cuda only"), std::string::npos); // --tf32
  EXPECT_NE(error_of("cpu", "fp16", false).find("not a precision"), std::string::npos);
  EXPECT_NE(error_of("cpu", "bf16", true).find("disagree"), std::string::npos);
  EXPECT_EQ(error_of("cpu", "bf16", false), "no error");
  EXPECT_EQ(error_of("cuda", "bf16", false), "no error"); // tensor cores, fp32 sums
  EXPECT_EQ(resolve_run_options(c, RunOptions{}).precision, "fp32");
}
