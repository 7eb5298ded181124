// The accuracy study of int8 GEMMs (docs/PRECISION.md, "int8"): the engine's CPU decoder in fp32
// and in variants that run some of the linear layers in int8 (or bf16), side by side,
// teacher-forced through the same images, one position at a time. Each variant runs the engine's
// own kernels (CpuKernels: src/cpu/gemm_int8.h, whose arithmetic is kernels/gemm_int8_ref.h), so
// what it measures is what `--precision int8` computes. Writes JSON: each image's bits/dim in
// every variant, and per position t the largest and the summed |o_t - o_t(fp32)| of the mixture
// parameters (summed, so that slices of the test set merge: tools/plot_int8.py).
//
//   int8_study --model models/mnist --images data/mnist/test-images-idx3-ubyte
//       --first 0 --limit 1000 --out slice-0.json [--variant NAME=SPEC ...]
// (--batch: images a decoder steps at once; --threads: decoders at once)
//
// A SPEC says which linear layers run in which precision, from fp32 everywhere, left to right:
// comma-separated TARGET:PRECISION, TARGET one of qkv, out, ff1, ff2 (every layer's), all (the
// four of every layer), pred (the predictor), each optionally @L for layer L only; PRECISION
// fp32, bf16 or int8. "all:int8,all@7:bf16": every layer's four GEMMs in int8 but layer 7's in
// bf16. Without --variant, the study's default set (kDefaultVariants).
//
// Built beside the library (target int8_study) for docs/PRECISION.md; not a test, not installed.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "../src/cpu/cpu_ops.h"
#include "../src/model/decoder.h"
#include "tarnn/tarnn.h"

using namespace tarnn;

namespace {

const char *const kDefaultVariants[] = {
    "int8-all=all:int8",         "int8-all+pred=all:int8,pred:int8",
    "int8-ff=ff1:int8,ff2:int8", "int8-qkv=qkv:int8",
    "int8-out=out:int8",         "int8-ff1=ff1:int8",
    "int8-ff2=ff2:int8",         "int8-pred=pred:int8"};

struct Args {
  std::string model, images, out = "-";
  int64_t first = 0, limit = 1000;
  int batch = 50, threads = 2;
  std::vector<std::string> variants;
};

Args parse(int argc, char **argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model")
      a.model = v;
    else if (k == "--images")
      a.images = v;
    else if (k == "--first")
      a.first = std::stoll(v);
    else if (k == "--limit")
      a.limit = std::stoll(v);
    else if (k == "--batch")
      a.batch = std::stoi(v);
    else if (k == "--threads")
      a.threads = std::stoi(v);
    else if (k == "--out")
      a.out = v;
    else if (k == "--variant")
      a.variants.push_back(v);
    else
      throw Error("int8_study: unknown option " + k);
  }
  if (a.model.empty() || a.images.empty())
    throw Error("int8_study: give --model and --images");
  if (a.variants.empty())
    a.variants.assign(std::begin(kDefaultVariants), std::end(kDefaultVariants));
  return a;
}

enum Kind { Qkv, Out, Ff1, Ff2, Pred, kKinds };
const char *const kKindNames[] = {"qkv", "out", "ff1", "ff2", "pred"};

// precision[layer][kind] (the predictor: layer 0's Pred)
using Plan = std::vector<std::array<Precision, kKinds>>;

Plan plan_of(const std::string &spec, int n_layers) {
  Plan p(size_t(n_layers),
         {Precision::Fp32, Precision::Fp32, Precision::Fp32, Precision::Fp32, Precision::Fp32});
  size_t at = 0;
  while (at < spec.size()) {
    const size_t end = std::min(spec.find(',', at), spec.size());
    const std::string item = spec.substr(at, end - at);
    at = end + 1;
    const size_t colon = item.find(':');
    if (colon == std::string::npos)
      throw Error("int8_study: " + item + ": not TARGET:PRECISION");
    std::string target = item.substr(0, colon);
    const Precision precision = parse_precision(item.substr(colon + 1));
    int only = -1;
    if (const size_t amp = target.find('@'); amp != std::string::npos) {
      only = std::stoi(target.substr(amp + 1));
      target.resize(amp);
      if (only < 0 || only >= n_layers)
        throw Error("int8_study: " + item + ": no such layer");
    }
    bool found = false;
    for (int k = 0; k < kKinds; ++k)
      if (target == kKindNames[k] || (target == "all" && k != Pred)) {
        found = true;
        for (int l = 0; l < n_layers; ++l)
          if ((only < 0 || only == l) && (k != Pred || l == 0))
            p[size_t(l)][size_t(k)] = precision;
      }
    if (!found)
      throw Error("int8_study: " + item + ": no target " + target);
  }
  return p;
}

// The precision the plan gives linear layer l of the model.
Precision precision_of(const Model &m, const Plan &plan, const Linear &l) {
  if (&l == &m.weights.predictor)
    return plan[0][Pred];
  for (size_t i = 0; i < m.weights.layers.size(); ++i) {
    const LayerWeights &w = m.weights.layers[i];
    const Linear *kinds[] = {&w.qkv, &w.out, &w.ff1, &w.ff2};
    for (int k = 0; k < 4; ++k)
      if (&l == kinds[k])
        return plan[i][size_t(k)];
  }
  throw Error("int8_study: a linear layer the model does not have");
}

struct Found { // what one thread finds over its batches, per variant (0: fp32)
  std::vector<std::vector<double>> worst, sum;              // [variant][t]
  std::vector<std::vector<std::pair<int64_t, double>>> bpd; // [variant] (image, bits/dim)
};

} // namespace

int main(int argc, char **argv) try {
  const Args a = parse(argc, argv);
  const Model m = load_model(a.model);
  const Config &c = m.config;
  ImageSet images = read_images(a.images, c);
  const int64_t first = std::min(a.first, images.count),
                count = std::min(a.limit, images.count - first);
  const int L = c.positions(), K3 = c.d_out();
  std::vector<std::string> names = {"fp32"};
  std::vector<std::string> specs = {""};
  for (const std::string &v : a.variants) {
    const size_t eq = v.find('=');
    if (eq == std::string::npos)
      throw Error("int8_study: --variant " + v + ": not NAME=SPEC");
    names.push_back(v.substr(0, eq));
    specs.push_back(v.substr(eq + 1));
  }
  std::vector<std::unique_ptr<CpuWeights>> weights;
  for (const std::string &s : specs) {
    const Plan plan = plan_of(s, c.n_layers);
    weights.push_back(
        std::make_unique<CpuWeights>(m, [&](const Linear &l) { return precision_of(m, plan, l); }));
  }
  const size_t V = names.size();

  auto study = [&](int64_t at, int n, Found &found) {
    std::vector<std::unique_ptr<Decoder<CpuOps>>> dec;
    for (size_t v = 0; v < V; ++v)
      dec.push_back(std::make_unique<Decoder<CpuOps>>(c, weights[v]->view(), n, StateFormat::Fp32,
                                                      CpuKernels{}));
    std::vector<uint8_t> cur(static_cast<size_t>(n));
    std::vector<std::vector<float>> o(V, std::vector<float>(size_t(n) * K3));
    std::vector<std::vector<double>> lp(V, std::vector<double>(size_t(n), 0.0));
    for (int t = 0; t < L; ++t) {
      for (int r = 0; r < n; ++r)
        cur[size_t(r)] = images.image(at + r)[t];
      for (size_t v = 0; v < V; ++v) {
        dec[v]->step(t, cur.data(), o[v].data());
        for (int r = 0; r < n; ++r)
          lp[v][size_t(r)] +=
              mixture_log_prob(&o[v][size_t(r) * K3], c.mixtures, images.image(at + r)[t + 1]);
      }
      for (size_t v = 1; v < V; ++v)
        for (size_t i = 0; i < o[v].size(); ++i) {
          const double e = std::fabs(double(o[v][i]) - double(o[0][i]));
          found.worst[v][size_t(t)] = std::max(found.worst[v][size_t(t)], e);
          found.sum[v][size_t(t)] += e;
        }
    }
    for (size_t v = 0; v < V; ++v)
      for (int r = 0; r < n; ++r)
        found.bpd[v].emplace_back(at + r, -lp[v][size_t(r)] / (L * std::log(2.0)));
  };

  const int threads = std::max(1, a.threads);
  std::vector<Found> found(static_cast<size_t>(threads));
  for (Found &f : found) {
    f.worst.assign(V, std::vector<double>(size_t(L), 0.0));
    f.sum = f.worst;
    f.bpd.resize(V);
  }
  std::atomic<int64_t> next{0}, done{0};
  std::vector<std::thread> team;
  for (int i = 0; i < threads; ++i)
    team.emplace_back([&, i] {
      for (int64_t at; (at = next.fetch_add(a.batch)) < count;) {
        const int n = int(std::min<int64_t>(a.batch, count - at));
        study(first + at, n, found[size_t(i)]);
        std::fprintf(stderr, "%lld of %lld images\n", static_cast<long long>(done += n),
                     static_cast<long long>(count));
      }
    });
  for (std::thread &t : team)
    t.join();

  nlohmann::json j = {{"model", a.model}, {"images_file", a.images}, {"first", first},
                      {"images", count},  {"positions", L},          {"parameters", K3}};
  for (size_t v = 0; v < V; ++v) {
    std::vector<double> worst(static_cast<size_t>(L), 0.0), sum = worst,
                                                            bpd(static_cast<size_t>(count));
    for (const Found &f : found) {
      for (int t = 0; t < L; ++t) {
        worst[size_t(t)] = std::max(worst[size_t(t)], f.worst[v][size_t(t)]);
        sum[size_t(t)] += f.sum[v][size_t(t)];
      }
      for (const auto &[image, b] : f.bpd[v])
        bpd[size_t(image - first)] = b;
    }
    nlohmann::json &e = j["variants"][names[v]];
    e = {{"spec", specs[v]}, {"bits_per_dim", bpd}};
    if (v > 0) {
      e["worst_param_error_at_t"] = worst;
      e["sum_param_error_at_t"] = sum;
    }
  }
  const std::string text = j.dump() + "\n";
  if (a.out == "-")
    std::fputs(text.c_str(), stdout);
  else
    write_file_atomic(a.out, text);
  return 0;
} catch (const std::exception &e) {
  std::fprintf(stderr, "int8_study: %s\n", e.what());
  return 1;
}
