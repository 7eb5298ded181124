// Helpers the test files share: paths, temporary folders, reading files.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "tarnn/error.h"
#include "tarnn/jobs.h"
#include "tarnn/model.h"
#include "tarnn/run.h"

namespace tarnn_test {

inline std::string source_dir() { return TARNN_SOURCE_DIR; }

// Under the sanitizers (TARNN_TEST_SANITIZED, which CMake sets for a TARNN_SANITIZE build) the
// MNIST-size rollouts run their first `n` positions: the same code for an eighth of the time. The
// release pass runs all 783.
inline int positions_unless_sanitized(int n) {
  return std::getenv("TARNN_TEST_SANITIZED") ? n : -1;
}
inline std::string small_golden() { return source_dir() + "/tests/golden/small"; }

// The full MNIST-size golden folder, made at test time by the ctest fixture.
inline std::string mnist_golden() {
  const char *dir = std::getenv("TARNN_GOLDEN_MNIST");
  return dir ? dir : "";
}

// TARNN_STATE_CHUNK set for one scope (read wherever a state is laid out), then unset.
struct StateChunk {
  explicit StateChunk(const char *c) { setenv("TARNN_STATE_CHUNK", c, 1); }
  ~StateChunk() { unsetenv("TARNN_STATE_CHUNK"); }
  StateChunk(const StateChunk &) = delete;
  StateChunk &operator=(const StateChunk &) = delete;
};

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/tarnn-test-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string &name) const { return (path / name).string(); }
};

inline std::vector<char> read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline void write_file(const std::string &path, const std::vector<char> &data) {
  std::ofstream(path, std::ios::binary).write(data.data(), std::streamsize(data.size()));
}

// MNIST's 783 positions with narrower layers (2 of them, d_model 64, d_ff 128) and `heads` heads of
// d_head, random weights: full rollouts on plain reference paths take seconds, not minutes.
inline tarnn::Model narrow_mnist(int heads, int d_head, uint64_t seed = 7) {
  tarnn::Config c = tarnn::Config::mnist();
  c.n_layers = 2;
  c.n_heads = heads;
  c.d_head = d_head;
  c.d_model = 64;
  c.d_ff = 128;
  return tarnn::random_model(c, seed);
}

// A feature map of kind k (docs/SPEC.md "Feature maps"): n_dims, softmax_temp, generalized_random's
// f; smoothed_random_fourier's constant 0.5.
inline tarnn::FeatureMap feature_map_of(tarnn::FeatureMapKind k, int n_dims = 0, double temp = 1.0,
                                        tarnn::FeatureMapKind fn = tarnn::FeatureMapKind::Relu) {
  tarnn::FeatureMap fm;
  fm.kind = k;
  fm.n_dims = n_dims;
  fm.softmax_temp = temp;
  fm.smoothing = 0.5;
  fm.kernel_fn = fn;
  return fm;
}

// A rollout's images and log-likelihoods; job() is the Rollout that writes them: n images of
// `config`'s size from `seed`, the given pixels where `known` says so, numbered from `first`.
struct Outcome {
  std::vector<uint8_t> images;
  std::vector<double> log_prob;
  tarnn::Rollout job(const tarnn::Config &config, int64_t n, uint64_t seed,
                     const uint8_t *given = nullptr, const uint8_t *known = nullptr,
                     int64_t first = 0) {
    images.assign(size_t(n) * size_t(config.bytes_per_image()), 0);
    log_prob.assign(size_t(n), 0.0);
    tarnn::Rollout r;
    r.count = n;
    r.seed = seed;
    r.first_index = first;
    r.given = given;
    r.known = known;
    r.out = images.data();
    r.log_prob = log_prob.data();
    return r;
  }
};

// The shipped model's bits/dim on 4 of its own digits (sampled in fp32, batch 4): fp32's, and with
// `change` made to the options, prefilled and step by step. The bars of the studies (docs/STATE.md,
// docs/PRECISION.md) for a reduced format are set on these.
struct AgainstFp32 {
  std::vector<double> fp32, changed, stepped;
  double worst() const { // the largest |changed - fp32|
    double w = 0;
    for (size_t i = 0; i < fp32.size(); ++i)
      w = std::max(w, std::fabs(changed[i] - fp32[i]));
    return w;
  }
  double mean() const { // the mean of changed - fp32
    double m = 0;
    for (size_t i = 0; i < fp32.size(); ++i)
      m += (changed[i] - fp32[i]) / double(fp32.size());
    return m;
  }
};
inline AgainstFp32
shipped_model_against_fp32(const std::function<void(tarnn::RunOptions &)> &change) {
  const tarnn::Model m = tarnn::load_model(source_dir() + "/models/mnist");
  tarnn::RunOptions o;
  o.batch = 4;
  tarnn::Engine full(m, o);
  change(o);
  tarnn::Engine changed(m, o);
  o.prefill = false;
  tarnn::Engine stepped(m, o);
  const tarnn::ImageSet digits = tarnn::sample_images(full, 4, 3);
  return {tarnn::score_images(full, digits), tarnn::score_images(changed, digits),
          tarnn::score_images(stepped, digits)};
}

// The one line a tarnn::Error says, or "(no error)".
inline std::string error_of(const std::function<void()> &f) {
  try {
    f();
  } catch (const tarnn::Error &e) {
    return e.what();
  }
  return "(no error)";
}

} // namespace tarnn_test
