// The softmax baselines of the benchmark: the KV-cache decoder and the recompute decoder against
// PyTorch's parallel causal softmax (tests/golden/small-softmax, made by tools/random_model.py
// --attention softmax, same weights as tests/golden/small), and against each other to the bit.
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernels/softmax_attention.h"
#include "src/cpu/cpu_ops.h"
#include "src/softmax/softmax_ops.h"
#include "tarnn/tarnn.h"
#include "test_util.h"

using namespace tarnn;
using namespace tarnn_test;

namespace {

std::string softmax_golden() { return source_dir() + "/tests/golden/small-softmax"; }

// The MNIST-size softmax golden, made at test time by the ctest fixture (26 MB of weights).
std::string mnist_softmax_golden() {
  const char *dir = std::getenv("TARNN_GOLDEN_MNIST_SOFTMAX");
  return dir ? dir : "";
}

// Teacher-forces the golden inputs: step(t, o) must fill o with the mixture parameters at t.
// Checks them against the float64 reference, and each image's bits/dim.
template <class Step>
void check_golden(const std::string &dir, const Model &m, Step step, double tol) {
  const Config &c = m.config;
  const ImageSet in = read_images(dir + "/inputs-idx-ubyte", c);
  const auto expected = nlohmann::json::parse(read_file(dir + "/expected.json"));
  const int n = int(in.count), K3 = c.d_out();
  const int limit = positions_unless_sanitized(100);           // all 783 in the release pass
  const int T = c.bytes_per_image();                           // the images' stride
  const int last = limit < 0 ? T - 1 : std::min(T - 1, limit); // positions checked
  std::vector<float> o(size_t(n) * K3);
  std::vector<double> lp(n, 0.0);
  double worst = 0;
  for (int t = 0; t < last; ++t) {
    step(t, in.bytes.data(), o.data());
    for (int r = 0; r < n; ++r) {
      for (int j = 0; j < K3; ++j) {
        const double want = expected["mixture_params"][r][t][j];
        worst = std::max(worst, std::fabs(o[size_t(r) * K3 + j] - want));
        ASSERT_NEAR(o[size_t(r) * K3 + j], want, tol) << "image " << r << " t " << t;
      }
      lp[r] += mixture_log_prob(&o[size_t(r) * K3], c.mixtures, in.bytes[size_t(r) * T + t + 1]);
    }
  }
  for (int r = 0; r < n && last == T - 1; ++r)
    EXPECT_NEAR(-lp[r] / (c.positions() * std::log(2.0)), expected["bits_per_dim"][r].get<double>(),
                1e-5)
        << "image " << r;
  std::printf("worst mixture-parameter error %.3g over %d positions\n", worst, T - 1);
}

// The KV-cache decoder teacher-forced through a golden folder.
void check_kv_golden(const std::string &dir, double tol) {
  const Model m = load_model(dir);
  EXPECT_EQ(m.config.attention, Attention::Softmax);
  const CpuWeights w(m, Precision::Fp32);
  const int n = int(read_images(dir + "/inputs-idx-ubyte", m.config).count);
  KvCache cache(m.config, n, m.config.positions());
  Decoder<KvOps<CpuKernels>> dec(m.config, w.view(), n, std::nullopt, CpuKernels{}, cache, 0);
  const int T = m.config.bytes_per_image();
  std::vector<uint8_t> cur(n);
  check_golden(
      dir, m,
      [&](int t, const uint8_t *images, float *o) {
        for (int r = 0; r < n; ++r)
          cur[r] = images[size_t(r) * T + t];
        dec.step(t, cur.data(), o);
      },
      tol);
}

// Samples `n` images for `steps` positions with both decoders from the same seed; every output
// and every byte must be identical (the GEMM's elements do not depend on the row count, and both
// call the same softmax_attention on the same keys and values).
void expect_kv_equals_recompute(const Model &m, int n, int steps) {
  const Config &c = m.config;
  const CpuWeights w(m, Precision::Fp32);
  const int T = c.bytes_per_image(), K3 = c.d_out();
  KvCache cache(c, n, c.positions());
  Decoder<KvOps<CpuKernels>> kv(c, w.view(), n, std::nullopt, CpuKernels{}, cache, 0);
  RecomputeDecoder<CpuKernels> re(c, w.view(), n, CpuKernels{});
  std::vector<uint8_t> img_kv(size_t(n) * T, 0), img_re(size_t(n) * T, 0), cur(n);
  std::vector<float> o_kv(size_t(n) * K3), o_re(size_t(n) * K3);
  for (int t = 0; t < steps; ++t) {
    for (int r = 0; r < n; ++r)
      cur[r] = img_kv[size_t(r) * T + t];
    kv.step(t, cur.data(), o_kv.data());
    re.step(t, img_re.data(), T, o_re.data());
    ASSERT_EQ(0, std::memcmp(o_kv.data(), o_re.data(), o_kv.size() * 4)) << "t " << t;
    for (int r = 0; r < n; ++r) {
      img_kv[size_t(r) * T + t + 1] =
          uint8_t(sample_byte(&o_kv[size_t(r) * K3], c.mixtures, 5, r, t));
      img_re[size_t(r) * T + t + 1] =
          uint8_t(sample_byte(&o_re[size_t(r) * K3], c.mixtures, 5, r, t));
    }
  }
  EXPECT_EQ(img_kv, img_re);
}

} // namespace

TEST(SoftmaxParity, KvCacheMatchesPyTorch) { check_kv_golden(softmax_golden(), 2e-5); }

// 783 positions: softmax over long rows, mixture parameters and bits/dim to 1e-4.
TEST(SoftmaxParity, KvCacheMatchesPyTorchAtMnistSize) {
  if (mnist_softmax_golden().empty())
    GTEST_FAIL() << "TARNN_GOLDEN_MNIST_SOFTMAX is not set: run through ctest (its fixture)";
  if (!std::filesystem::exists(mnist_softmax_golden() + "/config.json"))
    GTEST_SKIP() << mnist_softmax_golden() << " was not made (its fixture needs python3-torch)";
  check_kv_golden(mnist_softmax_golden(), 1e-4);
}

TEST(SoftmaxParity, RecomputeMatchesPyTorch) {
  const Model m = load_model(softmax_golden());
  const CpuWeights w(m, Precision::Fp32);
  RecomputeDecoder<CpuKernels> dec(m.config, w.view(), 3, CpuKernels{});
  const int T = m.config.bytes_per_image();
  check_golden(
      softmax_golden(), m,
      [&](int t, const uint8_t *images, float *o) { dec.step(t, images, T, o); }, 2e-5);
}

// The golden is not one the linear decoder also passes: same weights, other numbers.
TEST(SoftmaxParity, GoldenTellsTheAttentionsApart) {
  const Model m = load_model(softmax_golden());
  const auto expected = nlohmann::json::parse(read_file(softmax_golden() + "/expected.json"));
  const auto linear = nlohmann::json::parse(read_file(small_golden() + "/expected.json"));
  double most = 0;
  for (size_t t = 0; t < expected["mixture_params"][0].size(); ++t)
    for (size_t j = 0; j < size_t(m.config.d_out()); ++j)
      most = std::max(most, std::fabs(expected["mixture_params"][0][t][j].get<double>() -
                                      linear["mixture_params"][0][t][j].get<double>()));
  EXPECT_GT(most, 1e-2);
}

TEST(SoftmaxParity, KvCacheEqualsRecomputeToTheBit) {
  expect_kv_equals_recompute(load_model(softmax_golden()), 4, 39);
  expect_kv_equals_recompute(random_model(Config::mnist(), 3), 2, 24); // the paper's MNIST size
}

// A benchmark steps the KV-cache decoder at a position without the steps before it.
TEST(KvCache, StepsAtAnyPositionWithinItsCapacity) {
  const Model m = load_model(softmax_golden());
  const CpuWeights w(m, Precision::Fp32);
  const int L = m.config.positions();
  KvCache cache(m.config, 2, L);
  Decoder<KvOps<CpuKernels>> dec(m.config, w.view(), 2, std::nullopt, CpuKernels{}, cache, 0);
  const uint8_t bytes[2] = {0, 0};
  std::vector<float> o(2 * m.config.d_out());
  EXPECT_NO_THROW(dec.step(L - 1, bytes, o.data()));
  for (float v : o)
    EXPECT_TRUE(std::isfinite(v));
  EXPECT_THROW(dec.step(L, bytes, o.data()), Error);
}

TEST(Memory, KvCacheGrowsWithLengthStateDoesNot) {
  const Config c = Config::mnist();
  // K and V: 2 x 783 positions x 8 layers x 256 floats = 12,828,672 bytes, 47x the linear state
  EXPECT_EQ(KvCache::bytes_per_image(c), 12828672);
  EXPECT_EQ(KvCache(c, 2, c.positions()).bytes(), 2 * 12828672);
  EXPECT_EQ(KvCache::bytes_per_image(Config::cifar10()), 2LL * 3071 * 16 * 256 * 4);
}

// The softmax's own exp: within 3 ulp of exp in double over [-87, 0], and exact at 0.
TEST(SoftmaxMath, ExpNonPositiveIsAccurate) {
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
  double worst = 0;
  for (int i = 0; i <= 870000; ++i) {
    const float x = -float(i) * 1e-4f;
    const double want = std::exp(double(x));
    worst = std::max(worst, std::fabs(exp_nonpositive(x) - want) / want);
  }
  EXPECT_LT(worst, 3 * 5.97e-8) << "relative error"; // 3 ulp of float (2^-24 each)
  std::printf("worst relative error %.3g\n", worst);
}

// ---- a softmax model through the Engine: sample, score and complete on the CPU backend ---------

namespace {

Engine softmax_engine(int64_t batch, int threads, bool prefill = true) {
  RunOptions o;
  o.batch = batch;
  o.threads = threads;
  o.prefill = prefill;
  return Engine(load_model(softmax_golden()), o);
}

// The images of `seed` as the decoder that matches PyTorch (KvCache, one position at a time) and
// SPEC section 3's sampler make them: what the Engine's rollout must give, byte for byte.
std::vector<uint8_t> decoder_samples(int n, uint64_t seed) {
  const Model m = load_model(softmax_golden());
  const Config &c = m.config;
  const CpuWeights w(m, Precision::Fp32);
  KvCache cache(c, n, c.positions());
  Decoder<KvOps<CpuKernels>> dec(c, w.view(), n, std::nullopt, CpuKernels{}, cache, 0);
  const int T = c.bytes_per_image(), K3 = c.d_out();
  std::vector<uint8_t> img(size_t(n) * T, 0), cur(n);
  std::vector<float> o(size_t(n) * K3);
  for (int t = 0; t < c.positions(); ++t) {
    for (int r = 0; r < n; ++r)
      cur[r] = img[size_t(r) * T + t];
    dec.step(t, cur.data(), o.data());
    for (int r = 0; r < n; ++r)
      img[size_t(r) * T + t + 1] = uint8_t(sample_byte(&o[size_t(r) * K3], c.mixtures, seed, r, t));
  }
  return img;
}

} // namespace

TEST(SoftmaxEngine, SamplesTheDecodersImages) {
  Engine e = softmax_engine(4, 2);
  const ImageSet got = sample_images(e, 7, 11);
  EXPECT_EQ(got.bytes, decoder_samples(7, 11));
}

// Image i of a seed is the same whatever --batch and --threads (SPEC section 3), and --first.
TEST(SoftmaxEngine, SameImagesForAnyBatchAndThreads) {
  Engine one = softmax_engine(1, 1);
  const ImageSet want = sample_images(one, 9, 3);
  for (int64_t batch : {2, 5, 9})
    for (int threads : {1, 2, 3}) {
      Engine e = softmax_engine(batch, threads);
      EXPECT_EQ(sample_images(e, 9, 3).bytes, want.bytes) << batch << " " << threads;
    }
  const int T = one.config().bytes_per_image();
  const ImageSet tail = sample_images(one, 4, 3, 5);
  EXPECT_TRUE(std::equal(tail.bytes.begin(), tail.bytes.end(), want.bytes.begin() + 5 * T));
}

// Scoring is everything known: the prefill fills the cache with all L positions at once. Its
// bits/dim are PyTorch's (the golden's float64 parallel form) and the step-by-step rollout's.
TEST(SoftmaxEngine, ScoresAsPyTorchWithAndWithoutPrefill) {
  const auto expected = nlohmann::json::parse(read_file(softmax_golden() + "/expected.json"));
  Engine pre = softmax_engine(2, 2, true), steps = softmax_engine(3, 1, false);
  const ImageSet in = read_images(softmax_golden() + "/inputs-idx-ubyte", pre.config());
  const std::vector<double> a = score_images(pre, in), b = score_images(steps, in);
  ASSERT_EQ(a.size(), expected["bits_per_dim"].size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::fabs(a[i] - expected["bits_per_dim"][i].get<double>()));
    EXPECT_EQ(a[i], b[i]) << "image " << i << ": prefill and steps differ";
  }
  EXPECT_LT(worst, 1e-5);
  std::printf("max |bits/dim - PyTorch| %.3g over %zu images\n", worst, a.size());
}

// Completion with any mask (known bytes after unknown ones: teacher forcing in the middle), the
// prefill over the known top rows, the same completions for any batch and threads.
TEST(SoftmaxEngine, CompletesWithMasksTheSameWhateverTheRun) {
  Engine base = softmax_engine(1, 1, false);
  const Config &c = base.config();
  const ImageSet in = read_images(softmax_golden() + "/inputs-idx-ubyte", c);
  std::vector<uint8_t> top(c.bytes_per_image(), 0), odd(c.bytes_per_image(), 0);
  for (int i = 0; i < c.bytes_per_image(); ++i) {
    top[i] = i < c.bytes_per_image() / 2;
    odd[i] = i % 3 == 1;
  }
  for (const auto &known : {top, odd}) {
    const ImageSet want = complete_images(base, in, {0, 1, 2}, known, 3, 5);
    for (int i = 0; i < 9; ++i) // known bytes are the input's
      for (int j = 1; j < c.bytes_per_image(); ++j)
        if (known[j]) {
          ASSERT_EQ(want.bytes[size_t(i) * c.bytes_per_image() + j],
                    in.bytes[size_t(i / 3) * c.bytes_per_image() + j]);
        }
    for (bool prefill : {true, false}) {
      Engine e = softmax_engine(4, 2, prefill);
      EXPECT_EQ(complete_images(e, in, {0, 1, 2}, known, 3, 5).bytes, want.bytes) << prefill;
    }
  }
}

// bf16 GEMMs run softmax attention too (only the linear layers change).
TEST(SoftmaxEngine, RunsBf16Gemms) {
  RunOptions o;
  o.precision = Precision::Bf16;
  o.threads = 1;
  Engine e(load_model(softmax_golden()), o);
  const ImageSet in = read_images(softmax_golden() + "/inputs-idx-ubyte", e.config());
  for (double b : score_images(e, in))
    EXPECT_TRUE(std::isfinite(b) && b > 0);
}

// CUDA runs linear attention only: a softmax model is refused before any work, naming the fix.
TEST(SoftmaxEngine, CudaRefusesWithOneLineNamingTheCpu) {
  Config c = load_model(softmax_golden()).config;
  RunOptions o;
  o.device = Device::Cuda;
  const std::string why = error_of([&] { resolve_run_options(c, o); });
  EXPECT_NE(why.find("device cuda runs linear attention only"), std::string::npos) << why;
  EXPECT_NE(why.find("run it with device cpu"), std::string::npos) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos);
  EXPECT_EQ(error_of([&] { Engine(load_model(softmax_golden()), o); }), why);
  c.attention = Attention::Linear; // the same options pass the softmax check for a linear model
  EXPECT_EQ(error_of([&] { resolve_run_options(c, o); }).find("linear attention only"),
            std::string::npos);
}

// A KV cache is fp32: --state fp16 (linear attention's S) is refused for a softmax model.
TEST(SoftmaxEngine, StateFormatsOtherThanFp32AreRefused) {
  const Config c = load_model(softmax_golden()).config;
  RunOptions o;
  o.state = StateFormat::Fp16;
  const std::string why = error_of([&] { resolve_run_options(c, o); });
  EXPECT_NE(why.find("state fp16 stores linear attention's state S"), std::string::npos) << why;
  o.state = StateFormat::Fp32;
  EXPECT_NO_THROW(resolve_run_options(c, o));
}

// The memory pre-check counts each image's full-length KV cache: a batch whose caches pass 3/4 of
// this machine's memory is refused before any work, when the same batch of linear states fits.
TEST(SoftmaxEngine, MemoryCheckCountsTheFullLengthCache) {
  Config c = Config::cifar10(); // 100 MB of keys and values per image, 540 KB of linear state
  c.attention = Attention::Softmax;
  EXPECT_EQ(memory_bytes_per_image(c, StateFormat::Fp32), KvCache::bytes_per_image(c));
  EXPECT_EQ(memory_bytes_per_image(c, StateFormat::Fp16), KvCache::bytes_per_image(c));
  RunOptions o;
  o.batch =
      int64_t(0.75 * double(physical_memory_bytes()) / double(KvCache::bytes_per_image(c))) + 1;
  const std::string why = error_of([&] { resolve_run_options(c, o); });
  EXPECT_NE(why.find("(the KV cache of every image, at the last position) needs"),
            std::string::npos)
      << why;
  c.attention = Attention::Linear;
  EXPECT_EQ(memory_bytes_per_image(c, StateFormat::Fp32),
            state_bytes_per_image(c, StateFormat::Fp32));
  EXPECT_NO_THROW(resolve_run_options(c, o));
}

// An Engine's count for sample's and complete's checks is the cache too.
TEST(SoftmaxEngine, HostStateBytesAreTheCaches) {
  Engine e = softmax_engine(4, 1);
  EXPECT_EQ(e.host_state_bytes(10), 4.0 * double(KvCache::bytes_per_image(e.config())));
  EXPECT_EQ(KvCache::bytes_per_image(e.config()), 2 * 39 * 2 * 18 * 4); // 11,232 bytes
}
