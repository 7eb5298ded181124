// The CPU backend's ops (model/forward.h over model/host_ops.h): the packed GEMM (or its plain
// reference) and linear attention stepping each image's S and z in place.
#pragma once

#include <deque>
#include <functional>

#include "../../kernels/feature_map.h"
#include "../model/host_ops.h"
#include "gemm.h"
#include "gemm_bf16.h"
#include "gemm_int8.h"

namespace tarnn {

// The model's weights in the CPU's layout, packed once in `precision` (bf16: converted at load).
// Holds pointers into `m`. outputs: which bf16 layers round their output (forward.h).
class CpuWeights {
public:
  CpuWeights(const Model &m, Precision precision, Bf16Outputs outputs = Bf16Outputs::Qkv)
      : CpuWeights(
            m,
            [&m, precision](const Linear &l) {
              return &l == &m.weights.predictor ? head_precision(precision) : precision;
            },
            outputs) {}
  // Each linear layer in the precision `of` gives it (tools/int8_study.cpp mixes them).
  CpuWeights(const Model &m, const std::function<Precision(const Linear &)> &of,
             Bf16Outputs outputs = Bf16Outputs::Qkv);
  CpuWeights(const CpuWeights &) = delete;
  CpuWeights &operator=(const CpuWeights &) = delete;
  const ModelView &view() const { return view_; }

private:
  const void *packed(const Linear &l, Precision precision); // W in the precision's CPU form
  std::deque<PackedLinear> packed_; // a deque: growing it never moves what the view points to
  std::deque<PackedLinearBf16> packed_bf16_;
  std::deque<PackedLinearInt8> packed_int8_;
  ModelView view_;
};

// The CPU's Kernels (model/host_ops.h): the packed GEMM of the layer's precision, or with
// `reference` the plain one (kernels/gemm_ref.h), the same bits; LayerNorm in the instruction
// set this CPU has (cpu_kernels.cpp), the same bits as the plain one.
struct CpuKernels {
  bool reference = false;
  void linear(const LinearWeights &l, const float *x, float *y, int rows, Act act) const;
  void add_norm(float *x, const float *y, const float *w, const float *b, int rows, int n) const;
};

// One layer's attention for `rows` images: for each image and head, S += phi(k) v^T,
// z += phi(k), att = phi(q)^T S / (phi(q)^T z + eps) (tarnn_math.h: linear_attention_step).
// The AVX-512 or AVX2 build of the loop where the CPU has it; the same bits either way.
// S is stored in format f (kernels/state_format.h), then z; t is the position; m the layer's
// feature map (kernels/feature_map.h); chunk > 1: the state's write deferred over chunks of that
// many positions (linear_attention.h: chunked_attention_update, the plain reference).
void linear_attention_rows(const float *qkv, void *state, StateFormat f, int t, float *att,
                           int rows, int layer, const Config &c, const PhiMap &m, int chunk = 1);

// n elements of S rounded into format f's storage with exponent e (times 2^-e: fp16), and widened
// back to floats (times 2^e): the conversions
// the attention runs around its fp32 update, in the instruction set this CPU has (the same bits
// as kernels/state_format.h's store_state and load_state).
void narrow_state_rows(const float *s, void *S, size_t n, StateFormat f, int e = 0);
void widen_state_rows(const void *S, float *s, size_t n, StateFormat f, int e = 0);

class CpuOps : public HostOps<CpuOps, CpuKernels> {
public:
  using HostOps::HostOps;
  void attention(int layer, int rows) {
    linear_attention_rows(b_.qkv, b_.state, b_.state_format, b_.params->t, b_.att, rows, layer, c_,
                          phi_map(c_, w_.layers[size_t(layer)].omega), b_.state_chunk);
  }
};

// The same recurrence with rows that are consecutive positions of one image (model/prefill.h):
// the attention walks the rows in order through the one state of buffers(), so each row's result
// is the step's at that position, bit for bit.
// Heads [h0, h1) only: the heads are independent, so a team may split them.
void linear_attention_positions(const float *qkv, void *state, StateFormat f, int t, float *att,
                                int rows, int layer, const Config &c, const PhiMap &m, int h0,
                                int h1, int chunk = 1);

class WorkerTeam;

class PrefillOps : public HostOps<PrefillOps, CpuKernels> {
public:
  // `team` (may be null): the GEMMs' and LayerNorms' rows and the attention's heads split over its
  // threads (a job of fewer images than the engine's threads leaves them free); rows and heads do
  // not depend on each other: the same bits.
  PrefillOps(const Config &c, const ModelView &w, const StepBuffers &b, CpuKernels k,
             WorkerTeam *team = nullptr)
      : HostOps(c, w, b, k), team_(team) {}
  void linear(const LinearWeights &l, const float *x, float *y, int rows, Act act);
  void embed(const ModelView &w, int rows) { embed_positions(w, rows); }
  // the CPU's steps run one image a row too: a prefill's rows share every GEMM's weights
  bool worth_prefilling(int, int) const { return true; }
  void attention(int layer, int rows);
  void add_norm(float *x, const float *y, NormView n, int rows, const NormView *then = nullptr);

private:
  // f(first, last) over [0, items) in one slice per thread, at least `least` items a slice
  template <class F> void split(int items, int least, F &&f);
  WorkerTeam *team_;
};

} // namespace tarnn
