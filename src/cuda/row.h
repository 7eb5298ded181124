// The CUDA backend's row in the registry (engine/registry.h): compiled into the library, so that
// what the device runs is known without loading its plugin (libtarnn_cuda.so), which makes it.
#pragma once

#include "../model/backend.h"

namespace tarnn {

const BackendRow &cuda_row();

} // namespace tarnn
