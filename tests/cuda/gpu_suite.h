// What the GPU suites (test_cuda, test_cuda_paths) share: the device they run on or why they
// skip, the models they use there, and runs on either backend. On a GPU they run the paper's
// MNIST size; on the emulated device (-DTARNN_CUDA_EMULATOR=ON: every thread and GEMM on the CPU,
// checked; docs/CUDA.md) a model of the same attention (d_head 32, the kernels' register path)
// two layers deep and 64 wide, its first positions only under the sanitizers.
#pragma once

#include <cmath>
#include <cstdio>
#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "no_device.h"
#include "src/cuda/cuda_backend.h"
#include "src/engine/testing.h"
#include "tarnn/tarnn.h"
#include "test_util.h"

namespace tarnn_test {

#define REQUIRE_CUDA_DEVICE()                                                                      \
  do {                                                                                             \
    if (!::tarnn_test::no_device().empty())                                                        \
      GTEST_SKIP() << ::tarnn_test::no_device();                                                   \
  } while (0)

// Whether the device is the emulated one (its name says so: it never passes for a GPU).
inline bool emulated() {
  static const bool e =
      no_device().empty() && tarnn::cuda_require_device().find("emulated") != std::string::npos;
  return e;
}

// Announces the device once per suite.
class AnnounceDevice : public ::testing::Environment {
  void SetUp() override {
    if (no_device().empty())
      std::printf("[ GPU suite ] running on %s\n", tarnn::cuda_require_device().c_str());
    else
      std::printf("[ GPU suite ] every test skips: %s\n", no_device().c_str());
  }
};

// The MNIST-size model: the paper's on a GPU, the narrower one on the emulated device.
inline const tarnn::Model &mnist() {
  static const tarnn::Model m =
      emulated() ? narrow_mnist(2, 32, 42) : tarnn::random_model(tarnn::Config::mnist(), 42);
  return m;
}

// The positions an MNIST-size rollout runs: all (-1), or under the sanitizers on the emulated
// device its first 40.
inline int mnist_positions() { return emulated() ? positions_unless_sanitized(40) : -1; }

// Images an MNIST-size test samples: `gpu` on a GPU, fewer on the emulated device.
inline int mnist_images(int gpu, int emulated_device) { return emulated() ? emulated_device : gpu; }

// What an engine is made with: the options, and the knob of CUDA graphs.
struct On {
  tarnn::RunOptions run;
  tarnn::Knobs knobs;
};

inline On on(tarnn::Device device, int64_t batch = 0, bool graph = true,
             tarnn::Precision precision = tarnn::Precision::Fp32,
             tarnn::StateFormat state = tarnn::StateFormat::Fp32) {
  On o;
  o.run.device = device;
  o.run.batch = batch;
  o.run.precision = precision;
  o.run.state = state;
  o.knobs.set("graph", graph ? "on" : "off");
  return o;
}

// A rollout of n images on `o` (the given bytes where `known` says), `positions` long (-1: all).
inline Outcome run_on(const On &o, const tarnn::Model &m, int64_t n, uint64_t seed,
                      const uint8_t *given = nullptr, const uint8_t *known = nullptr,
                      int64_t first = 0, int positions = -1) {
  Outcome r;
  tarnn::Rollout job = r.job(m.config, n, seed, given, known, first);
  job.positions = positions;
  engine_with(m, o.run, o.knobs).run(job);
  return r;
}

inline double identical_fraction(const std::vector<uint8_t> &a, const std::vector<uint8_t> &b) {
  size_t same = 0;
  for (size_t i = 0; i < a.size(); ++i)
    same += a[i] == b[i];
  return double(same) / double(a.size());
}

// Images as a rollout of `positions` positions leaves them: columns 0 .. positions as they are,
// zeros after (-1: all of them as they are).
inline std::vector<uint8_t> as_rolled(std::vector<uint8_t> images, const tarnn::Config &c,
                                      int positions) {
  const size_t T = size_t(c.bytes_per_image());
  if (positions >= 0)
    for (size_t i = 0; i < images.size(); ++i)
      if (i % T > size_t(positions))
        images[i] = 0;
  return images;
}

// The top half of each of n images known: make_mask's default (the paper's Figure 3), n times.
inline std::vector<uint8_t> top_halves(const tarnn::Config &c, int n) {
  const std::vector<uint8_t> one = tarnn::make_mask({}, c);
  std::vector<uint8_t> all;
  for (int r = 0; r < n; ++r)
    all.insert(all.end(), one.begin(), one.end());
  return all;
}

inline double bpd(double log_prob, const tarnn::Config &c) {
  return -log_prob / (c.positions() * std::log(2.0));
}

} // namespace tarnn_test
