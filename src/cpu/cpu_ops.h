// The CPU backend's ops (core/forward.h): the packed GEMM (or its plain reference) and linear
// attention stepping each image's S and z in place.
#pragma once

#include <deque>

#include "gemm.h"
#include "gemm_bf16.h"
#include "host_ops.h"

namespace tarnn {

// A linear layer as the CPU sees it: packed panels for the fast path (fp32, or bf16 where `bf16`
// is set), PyTorch's layout for the reference path.
struct CpuLinear {
  const PackedLinear *packed;
  const PackedLinearBf16 *bf16; // null: fp32
  const float *w, *b;
  int out, in;
};

// The model's weights in the CPU's layout, packed once (as bf16 with `bf16`: converted at load).
// Holds pointers into `m`.
class CpuWeights {
public:
  explicit CpuWeights(const Model &m, bool bf16 = false);
  CpuWeights(const CpuWeights &) = delete;
  CpuWeights &operator=(const CpuWeights &) = delete;
  const ModelView<CpuLinear> &view() const { return view_; }

private:
  std::deque<PackedLinear> packed_; // a deque: growing it never moves what the view points to
  std::deque<PackedLinearBf16> packed_bf16_;
  ModelView<CpuLinear> view_;
};

// One layer's attention for `rows` images: for each image and head, S += phi(k) v^T,
// z += phi(k), att = phi(q)^T S / (phi(q)^T z + eps) (tarnn_math.h: linear_attention_step).
// The AVX-512 or AVX2 build of the loop where the CPU has it; the same bits either way.
void linear_attention_rows(const float *qkv, float *state, float *att, int rows, int layer,
                           const Config &c);

// The GEMMs the CPU runs: the packed kernel, or with `reference` the plain loop.
template <class Derived> class CpuLinearOps : public HostOps<Derived, CpuLinear> {
public:
  CpuLinearOps(const Config &c, const ModelView<CpuLinear> &w, const StepBuffers &b, bool reference)
      : HostOps<Derived, CpuLinear>(c, w, b), reference_(reference) {}

  void linear(const CpuLinear &l, const float *x, float *y, int rows, Act act) {
    if (reference_ && l.bf16)
      linear_forward_bf16_ref(l.w, l.b, l.out, l.in, x, l.in, rows, y, l.out, act);
    else if (reference_)
      linear_forward_ref(l.w, l.b, l.out, l.in, x, l.in, rows, y, l.out, act);
    else if (l.bf16)
      linear_forward_bf16(*l.bf16, x, l.in, rows, y, l.out, act);
    else
      linear_forward(*l.packed, x, l.in, rows, y, l.out, act);
  }

private:
  bool reference_;
};

class CpuOps : public CpuLinearOps<CpuOps> {
public:
  using CpuLinearOps<CpuOps>::CpuLinearOps;
  void attention(int layer, int rows) {
    linear_attention_rows(b_.qkv, b_.state, b_.att, rows, layer, c_);
  }
};

// The same recurrence with rows that are consecutive positions of one image (core/prefill.h): the
// attention walks the rows in order through the one state of buffers(), so each row's result is
// the step's at that position, bit for bit.
// Heads [h0, h1) only: the heads are independent, so a team may split them.
void linear_attention_positions(const float *qkv, float *state, float *att, int rows, int layer,
                                const Config &c, int h0, int h1);

class WorkerTeam;

class PrefillOps : public CpuLinearOps<PrefillOps> {
public:
  // `team` (may be null): the GEMMs' and LayerNorms' rows and the attention's heads split over its
  // threads (a job of fewer images than the engine's threads leaves them free); rows and heads do
  // not depend on each other: the same bits.
  PrefillOps(const Config &c, const ModelView<CpuLinear> &w, const StepBuffers &b, bool reference,
             WorkerTeam *team = nullptr)
      : CpuLinearOps<PrefillOps>(c, w, b, reference), team_(team) {}
  void linear(const CpuLinear &l, const float *x, float *y, int rows, Act act);
  void embed(const ModelView<CpuLinear> &w, int rows) { embed_positions(w, rows); }
  void attention(int layer, int rows);
  void add_norm(float *x, const float *y, NormView n, int rows);

private:
  // f(first, last) over [0, items) in one slice per thread, at least `least` items a slice
  template <class F> void split(int items, int least, F &&f);
  WorkerTeam *team_;
};

} // namespace tarnn
