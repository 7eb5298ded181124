// The accuracy study of a 16-bit state (docs/STATE.md): the engine's CPU decoder in fp32 and in
// each 16-bit state format side by side, teacher-forced through the same images, one position at
// a time. Writes JSON: per position t the largest and mean |o_t - o_t(fp32)| of the mixture
// parameters; each image's bits/dim in every format; the largest |S| and |z| per layer (fp32),
// and the share of S's entries that fp16 could not hold (beyond 65504, or below its least normal
// 2^-14, where it keeps fewer bits).
//
//   state_study --model models/mnist --images data/mnist/test-images-idx3-ubyte --limit 10000
//   state_study --shape cifar10 --count 4 --batch 2  (random weights, images sampled in fp32)
// (--batch: images a decoder steps at once; --threads: decoders at once; --out FILE.json)
//
// Built beside the library (target state_study) for docs/STATE.md; not a test and not installed.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "../kernels/state_format.h"
#include "../src/cpu/cpu_ops.h"
#include "../src/model/decoder.h"
#include "tarnn/tarnn.h"

using namespace tarnn;

namespace {

struct Args {
  std::string model, images, shape, out = "-";
  int64_t limit = 500, count = 4;
  int batch = 100, threads = 2;
};

Args parse(int argc, char **argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model")
      a.model = v;
    else if (k == "--images")
      a.images = v;
    else if (k == "--shape")
      a.shape = v;
    else if (k == "--limit")
      a.limit = std::stoll(v);
    else if (k == "--count")
      a.count = std::stoll(v);
    else if (k == "--batch")
      a.batch = std::stoi(v);
    else if (k == "--threads")
      a.threads = std::stoi(v);
    else if (k == "--out")
      a.out = v;
    else
      throw Error("state_study: unknown option " + k);
  }
  if (a.model.empty() == a.shape.empty())
    throw Error("state_study: give --model (with --images) or --shape cifar10|mnist");
  return a;
}

struct PerLayer {
  std::vector<double> max_s, max_z;
  double entries = 0, above_fp16 = 0, below_fp16_normal = 0;
};

// |S| and |z| of every layer of a decoder's fp32 state.
void scan(const Config &c, const StepBuffers &b, int rows, PerLayer &p) {
  const int d = c.d_head;
  for (int r = 0; r < rows; ++r)
    for (int l = 0; l < c.n_layers; ++l)
      for (int h = 0; h < c.n_heads; ++h) {
        const char *block =
            static_cast<const char *>(b.state) +
            state_block_offset(r, l, h, c.n_layers, c.n_heads, d, d, StateFormat::Fp32);
        const float *S = reinterpret_cast<const float *>(block);
        const float *z =
            reinterpret_cast<const float *>(block + state_s_bytes(d, d, StateFormat::Fp32));
        for (int i = 0; i < d * d; ++i) {
          const double s = std::fabs(S[i]);
          p.max_s[size_t(l)] = std::max(p.max_s[size_t(l)], s);
          p.entries += 1;
          p.above_fp16 += s > 65504.0;
          p.below_fp16_normal += s > 0 && s < 0x1p-14;
        }
        for (int i = 0; i < d; ++i)
          p.max_z[size_t(l)] = std::max(p.max_z[size_t(l)], double(std::fabs(z[i])));
      }
}

} // namespace

int main(int argc, char **argv) try {
  const Args a = parse(argc, argv);
  const Model m = a.model.empty()
                      ? random_model(a.shape == "cifar10" ? Config::cifar10() : Config::mnist(), 1)
                      : load_model(a.model);
  const Config &c = m.config;
  ImageSet images;
  if (!a.images.empty()) {
    images = read_images(a.images, c);
    if (a.limit > 0 && a.limit < images.count) {
      images.count = a.limit;
      images.bytes.resize(size_t(a.limit) * images.bytes_per_image());
    }
  } else { // the model's own images, sampled in fp32
    Engine engine(m, RunOptions{});
    images = sample_images(engine, a.count, 7);
  }
  const int L = c.positions(), K3 = c.d_out();
  const std::vector<StateFormat> formats = all_state_formats(); // fp32 first: the reference
  const CpuWeights w(m, Precision::Fp32);
  // what one thread finds over its batches, merged at the end
  struct Found {
    std::vector<std::vector<double>> worst, sum;              // [format][t]
    std::vector<std::vector<std::pair<int64_t, double>>> bpd; // [format] (image, bits/dim)
    PerLayer layers;
  };
  auto study = [&](int64_t first, int n, Found &found) {
    std::vector<std::unique_ptr<Decoder<CpuOps>>> dec;
    for (StateFormat f : formats)
      dec.push_back(std::make_unique<Decoder<CpuOps>>(c, w.view(), n, f, CpuKernels{}));
    std::vector<uint8_t> cur(static_cast<size_t>(n));
    std::vector<std::vector<float>> o(formats.size(), std::vector<float>(size_t(n) * K3));
    std::vector<std::vector<double>> lp(formats.size(), std::vector<double>(size_t(n), 0.0));
    for (int t = 0; t < L; ++t) {
      for (int r = 0; r < n; ++r)
        cur[size_t(r)] = images.image(first + r)[t];
      for (size_t f = 0; f < formats.size(); ++f) {
        dec[f]->step(t, cur.data(), o[f].data());
        for (int r = 0; r < n; ++r)
          lp[f][size_t(r)] +=
              mixture_log_prob(&o[f][size_t(r) * K3], c.mixtures, images.image(first + r)[t + 1]);
      }
      for (size_t f = 1; f < formats.size(); ++f)
        for (size_t i = 0; i < o[f].size(); ++i) {
          const double e = std::fabs(double(o[f][i]) - double(o[0][i]));
          found.worst[f][size_t(t)] = std::max(found.worst[f][size_t(t)], e);
          found.sum[f][size_t(t)] += e;
        }
      scan(c, dec[0]->buffers(), n, found.layers);
    }
    for (size_t f = 0; f < formats.size(); ++f)
      for (int r = 0; r < n; ++r)
        found.bpd[f].emplace_back(first + r, -lp[f][size_t(r)] / (L * std::log(2.0)));
  };
  const int threads = std::max(1, a.threads);
  std::vector<Found> found(static_cast<size_t>(threads));
  for (Found &f : found) {
    f.worst.assign(formats.size(), std::vector<double>(size_t(L), 0.0));
    f.sum = f.worst;
    f.bpd.resize(formats.size());
    f.layers.max_s.assign(size_t(c.n_layers), 0.0);
    f.layers.max_z.assign(size_t(c.n_layers), 0.0);
  }
  std::atomic<int64_t> next{0}, done{0};
  std::vector<std::thread> team;
  for (int i = 0; i < threads; ++i)
    team.emplace_back([&, i] {
      for (int64_t first; (first = next.fetch_add(a.batch)) < images.count;) {
        const int n = int(std::min<int64_t>(a.batch, images.count - first));
        study(first, n, found[size_t(i)]);
        std::fprintf(stderr, "%lld of %lld images\n", static_cast<long long>(done += n),
                     static_cast<long long>(images.count));
      }
    });
  for (std::thread &t : team)
    t.join();
  std::vector<std::vector<double>> worst(formats.size(), std::vector<double>(size_t(L), 0.0)),
      mean = worst, bpd(formats.size(), std::vector<double>(size_t(images.count)));
  PerLayer layers = found[0].layers;
  for (const Found &f : found) {
    for (size_t k = 0; k < formats.size(); ++k) {
      for (int t = 0; t < L; ++t) {
        worst[k][size_t(t)] = std::max(worst[k][size_t(t)], f.worst[k][size_t(t)]);
        mean[k][size_t(t)] += f.sum[k][size_t(t)] / (double(images.count) * K3);
      }
      for (const auto &[image, b] : f.bpd[k])
        bpd[k][size_t(image)] = b;
    }
    if (&f == &found[0])
      continue;
    for (int l = 0; l < c.n_layers; ++l) {
      layers.max_s[size_t(l)] = std::max(layers.max_s[size_t(l)], f.layers.max_s[size_t(l)]);
      layers.max_z[size_t(l)] = std::max(layers.max_z[size_t(l)], f.layers.max_z[size_t(l)]);
    }
    layers.entries += f.layers.entries;
    layers.above_fp16 += f.layers.above_fp16;
    layers.below_fp16_normal += f.layers.below_fp16_normal;
  }
  nlohmann::json j = {{"model", a.model.empty() ? "random:" + a.shape : a.model},
                      {"images", images.count},
                      {"positions", L},
                      {"max_abs_S_per_layer", layers.max_s},
                      {"max_abs_z_per_layer", layers.max_z},
                      {"S_entries_above_65504", layers.above_fp16 / layers.entries},
                      {"S_entries_below_2^-14", layers.below_fp16_normal / layers.entries}};
  for (size_t f = 0; f < formats.size(); ++f) {
    j["formats"][name(formats[f])] = {{"bits_per_dim", bpd[f]}};
    if (f > 0) {
      j["formats"][name(formats[f])]["worst_param_error_at_t"] = worst[f];
      j["formats"][name(formats[f])]["mean_param_error_at_t"] = mean[f];
    }
  }
  const std::string text = j.dump() + "\n";
  if (a.out == "-")
    std::fputs(text.c_str(), stdout);
  else
    write_file_atomic(a.out, text);
  return 0;
} catch (const std::exception &e) {
  std::fprintf(stderr, "state_study: %s\n", e.what());
  return 1;
}
