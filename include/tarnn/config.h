// The model's shape, read from config.json (docs/SPEC.md section 4). Every size the engine uses
// derives from here.
#pragma once

#include <cstdint>
#include <string>

namespace tarnn {

// The nonlinearity after a linear layer: the feed-forward's (relu or gelu, from config.json), or
// none. One enum for the config, the CPU GEMM's epilogue and the CUDA kernels.
enum class Act : int { None = 0, Relu = 1, Gelu = 2 };

const char *act_name(Act a); // "none", "relu", "gelu"

// phi, linear attention's feature map: the maps of the paper's library (fast-transformers), by
// the kind config.json names (docs/SPEC.md section 1, "Feature maps"). The random-feature ones
// multiply x by a stored matrix omega [d_head, omega_columns()], one per layer for all its heads.
enum class FeatureMapKind : int {
  EluPlusOne,            // elu(x) + 1, the paper's (elu_feature_map)
  Relu,                  // max(x, 0) (ActivationFunctionFeatureMap(torch.relu))
  RandomFourier,         // sqrt(2/n) [cos u | sin u], u = sqrt(T) x omega (RandomFourierFeatures)
  SmoothedRandomFourier, // the same with m = n - 1, and a constant feature s last
  Favor,                 // [exp(u - c) | exp(-u - c)], c = |sqrt(T) x|^2 / 2 + ln(n) / 2
  GeneralizedRandom,     // f(u), f relu or elu + 1 (GeneralizedRandomFeatures)
};

// What a feature map is, beside its arithmetic (kernels/feature_map.h, Phi<K>): its name and
// config.json's keys, and the shape of phi. A random-feature map of n_dims has omega_columns =
// (n_dims - constants) / per_column columns and F = per_column * omega_columns + constants
// features; an elementwise one acts on each element of x alone (F = d_head, no omega).
struct FeatureMapTraits {
  FeatureMapKind kind;
  const char *name;          // config.json's "kind"
  const char *parameters[4]; // config.json's keys for it beside "kind" (nullptr: no more)
  bool elementwise;          // F = d_head, no omega: the keys above are none
  int per_column;            // features per column of omega (cos | sin: 2)
  int constants;             // constant features after them (smoothed_random_fourier's s)
  int min_n_dims;            // the smallest n_dims config.json may give
  bool unit_temp;            // softmax_temp's default is 1 (else the library's 1/sqrt(d_head))
};

// One row per FeatureMapKind, in its order (a kind without a row stops the build: Kind<K>,
// kernels/feature_map.h). The maps of fast-transformers, parameters as its classes take them.
// clang-format off
inline constexpr FeatureMapTraits kFeatureMaps[] = {
  // kind, name,
  //  parameters,                          elementwise, per_column, constants, min_n_dims, unit_temp
  {FeatureMapKind::EluPlusOne, "elu+1",
   {},                                      true,  0, 0, 0, false},
  {FeatureMapKind::Relu, "relu",
   {},                                      true,  0, 0, 0, false},
  {FeatureMapKind::RandomFourier, "random_fourier",
   {"n_dims", "softmax_temp"},              false, 2, 0, 2, false},
  {FeatureMapKind::SmoothedRandomFourier, "smoothed_random_fourier",
   {"n_dims", "softmax_temp", "smoothing"}, false, 2, 1, 3, false},
  {FeatureMapKind::Favor, "favor",
   {"n_dims", "softmax_temp", "stabilize"}, false, 2, 0, 2, false},
  {FeatureMapKind::GeneralizedRandom, "generalized_random",
   {"n_dims", "softmax_temp", "kernel_fn"}, false, 1, 0, 2, true},
};
// clang-format on
inline constexpr int kFeatureMapKinds = int(sizeof(kFeatureMaps) / sizeof(kFeatureMaps[0]));

constexpr bool feature_map_rows_in_order() {
  for (int i = 0; i < kFeatureMapKinds; ++i)
    if (int(kFeatureMaps[i].kind) != i)
      return false;
  return true;
}
static_assert(feature_map_rows_in_order(), "kFeatureMaps: one row per kind, in the enum's order");

// The row of kind k (constexpr: the kernels compile each kind's code by it).
constexpr const FeatureMapTraits &feature_map_traits(FeatureMapKind k) {
  return kFeatureMaps[int(k)];
}

const char *feature_map_name(FeatureMapKind k); // "elu+1", "relu", "random_fourier", ...

// How the model attends (config.json "attention"): linear attention, which keeps a state S and z
// of constant size (the paper's RNN), or softmax attention, which keeps the keys and values of
// every earlier position (a KV cache: the paper's baseline).
enum class Attention : int { Linear, Softmax };

// "linear", "softmax": config.json's names. Inline: the CUDA plugin names a model's attention and
// links nothing of the library.
inline const char *attention_name(Attention a) {
  switch (a) {
  case Attention::Linear:
    return "linear";
  case Attention::Softmax:
    return "softmax";
  }
  return "?";
}

// Whether phi of kind k acts on each element of x alone (F = d_head, no omega).
constexpr bool is_elementwise(FeatureMapKind k) { return feature_map_traits(k).elementwise; }

struct FeatureMap {
  FeatureMapKind kind = FeatureMapKind::EluPlusOne;
  int n_dims = 0;            // the library's n_dims (random-feature maps); 0 for elementwise ones
  double softmax_temp = 1.0; // x is scaled by sqrt(softmax_temp) before omega
  double smoothing = 1.0;    // smoothed_random_fourier's constant last feature
  FeatureMapKind kernel_fn = FeatureMapKind::Relu; // generalized_random's f: Relu or EluPlusOne

  bool elementwise() const { return is_elementwise(kind); }
  // The columns of omega as the library sizes it (0: none is stored). Inline, as features(): the
  // CUDA plugin computes with them and links nothing of the library.
  int omega_columns() const {
    const FeatureMapTraits &t = feature_map_traits(kind);
    return t.elementwise ? 0 : (n_dims - t.constants) / t.per_column;
  }
  // F, the width of phi(x): S is F x d_head and z is F wide.
  int features(int d_head) const {
    const FeatureMapTraits &t = feature_map_traits(kind);
    return t.elementwise ? d_head : t.per_column * omega_columns() + t.constants;
  }
  bool operator==(const FeatureMap &o) const {
    return kind == o.kind && n_dims == o.n_dims && softmax_temp == o.softmax_temp &&
           smoothing == o.smoothing && kernel_fn == o.kernel_fn;
  }
};

struct Config {
  int format_version = 1;
  int height = 28, width = 28, channels = 1;
  int n_layers = 8, n_heads = 8, d_head = 32, d_model = 256, d_ff = 1024;
  Act activation = Act::Relu;
  int mixtures = 10;
  Attention attention = Attention::Linear;
  FeatureMap feature_map; // linear attention's phi (absent from config.json: elu + 1)

  int bytes_per_image() const { return height * width * channels; } // T
  int positions() const { return bytes_per_image() - 1; }           // L
  int half() const { return d_model / 2; }                          // embedding and P width
  int d_attn() const { return n_heads * d_head; }                   // width of q, k, v
  int d_out() const { return 3 * mixtures; }                        // logits | means | scales
  int features() const { return feature_map.features(d_head); }     // F: phi's width
  // S (F x d_head) and z (F) per layer and head: constant in the position. Their bytes depend
  // on the state's format: numerics.h, state_bytes_per_image.
  int64_t state_elements_per_image() const {
    return int64_t(n_layers) * n_heads * (int64_t(features()) * d_head + features());
  }
  int64_t parameter_count() const; // the stored positional table included, as the paper counts

  static Config mnist();                                 // the paper's MNIST model
  static Config cifar10();                               // the paper's CIFAR-10 model
  static Config from_json_file(const std::string &path); // throws Error naming path and field
  std::string to_json() const;
  void validate(const std::string &where) const;
};

} // namespace tarnn
