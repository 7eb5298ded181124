// include/tarnn/model.h: load_model, find_model and random_model.
#include <cmath>
#include <cstdio>
#include <random>
#include <set>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "../base/util.h"
#include "../io/safetensors.h"
#include "tarnn/error.h"
#include "tarnn/model.h"
#include "tarnn/run.h"

namespace tarnn {

namespace {

std::string shape_str(const std::vector<int64_t> &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

class Reader {
public:
  // Finite is not enough: a weight of 3e38 passes isfinite() and overflows the first product, so
  // that score prints nan or even a negative bits/dim. Trained weights are far below this bound
  // (the shipped model's largest is 4.2); products of such weights over d_model terms, summed
  // over thousands of positions in S, stay within fp32's 3.4e38.
  static constexpr float kMaxWeight = 1e6f;

  explicit Reader(const SafeTensors &st) : st_(st) {}

  // The tensor `name` as fp32, checked to have shape `want` (or one of `alts`).
  std::vector<float> take(const std::string &name, const std::vector<int64_t> &want,
                          const std::vector<int64_t> &alt = {}) {
    const auto it = st_.tensors().find(name);
    if (it == st_.tensors().end())
      throw Error(st_.path() + ": missing tensor " + name + " " + shape_str(want));
    const auto &shape = it->second.shape;
    if (shape != want && (alt.empty() || shape != alt))
      throw Error(st_.path() + ": tensor " + name + " has shape " + shape_str(shape) +
                  ", config.json wants " + shape_str(want));
    used_.insert(name);
    std::vector<float> v = st_.to_float(name);
    for (float x : v) {
      if (!std::isfinite(x))
        throw Error(st_.path() + ": tensor " + name + " holds a non-finite value");
      if (std::fabs(x) > kMaxWeight) {
        char text[160];
        std::snprintf(text, sizeof text,
                      ": tensor %s holds %g, beyond the %g a weight may have (the forward pass "
                      "would overflow fp32)",
                      name.c_str(), double(x), double(kMaxWeight));
        throw Error(st_.path() + text);
      }
    }
    return v;
  }

  Linear linear(const std::string &prefix, int out, int in) {
    Linear l{out, in, take(prefix + ".weight", {out, in}), take(prefix + ".bias", {out})};
    return l;
  }

  Norm norm(const std::string &prefix, int n) {
    return Norm{take(prefix + ".weight", {n}), take(prefix + ".bias", {n})};
  }

  void check_all_used() const {
    for (const auto &[name, info] : st_.tensors())
      if (!used_.count(name))
        throw Error(st_.path() + ": unexpected tensor " + name + " (not in the model of " +
                    "config.json)");
  }

private:
  const SafeTensors &st_;
  std::set<std::string> used_;
};

void append(std::vector<float> &dst, const std::vector<float> &src) {
  dst.insert(dst.end(), src.begin(), src.end());
}

} // namespace

std::string find_model(const std::string &name, const std::vector<std::string> &more_roots) {
  auto is_model = [](const std::string &d) {
    struct stat st {};
    return ::stat((d + "/config.json").c_str(), &st) == 0;
  };
  if (name.empty())
    throw Error({param("model"), " is empty"});
  struct stat st {};
  if (::stat(name.c_str(), &st) == 0 && S_ISREG(st.st_mode)) // models/mnist/model.safetensors
    throw Error(name +
                    ": a file, not a model folder: pass the folder that holds config.json and "
                    "model.safetensors (" +
                    folder_of(name) + ")",
                Error::Kind::File);
  if (is_model(name) || name[0] == '/')
    return name; // an absolute path is taken as it is: load_model says what is wrong with it
  std::vector<std::string> roots = more_roots;
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) { // PREFIX/bin/tarnn -> PREFIX/share/tarnn/models
    std::string dir(exe, size_t(n));
    dir = dir.substr(0, dir.rfind('/'));
    roots.push_back(dir.substr(0, dir.rfind('/')) + "/share/tarnn/models");
  }
#ifdef TARNN_MODELS_DIR
  roots.push_back(TARNN_MODELS_DIR);
#endif
  const std::string last = name.substr(name.rfind('/') + 1);
  std::string looked = "./" + name;
  for (const std::string &root : roots)
    for (const std::string &candidate : {root + "/" + name, root + "/" + last}) {
      if (is_model(candidate))
        return candidate;
      if (looked.find(candidate) == std::string::npos)
        looked += ", " + candidate;
    }
  throw Error(name + ": no model folder (config.json + model.safetensors) in " + looked,
              Error::Kind::File);
}

Model load_model(const std::string &dir) {
  Model m;
  m.source = dir;
  // The config and the weights are one version of the folder: the config as it was before the
  // weights were read is still there after (a folder replaced file by file as it loads could
  // otherwise give one version's config and another's weights).
  const std::string config_path = dir + "/config.json";
  struct stat config_before {};
  ::stat(config_path.c_str(), &config_before); // where it fails, from_json_file says why
  m.config = Config::from_json_file(config_path);
  const Config &c = m.config;
  // config.json says how large the weights are: a model this machine cannot hold is refused
  // before they are read (an allocation failing halfway said "try a smaller --batch", to info)
  check_memory(4.0 * double(c.parameter_count()), "loading the model (" + dir + ": " +
                                                      std::to_string(c.parameter_count()) +
                                                      " parameters as fp32)");
  const SafeTensors st(dir + "/model.safetensors");
  Reader r(st);
  Weights &w = m.weights;
  const int h = c.half(), d = c.d_model, a = c.d_attn();
  w.value_embedding = r.take("value_embedding.weight", {256, h});
  w.pos = r.take("pos_embedding.pe", {c.positions(), h}, {1, c.positions(), h});
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string p = "transformer.layers." + std::to_string(i) + ".";
    LayerWeights lw;
    lw.qkv = Linear{3 * a, d, {}, {}};
    for (const char *proj : {"query", "key", "value"}) {
      const Linear part = r.linear(p + "attention." + proj + "_projection", a, d);
      append(lw.qkv.w, part.w);
      append(lw.qkv.b, part.b);
    }
    lw.out = r.linear(p + "attention.out_projection", d, a);
    lw.ff1 = r.linear(p + "linear1", c.d_ff, d);
    lw.ff2 = r.linear(p + "linear2", d, c.d_ff);
    lw.norm1 = r.norm(p + "norm1", d);
    lw.norm2 = r.norm(p + "norm2", d);
    if (const int cols = c.feature_map.omega_columns(); cols > 0) // the library's buffer name
      lw.omega = r.take(p + "attention.inner_attention.feature_map.omega", {c.d_head, cols});
    w.layers.push_back(std::move(lw));
  }
  w.final_norm = r.norm("transformer.norm", d);
  w.predictor = r.linear("predictor", c.d_out(), d);
  r.check_all_used();
  st.check_unchanged();
  struct stat config_after {};
  if (::stat(config_path.c_str(), &config_after) != 0 ||
      !(stamp_of(config_after) == stamp_of(config_before)))
    throw Error(changed_while_read(config_path), Error::Kind::File);
  return m;
}

Model random_model(const Config &c, uint64_t seed) {
  c.validate("random model");
  std::mt19937_64 rng(seed);
  auto uniform = [&](size_t n, float bound) {
    std::uniform_real_distribution<float> u(-bound, bound);
    std::vector<float> v(n);
    for (float &x : v)
      x = u(rng);
    return v;
  };
  auto linear = [&](int out, int in) { // torch.nn.Linear's default init
    const float bound = 1.0f / std::sqrt(float(in));
    return Linear{out, in, uniform(size_t(out) * in, bound), uniform(size_t(out), bound)};
  };
  auto norm = [&](int n) { return Norm{std::vector<float>(n, 1.0f), std::vector<float>(n, 0.0f)}; };
  Model m;
  m.config = c;
  m.source = "random weights (seed " + std::to_string(seed) + ")";
  Weights &w = m.weights;
  const int h = c.half(), d = c.d_model;
  w.value_embedding = uniform(256 * size_t(h), 1.7f); // about unit variance, like N(0, 1)
  w.pos.resize(size_t(c.positions()) * h);
  for (int t = 0; t < c.positions(); ++t)
    for (int i = 0; i < h; i += 2) {
      const double f = std::exp(-double(i) * std::log(10000.0) / h);
      w.pos[size_t(t) * h + i] = float(std::sin(t * f));
      if (i + 1 < h)
        w.pos[size_t(t) * h + i + 1] = float(std::cos(t * f));
    }
  std::normal_distribution<float> normal; // omega as the library draws it (not orthogonal)
  for (int i = 0; i < c.n_layers; ++i) {
    w.layers.push_back(LayerWeights{linear(3 * c.d_attn(), d),
                                    linear(d, c.d_attn()),
                                    linear(c.d_ff, d),
                                    linear(d, c.d_ff),
                                    norm(d),
                                    norm(d),
                                    {}});
    w.layers.back().omega.resize(size_t(c.d_head) * c.feature_map.omega_columns());
    for (float &x : w.layers.back().omega)
      x = normal(rng);
  }
  w.final_norm = norm(d);
  w.predictor = linear(c.d_out(), d);
  return m;
}

} // namespace tarnn
