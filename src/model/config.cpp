// include/tarnn/config.h: config.json read, every field checked, and written back.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "../base/util.h"
#include "../io/files.h"
#include "../io/json_limits.h"
#include "tarnn/config.h"
#include "tarnn/error.h"

namespace tarnn {

using nlohmann::json;

namespace {

constexpr size_t kMaxConfigBytes = 1 << 20;

// Every key a config.json may hold: any other is a mistake (a typo such as "n_heads_typo" would
// otherwise leave the real key's value to a default, or describe a model this engine does not
// compute), refused with the closest known key.
constexpr const char *kKnownKeys[] = {
    "format_version", "model_type", "height", "width",      "channels", "n_layers",  "n_heads",
    "d_head",         "d_model",    "d_ff",   "activation", "mixtures", "attention", "feature_map"};
constexpr const char *kModelType = "tarnn-image-transformer";

void check_keys(const std::string &path, const json &j) {
  for (const auto &item : j.items()) {
    const std::string &key = item.key();
    if (std::find(std::begin(kKnownKeys), std::end(kKnownKeys), key) != std::end(kKnownKeys))
      continue;
    const char *closest = kKnownKeys[0];
    for (const char *known : kKnownKeys)
      if (edit_distance(key, known) < edit_distance(key, closest))
        closest = known;
    throw Error(path + ": unknown key \"" + short_text(key) + "\" (did you mean \"" + closest +
                "\"?)");
  }
  if (j.contains("model_type") && j["model_type"] != kModelType)
    throw Error(path + ": model_type " + short_text(j["model_type"].dump()) +
                " is not a model this engine runs (\"" + kModelType + "\")");
}

// "orthogonal", "redraw" and "deterministic_eval" say how a random map's omega was drawn in
// training, which does not change what a stored omega computes: taken, not used.
constexpr const char *kDrawingKeys[] = {"orthogonal", "redraw", "deterministic_eval"};

bool takes(const FeatureMapTraits &row, const std::string &key) {
  for (const char *p : row.parameters)
    if (p && key == p)
      return true;
  return false;
}

std::string feature_map_names() {
  std::string all;
  for (const FeatureMapTraits &r : kFeatureMaps)
    all += std::string(all.empty() ? "" : ", ") + r.name;
  return all;
}

// The row of feature_map's "kind".
const FeatureMapTraits &row_of_kind(const std::string &where, const json &j) {
  if (!j.is_object() || !j.contains("kind") || !j["kind"].is_string())
    throw Error(where + " must be an object with a \"kind\" (" + feature_map_names() + ")");
  const std::string kind = j["kind"].get<std::string>();
  for (const FeatureMapTraits &r : kFeatureMaps)
    if (kind == r.name)
      return r;
  throw Error(where + " \"" + short_text(kind) + "\" is not supported (" + feature_map_names() +
              ")");
}

// Every key of feature_map is its kind, one of the row's parameters or, for a random map, a
// drawing key.
void check_feature_map_keys(const std::string &where, const json &j, const FeatureMapTraits &row) {
  for (const auto &item : j.items()) {
    const std::string &key = item.key();
    const bool known =
        key == "kind" || takes(row, key) ||
        (!row.elementwise &&
         std::find_if(std::begin(kDrawingKeys), std::end(kDrawingKeys),
                      [&](const char *p) { return key == p; }) != std::end(kDrawingKeys));
    if (!known)
      throw Error(where + " \"" + row.name + "\" takes no \"" + short_text(key) + "\"");
  }
}

// A random map's parameters into fm, the library's defaults where j has none.
void parse_random_parameters(const std::string &where, const json &j, int d_head, FeatureMap &fm) {
  auto number = [&](const char *key, double fallback, double lo, double hi) {
    if (!j.contains(key))
      return fallback;
    const json &v = j[key];
    if (!v.is_number() || !(v.get<double>() >= lo && v.get<double>() <= hi))
      throw Error(where + " \"" + key + "\" must be a number in [" + short_text(json(lo).dump()) +
                  ", " + short_text(json(hi).dump()) + "] (got " + short_text(v.dump()) + ")");
    return v.get<double>();
  };
  if (j.contains("n_dims") && !j["n_dims"].is_number_integer())
    throw Error(where + " \"n_dims\" must be a whole number (got " +
                short_text(j["n_dims"].dump()) + ")");
  const FeatureMapTraits &t = feature_map_traits(fm.kind);
  fm.n_dims = int(number("n_dims", d_head, t.min_n_dims, 4096));
  // the library's defaults: 1/sqrt(d_head), but 1 for GeneralizedRandomFeatures
  fm.softmax_temp = number("softmax_temp", t.unit_temp ? 1.0 : 1 / std::sqrt(d_head), 1e-30, 1e6);
  if (!(fm.softmax_temp > 0))
    throw Error(where + " \"softmax_temp\" must be positive");
  fm.smoothing = number("smoothing", 1.0, 0, 1e6);
  if (j.contains("stabilize") && j["stabilize"] != false)
    throw Error(where + " \"favor\" with \"stabilize\": " + short_text(j["stabilize"].dump()) +
                " is not supported: it subtracts a maximum over the whole sequence, which a model "
                "run position by position cannot know (train with stabilize=False)");
  if (j.contains("kernel_fn")) {
    const json &f = j["kernel_fn"];
    if (f == "relu")
      fm.kernel_fn = FeatureMapKind::Relu;
    else if (f == "elu+1")
      fm.kernel_fn = FeatureMapKind::EluPlusOne;
    else
      throw Error(where + " \"kernel_fn\" " + short_text(f.dump()) +
                  " is not supported (relu or elu+1)");
  }
}

// config.json's "feature_map": {"kind": ..., parameters}, the library's defaults filled in.
FeatureMap parse_feature_map(const std::string &path, const json &j, int d_head) {
  const std::string where = path + ": feature_map";
  const FeatureMapTraits &row = row_of_kind(where, j);
  check_feature_map_keys(where, j, row);
  FeatureMap fm;
  fm.kind = row.kind;
  if (!fm.elementwise())
    parse_random_parameters(where, j, d_head, fm);
  return fm;
}

json feature_map_json(const FeatureMap &fm) {
  json j = {{"kind", feature_map_name(fm.kind)}};
  if (fm.elementwise())
    return j;
  j["n_dims"] = fm.n_dims;
  j["softmax_temp"] = fm.softmax_temp;
  const FeatureMapTraits &t = feature_map_traits(fm.kind);
  if (takes(t, "smoothing"))
    j["smoothing"] = fm.smoothing;
  if (takes(t, "kernel_fn"))
    j["kernel_fn"] = feature_map_name(fm.kernel_fn);
  return j;
}

} // namespace

const char *feature_map_name(FeatureMapKind k) { return feature_map_traits(k).name; }

namespace {

// config.json's "attention" as the enum (the string is read here only).
Attention parse_attention(const std::string &path, const std::string &s) {
  for (Attention a : {Attention::Linear, Attention::Softmax})
    if (s == attention_name(a))
      return a;
  throw Error(path + ": attention \"" + short_text(s) + "\" is not supported (linear or softmax)");
}

} // namespace

Config Config::mnist() { return Config{}; }

Config Config::cifar10() {
  Config c;
  c.height = c.width = 32;
  c.channels = 3;
  c.n_layers = 16;
  return c;
}

const char *act_name(Act a) {
  switch (a) {
  case Act::None:
    return "none";
  case Act::Relu:
    return "relu";
  case Act::Gelu:
    return "gelu";
  }
  return "?";
}

int64_t Config::parameter_count() const {
  const int64_t d = d_model, a = d_attn(), f = d_ff;
  const int64_t layer = 3 * (a * d + a) + (d * a + d) + (f * d + f) + (d * f + d) + 4 * d;
  return 256 * int64_t(half()) + int64_t(positions()) * half() + n_layers * layer + 2 * d +
         int64_t(d_out()) * d + d_out();
}

void Config::validate(const std::string &where) const {
  auto check = [&](bool ok, const std::string &msg) {
    if (!ok)
      throw Error(where + ": " + msg);
  };
  check(format_version == 1, "format_version " + std::to_string(format_version) +
                                 " is not supported (this build reads version 1)");
  // Bounds keep a hostile config from asking for absurd allocations; they are far above any
  // model this engine is for (CIFAR-10 is 32x32x3, d_model 256).
  auto in = [&](int v, int lo, int hi, const char *name) {
    check(v >= lo && v <= hi, std::string(name) + " = " + std::to_string(v) + " is out of range [" +
                                  std::to_string(lo) + ", " + std::to_string(hi) + "]");
  };
  in(height, 1, 4096, "height");
  in(width, 1, 4096, "width");
  in(channels, 1, 4, "channels");
  check(int64_t(height) * width * channels >= 2 && int64_t(height) * width * channels <= (1 << 20),
        "height * width * channels must be in [2, 1048576]");
  in(n_layers, 1, 256, "n_layers");
  in(n_heads, 1, 256, "n_heads");
  in(d_head, 1, 256, "d_head");
  in(d_model, 2, 16384, "d_model");
  check(d_model % 2 == 0, "d_model must be even (half value embedding, half position)");
  in(d_ff, 1, 65536, "d_ff");
  in(mixtures, 1, 64, "mixtures");
  check(activation == Act::Relu || activation == Act::Gelu, "activation must be relu or gelu");
}

Config Config::from_json_file(const std::string &path) {
  std::vector<uint8_t> raw;
  try {
    raw = read_file(path);
  } catch (const Error &e) {
    throw Error(std::string(e.what()) + " (does the model folder exist?)", e.kind());
  }
  if (raw.size() > kMaxConfigBytes)
    throw Error(path + ": " + std::to_string(raw.size()) + " bytes, over the " +
                std::to_string(kMaxConfigBytes) + " a config.json may have");
  const char *text = reinterpret_cast<const char *>(raw.data());
  const json j = parse_json(path, text, raw.size(), 4);
  if (j.is_discarded() || !j.is_object())
    throw Error(path + ": not a JSON object");
  check_keys(path, j);
  Config c;
  auto get_int = [&](const char *key, int &dst) {
    if (!j.contains(key))
      throw Error(path + ": missing \"" + key + "\"");
    if (!j[key].is_number_integer())
      throw Error(path + ": \"" + key + "\" must be an integer");
    const int64_t v = j[key].get<int64_t>();
    if (v < -(int64_t(1) << 30) || v > (int64_t(1) << 30))
      throw Error(path + ": \"" + key + "\" = " + std::to_string(v) + " is out of range");
    dst = int(v);
  };
  auto get_str = [&](const char *key) {
    if (!j.contains(key) || !j[key].is_string())
      throw Error(path + ": missing string \"" + key + "\"");
    return j[key].get<std::string>();
  };
  get_int("format_version", c.format_version);
  get_int("height", c.height);
  get_int("width", c.width);
  get_int("channels", c.channels);
  get_int("n_layers", c.n_layers);
  get_int("n_heads", c.n_heads);
  get_int("d_head", c.d_head);
  get_int("d_model", c.d_model);
  get_int("d_ff", c.d_ff);
  get_int("mixtures", c.mixtures);
  const std::string act = get_str("activation");
  if (act != "relu" && act != "gelu")
    throw Error(path + ": activation \"" + short_text(act) + "\" is not supported (relu or gelu)");
  c.activation = act == "relu" ? Act::Relu : Act::Gelu;
  c.attention = parse_attention(path, get_str("attention"));
  c.validate(path);
  if (j.contains("feature_map")) {
    if (c.attention != Attention::Linear)
      throw Error(path + ": a " + attention_name(c.attention) +
                  " model has no feature_map (it is linear attention's phi)");
    c.feature_map = parse_feature_map(path, j["feature_map"], c.d_head);
  }
  return c;
}

std::string Config::to_json() const {
  json j = {{"format_version", format_version},
            {"height", height},
            {"width", width},
            {"channels", channels},
            {"n_layers", n_layers},
            {"n_heads", n_heads},
            {"d_head", d_head},
            {"d_model", d_model},
            {"d_ff", d_ff},
            {"activation", act_name(activation)},
            {"mixtures", mixtures},
            {"attention", attention_name(attention)}};
  if (attention == Attention::Linear)
    j["feature_map"] = feature_map_json(feature_map);
  return j.dump(2);
}

} // namespace tarnn
