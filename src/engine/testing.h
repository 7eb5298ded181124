// For the library's tests and comparisons, not for users: an Engine with Knobs set
// (model/backend.h: the reference GEMM, CUDA graphs off, another cuBLAS path).
#pragma once

#include "../model/backend.h"

namespace tarnn {

Engine engine_with(Model model, const RunOptions &options, const Knobs &knobs);

} // namespace tarnn
