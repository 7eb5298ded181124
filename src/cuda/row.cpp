#include "row.h"

#include "plan.h"

namespace tarnn {

const BackendRow &cuda_row() {
  static const BackendRow row{
      "cuda",
      "an NVIDIA GPU",
      kCudaPrecisions,
      {},
      kCudaStates,
      {AttentionForm::Linear},
      0,
      "as many as fit",
      false,
      // "graph": "off" for plain launches (default "on": each step a CUDA graph); "gemm": cublas
      // or unfused (cuda_backend.cu: CudaGemm); "bf16_inputs": rounded (CudaBf16Inputs);
      // "layernorm": passes (CudaLayerNorm); "bf16_outputs": fp32 (forward.h: Bf16Outputs);
      // "feed_forward": fused, layer (CudaFeedForward)
      {"graph", "gemm", "bf16_inputs", "layernorm", "bf16_outputs", "feed_forward"},
      nullptr}; // the plugin libtarnn_cuda.so makes it
  return row;
}

} // namespace tarnn
