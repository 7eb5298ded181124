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
#include <array>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "study.h"

using namespace tarnn;

namespace {

const char *const kDefaultVariants[] = {
    "int8-all=all:int8",         "int8-all+pred=all:int8,pred:int8",
    "int8-ff=ff1:int8,ff2:int8", "int8-qkv=qkv:int8",
    "int8-out=out:int8",         "int8-ff1=ff1:int8",
    "int8-ff2=ff2:int8",         "int8-pred=pred:int8"};

struct Args : study::Options {
  Args() : Options(1000, 50) {}
  int64_t first = 0;
  std::vector<std::string> variants;
};

Args parse(int argc, char **argv) {
  Args a;
  study::parse_options(argc, argv, a, [&](const std::string &k, const std::string &v) {
    if (k == "--first")
      a.first = study::whole_number(k, v);
    else if (k == "--variant")
      a.variants.push_back(v);
    else
      return false;
    return true;
  });
  if (a.model.empty() || a.images.empty())
    throw Error("give --model and --images");
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
      throw Error(item + ": not TARGET:PRECISION");
    std::string target = item.substr(0, colon);
    const Precision precision = parse_precision(item.substr(colon + 1));
    int only = -1;
    if (const size_t amp = target.find('@'); amp != std::string::npos) {
      only = std::stoi(target.substr(amp + 1));
      target.resize(amp);
      if (only < 0 || only >= n_layers)
        throw Error(item + ": no such layer");
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
      throw Error(item + ": no target " + target);
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
  throw Error("a linear layer the model does not have");
}

// The variants' names and specs, fp32 everywhere first: the reference.
std::pair<std::vector<std::string>, std::vector<std::string>> variants_of(const Args &a) {
  std::vector<std::string> names = {"fp32"}, specs = {""};
  for (const std::string &v : a.variants) {
    const size_t eq = v.find('=');
    if (eq == std::string::npos)
      throw Error("--variant " + v + ": not NAME=SPEC");
    names.push_back(v.substr(0, eq));
    specs.push_back(v.substr(eq + 1));
  }
  return {names, specs};
}

} // namespace

int main(int argc, char **argv) try {
  const Args a = parse(argc, argv);
  const Model m = load_model(a.model);
  const Config &c = m.config;
  const ImageSet images = read_images(a.images, c);
  const int64_t first = std::min(a.first, images.count),
                count = std::min(a.limit, images.count - first);
  const int L = c.positions();
  const auto [names, specs] = variants_of(a);
  std::vector<std::unique_ptr<CpuWeights>> weights;
  for (const std::string &s : specs) {
    const Plan plan = plan_of(s, c.n_layers);
    weights.push_back(
        std::make_unique<CpuWeights>(m, [&](const Linear &l) { return precision_of(m, plan, l); }));
  }
  const size_t V = names.size(), threads = size_t(std::max(1, a.threads));
  std::vector<study::Found> found(threads, study::Found(V, L));
  study::share_out(count, a.batch, int(threads), [&](int i, int64_t at, int n) {
    study::teacher_force(
        c, images, V,
        [&](size_t v, int rows) {
          return std::make_unique<Decoder<CpuOps>>(c, weights[v]->view(), rows, StateFormat::Fp32,
                                                   CpuKernels{});
        },
        first + at, n, found[size_t(i)]);
  });
  nlohmann::json j = {{"model", a.model}, {"images_file", a.images}, {"first", first},
                      {"images", count},  {"positions", L},          {"parameters", c.d_out()}};
  for (size_t v = 0; v < V; ++v) {
    j["variants"][names[v]] = study::findings(found, v, first, count, L, "sum_param_error_at_t");
    j["variants"][names[v]]["spec"] = specs[v];
  }
  study::write_json(a.out, j);
  return 0;
} catch (const std::exception &e) {
  std::fprintf(stderr, "int8_study: %s\n", e.what());
  return 1;
}
