// The CUDA backend's host side, on any machine: the batch's memory layout and size planning, the
// state indexing, and the forward and rollout (src/model) run with the kernels' CPU twins
// (src/cuda/twin_ops.h), which must reproduce the CPU backend to the bit. What these cannot see is
// the device code itself: test_cuda.cpp checks that against the twins where a GPU is present.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <gtest/gtest.h>
#include <iterator>
#include <nlohmann/json.hpp>

#include "kernels/chunked_attention.h"
#include "kernels/feed_forward.h"
#include "kernels/linear_attention.h"
#include "src/cuda/plan.h"
#include "src/cuda/twin_ops.h"
#include "src/engine/testing.h"
#include "src/model/batch.h"
#include "tarnn/tarnn.h"
#include "test_util.h"

using namespace tarnn;
using namespace tarnn_test;

namespace {

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

// A rollout on both: the CPU backend and the GPU plan on twins. Returns {cpu, twin} images.
struct Pair {
  std::vector<uint8_t> cpu, twin;
  std::vector<double> cpu_lp, twin_lp;
};

Pair both(const Model &m, Rollout job, int batch, const uint8_t *given = nullptr,
          const uint8_t *known = nullptr, Precision precision = Precision::Fp32,
          bool twin_prefill = false, StateFormat state = StateFormat::Fp32,
          Bf16Outputs outputs = Bf16Outputs::Qkv) {
  const size_t n = size_t(job.count) * m.config.bytes_per_image();
  Pair p{std::vector<uint8_t>(n, 0xAB), std::vector<uint8_t>(n, 0xAB),
         std::vector<double>(job.count, 7.0), std::vector<double>(job.count, 7.0)};
  job.given = given;
  job.known = known;
  job.out = p.cpu.data();
  job.log_prob = p.cpu_lp.data();
  RunOptions o;
  o.batch = batch;
  o.threads = 1;
  o.precision = precision;
  o.state = state;
  Knobs k; // as the environment would set them, whatever it holds
  if (outputs == Bf16Outputs::Fp32)
    k.set("bf16_outputs", "fp32");
  engine_with(m, o, k).run(job);
  job.out = p.twin.data();
  job.log_prob = p.twin_lp.data();
  run_twin(m, job, batch, precision, twin_prefill, state, outputs);
  return p;
}

Rollout job_of(int64_t count, uint64_t seed, int64_t first = 0, int positions = -1) {
  Rollout j;
  j.count = count;
  j.seed = seed;
  j.first_index = first;
  j.positions = positions;
  return j;
}

} // namespace

TEST(CudaPlan, LayoutIsAlignedDisjointAndHoldsTheSpecifiedState) {
  const Config c = Config::mnist();
  for (int64_t rows : {1, 7, 4096}) {
    const BatchLayout l = batch_layout(c, rows, StateFormat::Fp32);
    const size_t at[] = {l.x,   l.qkv, l.att,   l.y,     l.hid,      l.o,      l.state,
                         l.cur, l.out, l.given, l.known, l.log_prob, l.params, l.total};
    for (size_t i = 0; i + 1 < std::size(at); ++i) {
      EXPECT_EQ(at[i] % 256, 0u);
      EXPECT_LT(at[i], at[i + 1]);
    }
    EXPECT_EQ(l.state_bytes, size_t(rows) * 270336); // 8 x 8 x (32 x 32 + 32) floats per image
    EXPECT_GE(l.cur - l.state, l.state_bytes);
    EXPECT_GE(l.known - l.out, size_t(rows) * 784);
    EXPECT_GE(l.total - l.params, sizeof(StepParams));
  }
  // one more image costs cuda_bytes_per_image, up to the alignment of 13 buffers
  const int64_t per = cuda_bytes_per_image(c, StateFormat::Fp32);
  const int64_t step = int64_t(batch_layout(c, 1001, StateFormat::Fp32).total -
                               batch_layout(c, 1000, StateFormat::Fp32).total);
  EXPECT_GE(step, per - 13 * 256);
  EXPECT_LE(step, per + 13 * 256);
  EXPECT_GT(per, 270336);
  EXPECT_LT(per, 300000); // the state is nearly all of it
}

// TARNN_STATE_CHUNK=4 at the MNIST shape with the fp16 state: each image's state holds the
// chunk's buffer beside S and z (3 entries of phi(k) and v, 256 bytes a head each: 49,152 bytes
// over 64 heads), 188,416 bytes an image (docs/CUDA.md, the byte budget), and the GPU's memory
// plan counts it: its bytes an image and the batch's layout.
TEST(CudaPlan, ChunkedStateCountsItsBuffer) {
  const Config c = Config::mnist();
  const StateFormat f = StateFormat::Fp16;
  const int64_t unchunked = cuda_bytes_per_image(c, f);
  const StateChunk chunk("4");
  // 64 blocks of S (2,048 bytes in fp16), z (128) and the buffer: 3 entries of phi(k) and v in
  // fp16, 384 bytes (768 in fp32)
  EXPECT_EQ(state_bytes_per_image(c, f), 163840);
  EXPECT_EQ(cuda_bytes_per_image(c, f) - unchunked, 24576);
  const BatchLayout l = batch_layout(c, 7, f);
  EXPECT_EQ(l.state_chunk, 4);
  EXPECT_EQ(l.state_bytes, size_t(7) * 163840);
  EXPECT_EQ(state_bytes_per_image(c, StateFormat::Fp32) - 64 * (4096 + 128), 49152);
}

// The fused feed-forward (TARNN_FEED_FORWARD=fused) asks no device memory an image beyond the
// unfused path's (the plan's bytes an image are the same): its hidden layer lives in a block's
// shared memory, 32 images a block whatever the batch: 40,960 bytes at the MNIST shape (under
// CUDA's 48 KB default), 65,536 at the widest row it takes, within what every device of the build
// lets a block ask (sm_86's 99 KB); wider rows, or shapes off the tensor cores' tiles, refused.
TEST(CudaPlan, FusedFeedForwardSharedMemoryIsPerBlock) {
  const Config c = Config::mnist();
  EXPECT_EQ(feed_forward_shared_bytes(c.d_model), size_t(40960));
  EXPECT_EQ(feed_forward_shared_bytes(kFeedForwardWidest), size_t(65536));
  // (that the widest fits every device is feed_forward.h's static_asserts: the build's check)
  EXPECT_EQ(feed_forward_refusal(c.d_model, c.d_ff), "");
  EXPECT_EQ(feed_forward_refusal(16, 24), "d_model and d_ff multiples of 16 (the tensor cores' "
                                          "tiles); this model's are 16 and 24");
  EXPECT_EQ(feed_forward_refusal(528, 1024), "d_model at most 512; this model's is 528");
  // with the out-projection (TARNN_FEED_FORWARD=layer): x1's fp32 rows beside them
  EXPECT_EQ(after_attention_shared_bytes(c.d_model), size_t(40960 + 32768));
  EXPECT_GT(after_attention_shared_bytes(kAfterAttentionWidest + 16), kSharedMemoryEveryDevice);
  EXPECT_EQ(after_attention_refusal(c.d_model, c.d_ff, c.d_attn()), "");
  EXPECT_EQ(after_attention_refusal(16, 24, 16), feed_forward_refusal(16, 24));
  EXPECT_EQ(after_attention_refusal(16, 32, 18),
            "n_heads x d_head equal to d_model; this model's are 18 and 16");
  EXPECT_EQ(after_attention_refusal(400, 1024, 400),
            "d_model at most 384 (x1's rows in shared memory); this model's is 400");
}

TEST(CudaPlan, AutomaticBatchIsWhatFits) {
  const Config c = Config::mnist();
  const int64_t free = int64_t(8) << 30;
  const int b = plan_batch(c, 0, 1'000'000, free, "test GPU", StateFormat::Fp32);
  const int64_t budget = free - cuda_memory_reserve(free);
  EXPECT_LE(int64_t(batch_layout(c, b, StateFormat::Fp32).total), budget);
  EXPECT_GT(int64_t(batch_layout(c, b + 1, StateFormat::Fp32).total), budget);
  EXPECT_GT(b, 20000); // about 7.3 GB / 280 KB
  EXPECT_EQ(plan_batch(c, 0, 100, free, "test GPU", StateFormat::Fp32),
            100); // no more than the images
  EXPECT_EQ(plan_batch(c, 0, 1'000'000, int64_t(80) << 30, "g", StateFormat::Fp32), kMaxAutoBatch);
  // the paper's 10,000 images at once need about 2.8 GB
  EXPECT_EQ(plan_batch(c, 10000, 10000, int64_t(4) << 30, "g", StateFormat::Fp32), 10000);
}

TEST(CudaPlan, RequestedBatchFitsOrIsAClearError) {
  const Config c = Config::mnist();
  const int64_t free = int64_t(8) << 30;
  EXPECT_EQ(plan_batch(c, 4096, 1'000'000, free, "test GPU", StateFormat::Fp32), 4096);
  EXPECT_EQ(plan_batch(c, 4096, 10, free, "test GPU", StateFormat::Fp32),
            10); // capped at the images
  const std::string e =
      error_of([&] { plan_batch(c, 100000, 1'000'000, free, "test GPU", StateFormat::Fp32); });
  EXPECT_TRUE(contains(e, "batch 100000 needs 28.") && contains(e, "GB of GPU memory") &&
              contains(e, "test GPU has 8.59 GB free") && contains(e, "omit batch"))
      << e;
  EXPECT_TRUE(contains(error_of([&] { plan_batch(c, -1, 10, free, "g", StateFormat::Fp32); }),
                       "batch must be"));
  EXPECT_TRUE(contains(
      error_of([&] { plan_batch(c, kMaxBatch + 1, kMaxBatch + 1, free, "g", StateFormat::Fp32); }),
      "batch must be"));
  EXPECT_TRUE(
      contains(error_of([&] { plan_batch(c, 0, 10, 256 << 20, "tiny GPU", StateFormat::Fp32); }),
               "not even one image fits"));
  EXPECT_TRUE(contains(error_of([&] { plan_batch(c, 0, 10, 0, "full GPU", StateFormat::Fp32); }),
                       "not even one image fits"));
}

TEST(CudaPlan, StateBlocksAreContiguousPerImage) {
  Config c = Config::mnist();
  c.n_layers = 3;
  c.n_heads = 5;
  c.d_head = 7;
  for (StateFormat f : all_state_formats()) {
    size_t next = 0; // image, layer, head order; S (padded to 4 bytes) then z; no gaps
    for (int i = 0; i < 4; ++i)
      for (int l = 0; l < c.n_layers; ++l)
        for (int h = 0; h < c.n_heads; ++h) {
          EXPECT_EQ(state_block_offset(i, l, h, c.n_layers, c.n_heads, c.d_head, c.d_head, f),
                    next);
          next += state_block_bytes(c.d_head, c.d_head, f);
        }
    EXPECT_EQ(next, 4 * size_t(state_bytes_per_image(c, f))) << name(f);
  }
  EXPECT_EQ(state_block_bytes(7, 7, StateFormat::Fp32), size_t(8 * 7 * 4));
  EXPECT_EQ(state_block_bytes(7, 7, StateFormat::Fp16),
            size_t(100 + 7 * 4)); // 98 bytes of S, padded
  EXPECT_EQ(state_bytes_per_image(Config::mnist(), StateFormat::Fp16), 8 * 8 * (2048 + 128));
}

// The attention kernels' twin (their phases, run thread by thread) against the step, over 3 calls:
// each row an image with its own state (the step kernel), or with `positions` consecutive
// positions of image 0 walked in order through one state (the prefill's kernel). d = 32 takes the
// kernels' register path (in the positions kernel the column is held over all the rows, rounded
// to the storage at each), 6 and 33 the memory path. In fp32 the step is tarnn_math.h's
// linear_attention_step; in every format, the twin called one row (one position) at a time.
namespace {

void expect_attention_twin_is_the_step(bool positions) {
  for (StateFormat f : all_state_formats())
    for (int d : {6, 32, 33}) {
      const int rows = 5, heads = 2, layers = 2, A = heads * d, t0 = 5; // fp16: e 2 then 3
      std::vector<float> qkv(size_t(rows) * 3 * A);
      for (size_t i = 0; i < qkv.size(); ++i)
        qkv[i] = std::sin(0.37f * float(i)) * 2.0f;
      const size_t n = state_block_offset(positions ? 1 : rows, 0, 0, layers, heads, d, d, f);
      Config c;
      c.d_head = d;
      const PhiMap m = phi_map(c, nullptr); // elu + 1
      std::vector<uint8_t> S1(n, 0), S2(n, 0), S3(n, 0);
      std::vector<float> att1(size_t(rows) * A), att2(att1.size()), att3(att1.size());
      for (int call = 0; call < 3; ++call) {
        const int t = positions ? t0 + call * rows : t0 + call;
        linear_attention_cpu(qkv.data(), S1.data(), att1.data(), rows, 1, layers, heads, m, f, t,
                             positions);
        for (int r = 0; r < rows; ++r) {
          const size_t at = state_block_offset(positions ? 0 : r, 0, 0, layers, heads, d, d, f);
          linear_attention_cpu(&qkv[size_t(r) * 3 * A], S3.data() + at, &att3[size_t(r) * A], 1, 1,
                               layers, heads, m, f, positions ? t + r : t);
          if (f != StateFormat::Fp32)
            continue;
          for (int h = 0; h < heads; ++h) {
            const float *q = &qkv[size_t(r) * 3 * A];
            auto *S = reinterpret_cast<float *>(
                S2.data() + state_block_offset(positions ? 0 : r, 1, h, layers, heads, d, d, f));
            linear_attention_step(q + h * d, q + A + h * d, q + 2 * A + h * d, S, S + d * d,
                                  &att2[size_t(r) * A + h * d], d);
          }
        }
        ASSERT_EQ(att1, att3) << name(f) << " d_head " << d << " call " << call;
        ASSERT_EQ(S1, S3) << name(f) << " d_head " << d << " call " << call;
        if (f == StateFormat::Fp32) {
          ASSERT_EQ(att1, att2) << "d_head " << d << " call " << call;
          ASSERT_EQ(S1, S2) << "d_head " << d << " call " << call;
        }
      }
    }
}

} // namespace

TEST(CudaTwins, AttentionPhasesAreTheCpuStep) { expect_attention_twin_is_the_step(false); }

TEST(CudaTwins, AttentionPositionsAreTheCpuSteps) { expect_attention_twin_is_the_step(true); }

TEST(CudaTwins, PlanSamplesAsTheCpuBackend) {
  const Model m = load_model(small_golden());
  // 7 images in chunks of 3, 3, 1 (a tail shape), starting at RNG index 5
  const Pair p = both(m, job_of(7, 99, 5), 3);
  EXPECT_EQ(p.cpu, p.twin);
  EXPECT_EQ(both(m, job_of(7, 99, 5), 7).twin, p.twin); // and whatever the batch
}

TEST(CudaTwins, PlanScoresAsTheCpuBackend) {
  const Model m = load_model(small_golden());
  const ImageSet in = read_images(small_golden() + "/inputs-idx-ubyte", m.config);
  const Pair p = both(m, job_of(in.count, 0), 2, in.bytes.data());
  EXPECT_EQ(p.cpu, in.bytes);
  EXPECT_EQ(p.twin, in.bytes);
  EXPECT_EQ(p.cpu_lp, p.twin_lp); // the same doubles, summed in the same order
}

TEST(CudaTwins, PlanCompletesMaskedImagesAsTheCpuBackend) {
  const Model m = load_model(small_golden());
  const ImageSet in = read_images(small_golden() + "/inputs-idx-ubyte", m.config);
  std::vector<uint8_t> known(in.bytes.size());
  for (size_t i = 0; i < known.size(); ++i)
    known[i] = (i * 7 + i / 5) % 3 != 0;
  const Pair p = both(m, job_of(in.count, 4), 2, in.bytes.data(), known.data());
  EXPECT_EQ(p.cpu, p.twin);
  EXPECT_EQ(p.cpu_lp, p.twin_lp);
  for (size_t i = 0; i < known.size(); ++i)
    if (known[i]) {
      ASSERT_EQ(p.twin[i], in.bytes[i]) << i;
    }
}

// Every feature map (docs/SPEC.md "Feature maps"; random-feature ones with S of F x d_head): the
// twin's images and log-likelihoods are the CPU backend's, sampled (in chunks of 2 and 3), scored
// and prefilled, in fp32 and with an fp16 state.
TEST(CudaTwins, PlanWithEveryFeatureMapAsTheCpuBackend) {
  const ImageSet in =
      read_images(small_golden() + "/inputs-idx-ubyte", load_model(small_golden()).config);
  const FeatureMapKind kinds[] = {FeatureMapKind::Relu, FeatureMapKind::RandomFourier,
                                  FeatureMapKind::SmoothedRandomFourier, FeatureMapKind::Favor,
                                  FeatureMapKind::GeneralizedRandom};
  for (FeatureMapKind k : kinds) {
    Config c = load_model(small_golden()).config;
    c.feature_map.kind = k;
    c.feature_map.n_dims = k == FeatureMapKind::Relu ? 0 : 9;
    c.feature_map.softmax_temp = 0.3;
    const Model m = random_model(c, 7);
    SCOPED_TRACE(feature_map_name(k));
    for (StateFormat state : {StateFormat::Fp32, StateFormat::Fp16}) {
      const Pair sampled =
          both(m, job_of(5, 11), 2, nullptr, nullptr, Precision::Fp32, false, state);
      EXPECT_EQ(sampled.cpu, sampled.twin);
      EXPECT_EQ(both(m, job_of(5, 11), 3, nullptr, nullptr, Precision::Fp32, false, state).twin,
                sampled.twin);
      const Pair scored =
          both(m, job_of(in.count, 0), 2, in.bytes.data(), nullptr, Precision::Fp32, true, state);
      EXPECT_EQ(scored.cpu_lp, scored.twin_lp);
      EXPECT_EQ(scored.twin, in.bytes);
    }
  }
}

// The same for the models PyTorch made of each map (tests/tools/make_golden_maps.sh): the CUDA
// twin's bits/dim of the golden images is the CPU backend's, so within the goldens' tolerance of
// PyTorch's float64 as Parity.EveryFeatureMapMatchesPyTorch holds the CPU.
TEST(CudaTwins, PyTorchsFeatureMapModelsScoreAsOnTheCpuBackend) {
  const char *root = std::getenv("TARNN_GOLDEN_MAPS");
  if (!root || !std::filesystem::exists(std::string(root) + "/favor/config.json"))
    GTEST_SKIP() << "make_golden_maps made no goldens (it needs python3-torch)";
  for (const char *kind :
       {"relu", "random_fourier", "smoothed_random_fourier", "favor", "generalized_random"}) {
    const std::string dir = std::string(root) + "/" + kind;
    SCOPED_TRACE(kind);
    const Model m = load_model(dir);
    const ImageSet in = read_images(dir + "/inputs-idx-ubyte", m.config);
    const Pair p = both(m, job_of(in.count, 0), 2, in.bytes.data(), nullptr, Precision::Fp32, true);
    EXPECT_EQ(p.cpu_lp, p.twin_lp);
    const auto expected = nlohmann::json::parse(read_file(dir + "/expected.json"));
    for (int64_t r = 0; r < in.count; ++r)
      EXPECT_NEAR(-p.twin_lp[size_t(r)] / (m.config.positions() * std::log(2.0)),
                  expected["bits_per_dim"][size_t(r)].get<double>(), 1e-5)
          << "image " << r;
  }
}

// --precision bf16: GEMM inputs through round_bf16's twin, then bf16 products summed in fp32.
// Small (GELU: the bias outside the GEMM) and MNIST-size (ReLU, fused on the GPU) models, scored
// and sampled: the CPU backend's bf16 to the bit, and not its fp32.
TEST(CudaTwins, PlanInBf16AsTheCpuBackend) {
  const Model small = load_model(small_golden());
  const ImageSet in = read_images(small_golden() + "/inputs-idx-ubyte", small.config);
  const Pair scored =
      both(small, job_of(in.count, 0), 2, in.bytes.data(), nullptr, Precision::Bf16);
  EXPECT_EQ(scored.cpu_lp, scored.twin_lp);
  EXPECT_NE(scored.twin_lp, both(small, job_of(in.count, 0), 2, in.bytes.data()).twin_lp);
  const Pair sampled = both(small, job_of(7, 99, 5), 3, nullptr, nullptr, Precision::Bf16);
  EXPECT_EQ(sampled.cpu, sampled.twin);
  const Model mnist = random_model(Config::mnist(), 42);
  const Pair p = both(mnist, job_of(3, 11, 0, 12), 2, nullptr, nullptr, Precision::Bf16);
  EXPECT_EQ(p.cpu, p.twin);
}

// --precision bf16's q, k and v rounded to bf16 (the engine's: the q,k,v GEMM writes bf16, which
// the attention widens) and not (TARNN_BF16_OUTPUTS=fp32, the path before): the twin the CPU
// backend's to the bit either way, with the fp16 state, scored (step by step and prefilled) and
// sampled, and at the MNIST shape (the register path; the engine's path there:
// PlanInBf16AsTheCpuBackend); the two paths' scores differ (the rounding happens on both backends,
// or on neither).
TEST(CudaTwins, Bf16OutputsAsTheCpuBackendOnEitherPath) {
  const Model small = load_model(small_golden());
  const ImageSet in = read_images(small_golden() + "/inputs-idx-ubyte", small.config);
  const Model mnist = random_model(Config::mnist(), 42);
  std::vector<double> scores[2];
  for (Bf16Outputs o : {Bf16Outputs::Qkv, Bf16Outputs::Fp32}) {
    SCOPED_TRACE(o == Bf16Outputs::Qkv ? "q, k, v in bf16" : "TARNN_BF16_OUTPUTS=fp32");
    for (bool prefill : {false, true}) {
      const Pair scored = both(small, job_of(in.count, 0), 2, in.bytes.data(), nullptr,
                               Precision::Bf16, prefill, StateFormat::Fp16, o);
      EXPECT_EQ(scored.cpu_lp, scored.twin_lp) << (prefill ? "prefilled" : "stepped");
      scores[o == Bf16Outputs::Fp32] = scored.cpu_lp;
    }
    const Pair sampled = both(small, job_of(7, 99, 5), 3, nullptr, nullptr, Precision::Bf16, false,
                              StateFormat::Fp16, o);
    EXPECT_EQ(sampled.cpu, sampled.twin);
    if (o == Bf16Outputs::Qkv) // the engine's path at this shape: PlanInBf16AsTheCpuBackend
      continue;
    const Pair p = both(mnist, job_of(3, 11, 0, 12), 2, nullptr, nullptr, Precision::Bf16, false,
                        StateFormat::Fp16, o);
    EXPECT_EQ(p.cpu, p.twin);
    EXPECT_EQ(p.cpu_lp, p.twin_lp);
  }
  EXPECT_NE(scores[0], scores[1]);
}

// --precision int8: each GEMM input's rows quantized by quantize_rows_int8's twin, the int32
// sums, finish_int8's twin; the head in fp32 (head_precision). Small (GELU) and MNIST-size (ReLU)
// models, scored and sampled, with the fp32 and the fp16 state: the CPU backend's int8 to the bit
// (its VNNI, AVX2 or plain sums are the same integers), and not its fp32.
TEST(CudaTwins, PlanInInt8AsTheCpuBackend) {
  const Model small = load_model(small_golden());
  const ImageSet in = read_images(small_golden() + "/inputs-idx-ubyte", small.config);
  const Model mnist = random_model(Config::mnist(), 42);
  for (StateFormat state : {StateFormat::Fp32, StateFormat::Fp16}) {
    SCOPED_TRACE(name(state));
    const Pair scored =
        both(small, job_of(in.count, 0), 2, in.bytes.data(), nullptr, Precision::Int8, true, state);
    EXPECT_EQ(scored.cpu_lp, scored.twin_lp);
    EXPECT_NE(scored.twin_lp, both(small, job_of(in.count, 0), 2, in.bytes.data(), nullptr,
                                   Precision::Fp32, true, state)
                                  .twin_lp);
    const Pair sampled =
        both(small, job_of(7, 99, 5), 3, nullptr, nullptr, Precision::Int8, false, state);
    EXPECT_EQ(sampled.cpu, sampled.twin);
    const Pair p =
        both(mnist, job_of(3, 11, 0, 12), 2, nullptr, nullptr, Precision::Int8, false, state);
    EXPECT_EQ(p.cpu, p.twin);
  }
}

// The 16-bit state the engine offers (kernels/state_format.h): the twin stores, widens and rounds
// S as the CPU backend does, to the bit; scored, sampled, and at the MNIST shape (d_head 32: the
// register path; 40 positions: fp16's exponent grows five times).
TEST(CudaTwins, PlanWithA16BitStateAsTheCpuBackend) {
  const Model small = load_model(small_golden());
  const ImageSet in = read_images(small_golden() + "/inputs-idx-ubyte", small.config);
  const Model mnist = random_model(Config::mnist(), 42);
  for (StateFormat state : {StateFormat::Fp16}) { // bf16 is refused (docs/STATE.md)
    const Pair scored = both(small, job_of(in.count, 0), 2, in.bytes.data(), nullptr,
                             Precision::Fp32, false, state);
    EXPECT_EQ(scored.cpu_lp, scored.twin_lp) << name(state);
    EXPECT_NE(scored.twin_lp, both(small, job_of(in.count, 0), 2, in.bytes.data()).twin_lp);
    const Pair sampled =
        both(small, job_of(7, 99, 5), 3, nullptr, nullptr, Precision::Fp32, false, state);
    EXPECT_EQ(sampled.cpu, sampled.twin) << name(state);
    const Pair p =
        both(mnist, job_of(3, 11, 0, 40), 2, nullptr, nullptr, Precision::Fp32, false, state);
    EXPECT_EQ(p.cpu, p.twin) << name(state);
  }
}

// The GPU's prefill (the embedding by position, the attention walking the rows through one
// state, the state copied into each sample's slot), or its steps where a chunk holds more than
// kCudaPrefillRuns different runs: the CPU backend's bytes and log-likelihoods
// to the bit, for completions whose known leading run differs per image: the small model in fp32
// and bf16, every state format, whole images; the MNIST shape in fp32 with the fp32 and fp16
// states, its first 24 positions (the twin's GEMM is the plain loop: seconds per position here).
TEST(CudaTwins, PlanPrefillsAsTheCpuBackend) {
  const Model small = load_model(small_golden());
  const Model mnist = random_model(Config::mnist(), 42);
  for (const Model *m : {&small, &mnist}) {
    const int T = m->config.bytes_per_image(), n = 5, step = m == &mnist ? 4 : T / 8;
    std::vector<uint8_t> given(size_t(n) * T), known(given.size());
    for (size_t i = 0; i < given.size(); ++i)
      given[i] = uint8_t(i * 37 + i / 7);
    for (int r = 0; r < 4; ++r) // image r knows its first (r + 1) * step bytes, image 4 none
      for (int t = 0; t < (r + 1) * step; ++t)
        known[size_t(r) * T + t] = 1;
    for (Precision precision : {Precision::Fp32, Precision::Bf16})
      for (StateFormat state : all_state_formats()) {
        if (refusal(state) || (m == &mnist && precision == Precision::Bf16))
          continue;
        // batch 2: chunks of at most 2 distinct runs, prefilled; batch 5: 5 runs, more than
        // kCudaPrefillRuns: the GPU steps them (the CPU prefills them: the same bytes)
        for (int batch : {2, 5}) {
          Rollout job = job_of(n, 3, 0, m == &mnist ? 24 : -1);
          const Pair p = both(*m, job, batch, given.data(), known.data(), precision, true, state);
          EXPECT_EQ(p.cpu, p.twin) << name(precision) << " state " << name(state) << batch;
          EXPECT_EQ(p.cpu_lp, p.twin_lp) << name(precision) << " state " << name(state) << batch;
        }
      }
  }
}

// The chunked kernels' twin (kernels/chunked_attention.h: their phases thread by thread) against
// the plain reference of the state's write deferred, chunked_attention_update: the same outputs
// and the same state bytes (S, z and the chunk's buffer) after every call, over three chunks and a
// part: rows as images at one position (the step kernel), or consecutive positions of image 0
// crossing the chunks' boundaries (the positions kernel); d 32 (the register path in 16-bit
// formats), 6 and 33 (the general one), every format, C 4 and 3 (fp16's exponent changes at the
// last position of C = 4's chunks, inside C = 3's).
namespace {

void expect_chunked_twin_is_the_reference(bool positions) {
  for (const int C : {4, 3})
    for (StateFormat f : all_state_formats())
      for (int d : {6, 32, 33}) {
        const int rows = positions ? 5 : 3, heads = 2, layers = 2, A = heads * d;
        const size_t block = state_block_bytes(d, d, f, C);
        const size_t n = block * layers * heads * (positions ? 1 : rows);
        Config c;
        c.d_head = d;
        const PhiMap m = phi_map(c, nullptr); // elu + 1
        std::vector<uint8_t> twin(n, 0), plain(n, 0);
        std::vector<float> qkv(size_t(rows) * 3 * A), att1(size_t(rows) * A), att2(att1.size());
        std::vector<float> fq(static_cast<size_t>(d)), fk(fq.size()),
            wide(size_t(d) * d + size_t(C - 1) * 2 * d);
        const int calls = positions ? 3 : 3 * C + 2;
        for (int call = 0, t = 0; call < calls; ++call, t += positions ? rows : 1) {
          for (size_t i = 0; i < qkv.size(); ++i)
            qkv[i] = std::sin(0.37f * float(i) + float(call)) * 2.0f;
          chunked_attention_cpu(qkv.data(), twin.data(), att1.data(), rows, 1, layers, heads, m, f,
                                t, positions, C);
          for (int r = 0; r < rows; ++r)
            for (int h = 0; h < heads; ++h) {
              const float *q = &qkv[size_t(r) * 3 * A + size_t(h) * d];
              for (int i = 0; i < d; ++i) {
                fq[size_t(i)] = phi_elementwise(m.kind, q[i]);
                fk[size_t(i)] = phi_elementwise(m.kind, q[A + i]);
              }
              uint8_t *at = plain.data() +
                            state_block_offset(positions ? 0 : r, 1, h, layers, heads, d, d, f, C);
              dispatch(f, [&](auto F) {
                chunked_attention_update<F>(fq.data(), fk.data(), q + 2 * A, at,
                                            &att2[size_t(r) * A + size_t(h) * d], d, d,
                                            positions ? t + r : t, C, wide.data());
              });
            }
          ASSERT_EQ(att1, att2) << name(f) << " C " << C << " d_head " << d << " call " << call;
          ASSERT_EQ(twin, plain) << name(f) << " C " << C << " d_head " << d << " call " << call;
        }
      }
}

} // namespace

TEST(CudaTwins, ChunkedAttentionIsThePlainReference) {
  expect_chunked_twin_is_the_reference(false);
}

TEST(CudaTwins, ChunkedAttentionPositionsAreThePlainReference) {
  expect_chunked_twin_is_the_reference(true);
}

// TARNN_STATE_CHUNK (C = 4 and 3) on the GPU plan with the chunked kernels' twins: the CPU
// backend's chunked path's bytes and log-likelihoods to the bit, in fp32 and fp16: the small golden
// sampled in chunks of 3 and at once, scored, and completed with known leading runs of 5 to 22
// bytes (prefills ending at every place in a chunk) through the GPU's prefill; the MNIST-size
// model of the emulated device (d_head 32: the register path in fp16) sampled over all its 783
// positions.
TEST(CudaTwins, ChunkedStatePlanAsTheCpuBackend) {
  const Model small = load_model(small_golden());
  const ImageSet in = read_images(small_golden() + "/inputs-idx-ubyte", small.config);
  const Model mnist = narrow_mnist(2, 32, 42);
  const int T = small.config.bytes_per_image(), n = 5;
  std::vector<uint8_t> known(size_t(n) * T, 0), given(known.size());
  for (int r = 0; r < n; ++r) // image r knows its first 5 + 4 r bytes
    for (int t = 0; t < 5 + 4 * r; ++t)
      known[size_t(r) * T + t] = 1;
  for (size_t i = 0; i < given.size(); ++i) // the golden's 3 images, again after its last
    given[i] = in.bytes[i % in.bytes.size()];
  for (const char *C : {"4", "3"}) {
    const StateChunk chunk(C);
    for (StateFormat state : {StateFormat::Fp32, StateFormat::Fp16}) {
      const std::string what = std::string("C ") + C + ", " + name(state);
      const Pair sampled =
          both(small, job_of(7, 99, 5), 3, nullptr, nullptr, Precision::Fp32, false, state);
      EXPECT_EQ(sampled.cpu, sampled.twin) << what;
      EXPECT_EQ(
          both(small, job_of(7, 99, 5), 7, nullptr, nullptr, Precision::Fp32, false, state).twin,
          sampled.twin)
          << what;
      const Pair scored = both(small, job_of(in.count, 0), 2, in.bytes.data(), nullptr,
                               Precision::Fp32, false, state);
      EXPECT_EQ(scored.cpu_lp, scored.twin_lp) << what;
      const Pair done =
          both(small, job_of(n, 3), 2, given.data(), known.data(), Precision::Fp32, true, state);
      EXPECT_EQ(done.cpu, done.twin) << what;
      EXPECT_EQ(done.cpu_lp, done.twin_lp) << what;
    }
    const Pair full =
        both(mnist, job_of(2, 11), 2, nullptr, nullptr, Precision::Fp32, false, StateFormat::Fp16);
    EXPECT_EQ(full.cpu, full.twin) << C;
    EXPECT_EQ(full.cpu_lp, full.twin_lp) << C;
  }
}

// The paper's shape (d_head 32, 8 x 8 heads, relu), a few positions: the rest of each image is
// left as it was, as on the CPU.
TEST(CudaTwins, PlanAtMnistSizeAsTheCpuBackend) {
  const Model m = random_model(Config::mnist(), 42);
  const Pair p = both(m, job_of(3, 11, 0, 12), 2);
  EXPECT_EQ(p.cpu, p.twin);
  for (int i = 0; i < 3; ++i)
    for (int t = 13; t < 784; ++t)
      ASSERT_EQ(p.twin[size_t(i) * 784 + t], 0xAB);
}

// Where there is no GPU (or no CUDA build) the backend says so in one line; where there is one,
// it names it.
TEST(CudaBackend, DeviceCheckIsAOneLineAnswer) {
  std::string what;
  try {
    what = device_here(Device::Cuda);
  } catch (const Error &e) {
    what = e.what();
    EXPECT_TRUE(device_built(Device::Cuda) ? contains(what, "no CUDA device")
                                           : contains(what, "not available in this build"))
        << what;
  }
  EXPECT_FALSE(what.empty());
  EXPECT_FALSE(contains(what, "\n")) << what;
  std::printf("device_here(cuda): %s\n", what.c_str());
}
