// The CUDA backend's CPU twin: model/forward.h and model/rollout.h run with each kernel's CPU twin
// (kernels/*.h) on host memory laid out as on the device, and cuBLAS's place taken by the plain
// fused multiply-add GEMM (kernels/gemm_ref.h), the bias added after it by bias_act as on the GPU.
// It must reproduce the CPU backend to the bit, which the CPU tests check on machines without a
// GPU; test_cuda checks each kernel against its twin where there is one. With bf16 the products
// are the bf16 chain on inputs rounded by bf16_bits (round_bf16 and cuBLASLt's place); with int8,
// quantize_rows_int8's twin, the int32 sums (exact: cuBLASLt's any order) and finish_int8's twin.
#pragma once

#include <algorithm>
#include <vector>

#include "../../kernels/bias_act.h"
#include "../../kernels/chunked_attention.h"
#include "../../kernels/gemm_ref.h"
#include "../../kernels/int8_rows.h"
#include "../../kernels/linear_attention.h"
#include "../model/host_ops.h"
#include "../model/rollout.h"
#include "plan.h"
#include "tarnn/error.h"

namespace tarnn {

// cuBLAS(Lt)'s place: the bare product, then bias_act as its own kernel would (the epilogue
// cuBLASLt fuses rounds the same way).
struct TwinKernels : PlainNorm {
  void linear(const LinearWeights &l, const float *x, float *y, int rows, Act act) const {
    switch (l.precision) {
    case Precision::Fp32:
      linear_forward_ref(l.w_ref, nullptr, l.out, l.in, x, l.in, rows, y, l.out, Act::None);
      break;
    case Precision::Bf16: // launch_round_bf16 then cuBLASLt: the reference rounds x, W and b
                          // alike (the backend's bias rounded at load), then act(acc + b) as ever
      linear_forward_bf16_ref(l.w_ref, l.b, l.out, l.in, x, l.in, rows, y, l.out, act);
      if (l.bf16_output) // cuBLASLt's bf16 output (Gemm::Output::Bf16)
        round_to_bf16(y, size_t(rows) * size_t(l.out));
      return;
    case Precision::Tf32: // TF32's products round inside the tensor cores: no twin to the bit
      throw Error("the CUDA twin has no tf32 GEMM");
    case Precision::Int8:
      linear_int8(l, x, y, rows, act);
      return;
    }
    bias_act_cpu(y, l.b, rows, l.out, act);
  }

  // launch_quantize_rows_int8, cuBLASLt's int32 sums into y, launch_finish_int8 in place; W
  // quantized here as DeviceWeights does at load.
  static void linear_int8(const LinearWeights &l, const float *x, float *y, int rows, Act act) {
    std::vector<int8_t> qx(size_t(rows) * l.in), qw(size_t(l.out) * l.in);
    std::vector<float> sx(static_cast<size_t>(rows)), sw(static_cast<size_t>(l.out));
    quantize_rows_int8_cpu(x, rows, l.in, l.in, qx.data(), sx.data()); // unpadded: no cuBLASLt
    quantize_rows_int8_cpu(l.w_ref, l.out, l.in, l.in, qw.data(), sw.data());
    int32_t *acc = reinterpret_cast<int32_t *>(y);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < l.out; ++j) {
        int32_t sum = 0;
        for (int k = 0; k < l.in; ++k)
          sum += int32_t(qx[size_t(r) * l.in + k]) * int32_t(qw[size_t(j) * l.in + k]);
        acc[size_t(r) * l.out + j] = sum;
      }
    finish_int8_cpu(acc, l.out, sx.data(), sw.data(), l.b, rows, l.out, act, y);
  }
};

class TwinOps : public HostOps<TwinOps, TwinKernels> {
public:
  // positions: the prefill's ops (launch_embedding and launch_linear_attention with positions)
  TwinOps(const Config &c, const ModelView &w, const StepBuffers &b, bool positions = false)
      : HostOps(c, w, b), positions_(positions) {}
  // as GpuOps: a chunk of few distinct runs prefilled, else stepped
  bool worth_prefilling(int distinct, int) const { return distinct <= kCudaPrefillRuns; }
  void embed(const ModelView &w, int rows) {
    embedding_cpu(b_.x, w.value_embedding, w.pos, b_.cur, b_.params, rows, c_.d_model, positions_);
  }
  void attention(int layer, int rows) {
    if (b_.state_chunk > 1) { // the chunked kernels' twin
      chunked_attention_cpu(b_.qkv, b_.state, b_.att, rows, layer, c_.n_layers, c_.n_heads,
                            phi_map(c_, w_.layers[size_t(layer)].omega), b_.state_format,
                            b_.params->t, positions_, b_.state_chunk);
      return;
    }
    linear_attention_cpu(b_.qkv, b_.state, b_.att, rows, layer, c_.n_layers, c_.n_heads,
                         phi_map(c_, w_.layers[size_t(layer)].omega), b_.state_format, b_.params->t,
                         positions_);
  }

private:
  bool positions_;
};

// The CUDA backend's rollout on the CPU, `batch` images at a time; with `prefill`, the known
// leading bytes through the prefill's ops (kPrefillRows at a time, as the backend's).
inline void run_twin(const Model &m, const Rollout &job, int batch, Precision precision,
                     bool prefill = false, StateFormat state = StateFormat::Fp32,
                     Bf16Outputs outputs = Bf16Outputs::Qkv) {
  const Config &c = m.config;
  const BatchLayout layout =
      batch_layout(c, std::min<int64_t>(batch, std::max<int64_t>(job.count, 1)), state);
  std::vector<double> mem(layout.total / sizeof(double) + 1); // 8-byte aligned, like the device's
  const StepBuffers b = step_buffers(mem.data(), layout);
  ModelView w = make_view(
      m.weights, [](const std::vector<float> &v) { return v.data(); },
      [&m, precision](const Linear &l) {
        const Precision p = &l == &m.weights.predictor ? head_precision(precision) : precision;
        return LinearWeights{p, l.out, l.in, l.w.data(), l.b.data(), l.w.data()};
      });
  mark_bf16_outputs(w, c, outputs);
  TwinOps ops(c, w, b);
  const BatchLayout pre_layout = batch_layout(c, std::min(kPrefillRows, c.positions()), state, 1);
  std::vector<double> pre_mem(prefill ? pre_layout.total / sizeof(double) + 1 : 0);
  const StepBuffers pre_b = prefill ? step_buffers(pre_mem.data(), pre_layout) : StepBuffers{};
  TwinOps pre(c, w, pre_b, true);
  rollout(ops, c, job, nullptr, 1, prefill ? &pre : nullptr);
}

} // namespace tarnn
