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

// Whether phi of kind k acts on each element of x alone (F = d_head, no omega): the one place
// that says which maps are elementwise (constexpr: the kernels compile each kind's code by it).
constexpr bool is_elementwise(FeatureMapKind k) {
  switch (k) {
  case FeatureMapKind::EluPlusOne:
  case FeatureMapKind::Relu:
    return true;
  case FeatureMapKind::RandomFourier:
  case FeatureMapKind::SmoothedRandomFourier:
  case FeatureMapKind::Favor:
  case FeatureMapKind::GeneralizedRandom:
    return false;
  }
  return false; // (every kind is a case above)
}

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
    switch (kind) {
    case FeatureMapKind::EluPlusOne:
    case FeatureMapKind::Relu:
      return 0;
    case FeatureMapKind::RandomFourier:
    case FeatureMapKind::Favor:
      return n_dims / 2;
    case FeatureMapKind::SmoothedRandomFourier:
      return (n_dims - 1) / 2;
    case FeatureMapKind::GeneralizedRandom:
      return n_dims;
    }
    return 0;
  }
  // F, the width of phi(x): S is F x d_head and z is F wide.
  int features(int d_head) const {
    switch (kind) {
    case FeatureMapKind::EluPlusOne:
    case FeatureMapKind::Relu:
      return d_head;
    case FeatureMapKind::RandomFourier:
    case FeatureMapKind::Favor:
      return 2 * omega_columns();
    case FeatureMapKind::SmoothedRandomFourier:
      return 2 * omega_columns() + 1;
    case FeatureMapKind::GeneralizedRandom:
      return omega_columns();
    }
    return d_head;
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
