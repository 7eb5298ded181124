// The weights struct: every tensor of docs/SPEC.md section 4 as fp32, in PyTorch's layout (linear
// weights [out, in]). Backends derive their own layouts (packed panels, device copies) from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config.h"

namespace tarnn {

struct Linear {
  int out = 0, in = 0;
  std::vector<float> w; // [out, in]
  std::vector<float> b; // [out]
};

struct Norm {
  std::vector<float> w, b;
};

struct LayerWeights {
  Linear qkv; // query, key and value projections stacked: [3 * d_attn, d_model], one GEMM
  Linear out; // out_projection
  Linear ff1, ff2;
  Norm norm1, norm2;
  std::vector<float> omega; // a random-feature map's [d_head, omega_columns], row-major; else empty
};

struct Weights {
  std::vector<float> value_embedding; // [256, d_model/2]
  std::vector<float> pos;             // [L, d_model/2]
  std::vector<LayerWeights> layers;
  Norm final_norm;
  Linear predictor; // [3K, d_model]
};

struct Model {
  Config config;
  Weights weights;
  std::string source; // the folder it came from, for messages
};

// Reads DIR/config.json and DIR/model.safetensors; throws Error saying exactly what is wrong.
Model load_model(const std::string &dir);

// Where the model NAME is: NAME itself (a folder, relative to the working folder or absolute),
// else the installed models (PREFIX/share/tarnn/models, beside the running program and where
// this library was installed), as NAME or as its last part ("models/mnist" -> ".../mnist").
// Error names every place it looked. `roots`: more folders of installed models, looked in first
// (the Python module's PREFIX/share/tarnn/models, beside it as the command's is beside it).
std::string find_model(const std::string &name, const std::vector<std::string> &roots = {});

// A model with reproducible random weights (torch-like init), for benchmarks and tests.
Model random_model(const Config &config, uint64_t seed);

} // namespace tarnn
