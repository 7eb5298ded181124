// One position at a time for a fixed set of rows on host memory, with any host Ops (CpuOps, the
// softmax baselines' KvOps, the CUDA twin): what the benchmark times and the parity tests feed.
// The rollout (model/rollout.h) is what runs jobs; this is its single step, exposed.
#pragma once

#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "forward.h"
#include "tarnn/error.h"

namespace tarnn {

template <class Ops> class Decoder {
public:
  // `rows` rows, each with a state in `state` (none: nullopt, a softmax baseline); Ops is made as
  // Ops(c, w, buffers, extra...).
  template <class... Extra>
  Decoder(const Config &c, const ModelView &w, int rows, std::optional<StateFormat> state,
          Extra &&...extra)
      : c_(c), w_(w),
        layout_(batch_layout(c, rows, state.value_or(StateFormat::Fp32), state ? rows : 0)),
        memory_(layout_.total / sizeof(double) + 1), b_(step_buffers(memory_.data(), layout_)),
        ops_(c, w, b_, std::forward<Extra>(extra)...) {}
  Decoder(const Decoder &) = delete;
  Decoder &operator=(const Decoder &) = delete;

  // Feeds p_t of each row at position t and writes the mixture parameters of p_{t+1} to o
  // ([rows, 3K]).
  void step(int t, const uint8_t *bytes, float *o) {
    if (t < 0 || t >= c_.positions()) // before the embedding reads P[t]
      throw Error("position " + std::to_string(t) + " is outside [0, " +
                  std::to_string(c_.positions()) + ")");
    std::memcpy(b_.cur, bytes, size_t(b_.rows));
    b_.params->t = t;
    forward(ops_, c_, w_, b_.rows);
    std::memcpy(o, b_.o, size_t(b_.rows) * c_.d_out() * 4);
  }
  // The forward pass over the first `rows` rows of what is in buffers() (cur, params->t).
  void forward_rows(int rows) { forward(ops_, c_, w_, rows); }
  void reset_state() { std::memset(b_.state, 0, layout_.state_bytes); }
  int rows() const { return b_.rows; }
  int64_t state_bytes() const { return int64_t(layout_.state_bytes); }
  const StepBuffers &buffers() const { return b_; }
  Ops &ops() { return ops_; }

private:
  const Config &c_;
  const ModelView &w_;
  BatchLayout layout_;
  std::vector<double> memory_; // 8-byte aligned, zeroed
  StepBuffers b_;
  Ops ops_;
};

} // namespace tarnn
