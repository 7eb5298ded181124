// The CUDA backend, loaded from libtarnn_cuda.so (model/plugin_api.h) the first time a job asks
// for --device cuda.
#pragma once

#include <memory>

#include "../model/backend.h"

namespace tarnn {

std::unique_ptr<Backend> make_cuda_backend(const Model &m, const RunOptions &o, const Knobs &k);

} // namespace tarnn
