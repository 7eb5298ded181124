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

struct Config {
  int format_version = 1;
  int height = 28, width = 28, channels = 1;
  int n_layers = 8, n_heads = 8, d_head = 32, d_model = 256, d_ff = 1024;
  Act activation = Act::Relu;
  int mixtures = 10;
  std::string attention = "linear";

  int bytes_per_image() const { return height * width * channels; } // T
  int positions() const { return bytes_per_image() - 1; }           // L
  int half() const { return d_model / 2; }                          // embedding and P width
  int d_attn() const { return n_heads * d_head; }                   // width of q, k, v
  int d_out() const { return 3 * mixtures; }                        // logits | means | scales
  // S (d_head^2) and z (d_head) per layer and head: constant in the position. Their bytes depend
  // on the state's format: numerics.h, state_bytes_per_image.
  int64_t state_elements_per_image() const {
    return int64_t(n_layers) * n_heads * (int64_t(d_head) * d_head + d_head);
  }
  int64_t parameter_count() const; // the stored positional table included, as the paper counts

  static Config mnist();                                 // the paper's MNIST model
  static Config cifar10();                               // the paper's CIFAR-10 model
  static Config from_json_file(const std::string &path); // throws Error naming path and field
  std::string to_json() const;
  void validate(const std::string &where) const;
};

} // namespace tarnn
