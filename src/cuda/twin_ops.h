// The CUDA backend's CPU twin: core/forward.h and core/rollout.h run with each kernel's CPU twin
// (kernels/*.h) on host memory laid out as on the device, and cuBLAS's place taken by the plain
// fused multiply-add GEMM, the bias added after it by bias_act as on the GPU. It must reproduce
// the CPU backend to the bit, which the CPU tests check on machines without a GPU; test_cuda
// checks each kernel against its twin where there is one. With bf16 the products are the CPU's
// bf16 chain on inputs rounded by bf16_bits (round_bf16 and cuBLASLt's place).
#pragma once

#include <algorithm>
#include <vector>

#include "../../kernels/bias_act.h"
#include "../../kernels/linear_attention.h"
#include "../core/rollout.h"
#include "../cpu/gemm.h"
#include "../cpu/gemm_bf16.h"
#include "../cpu/host_ops.h"

namespace tarnn {

struct TwinLinear {
  const float *w, *b;
  int out, in;
  bool bf16;
};

class TwinOps : public HostOps<TwinOps, TwinLinear> {
public:
  // positions: the prefill's ops (launch_embedding and launch_linear_attention with positions)
  TwinOps(const Config &c, const ModelView<TwinLinear> &w, const StepBuffers &b,
          bool positions = false)
      : HostOps(c, w, b), positions_(positions) {}
  void embed(const ModelView<TwinLinear> &w, int rows) {
    embedding_cpu(b_.x, w.value_embedding, w.pos, b_.cur, b_.params, rows, c_.d_model, positions_);
  }
  void linear(const TwinLinear &l, const float *x, float *y, int rows, Act act) {
    if (l.bf16) { // launch_round_bf16 then cuBLASLt: the reference rounds x and W by bf16_bits too
      linear_forward_bf16_ref(l.w, nullptr, l.out, l.in, x, l.in, rows, y, l.out, Act::None);
    } else {
      linear_forward_ref(l.w, nullptr, l.out, l.in, x, l.in, rows, y, l.out, Act::None); // cuBLAS
    }
    bias_act_cpu(y, l.b, rows, l.out, act);
  }
  void attention(int layer, int rows) {
    linear_attention_cpu(b_.qkv, b_.state, b_.att, rows, layer, c_.n_layers, c_.n_heads, c_.d_head,
                         positions_);
  }

private:
  bool positions_;
};

// The CUDA backend's rollout on the CPU, `batch` images at a time; with `prefill`, the known
// leading bytes through the prefill's ops (kPrefillRows at a time, as the backend's).
inline void run_twin(const Model &m, const Rollout &job, int batch, bool bf16 = false,
                     bool prefill = false) {
  const Config &c = m.config;
  const BatchLayout layout =
      batch_layout(c, std::min<int64_t>(batch, std::max<int64_t>(job.count, 1)));
  std::vector<double> mem(layout.total / sizeof(double) + 1); // 8-byte aligned, like the device's
  const StepBuffers b = step_buffers(mem.data(), layout);
  const ModelView<TwinLinear> w = make_view<TwinLinear>(
      m.weights, [](const std::vector<float> &v) { return v.data(); },
      [bf16](const Linear &l) {
        return TwinLinear{l.w.data(), l.b.data(), l.out, l.in, bf16};
      });
  TwinOps ops(c, w, b);
  const BatchLayout pre_layout = batch_layout(c, std::min(kPrefillRows, c.positions()), 1);
  std::vector<double> pre_mem(prefill ? pre_layout.total / sizeof(double) + 1 : 0);
  const StepBuffers pre_b = prefill ? step_buffers(pre_mem.data(), pre_layout) : StepBuffers{};
  TwinOps pre(c, w, pre_b, true);
  rollout(ops, c, job, nullptr, 1, prefill ? &pre : nullptr);
}

} // namespace tarnn
