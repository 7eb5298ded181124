// The byte that becomes p_{t+1} of every row: the given byte where it is known (teacher forcing,
// adding its log-likelihood), otherwise a draw from the mixture with the Philox contract of SPEC
// section 3, so image i gets the same random numbers on every backend. One thread per row.
#pragma once

#include <cstddef>
#include <cstdint>

#include "step_params.h"

namespace tarnn {

// o [rows, 3K] (bias included); given, known, out [rows, T]; cur, log_prob [rows].
TARNN_HD void sample_row(int r, const float *o, int K, const uint8_t *given, const uint8_t *known,
                         int T, uint8_t *cur, uint8_t *out, double *log_prob, const StepParams &p) {
  const float *orow = o + size_t(r) * 3 * K;
  const size_t at = size_t(r) * T + p.t + 1;
  int byte;
  if (p.has_given && (!p.has_known || known[at])) {
    byte = given[at];
    log_prob[r] += double(mixture_log_prob(orow, K, byte));
  } else {
    const DrawKey key =
        p.keys ? p.keys[r] : DrawKey{p.seed, p.image_base + uint64_t(r), p.temperature};
    byte = sample_byte(orow, K, key.seed, key.image, uint32_t(p.t), key.temperature);
  }
  log_prob[r] += double(overflow_mark(orow, 3 * K));
  cur[r] = uint8_t(byte);
  out[at] = uint8_t(byte);
}

inline void sample_bytes_cpu(const float *o, int K, const uint8_t *given, const uint8_t *known,
                             int T, uint8_t *cur, uint8_t *out, double *log_prob,
                             const StepParams *p, int rows) {
  for (int r = 0; r < rows; ++r)
    sample_row(r, o, K, given, known, T, cur, out, log_prob, *p);
}

} // namespace tarnn
