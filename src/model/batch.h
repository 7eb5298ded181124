// A batch's memory, laid out once for every backend: the activations of one step, the state S and
// z of every image, layer and head, the bytes in and out, and the step parameters, in one
// allocation (host memory for the CPU, device memory for CUDA).
#pragma once

#include <cstddef>
#include <cstdint>

#include "../../kernels/step_params.h"
#include "tarnn/numerics.h"

namespace tarnn {

// Byte offsets of a batch's buffers inside one allocation (each 256-byte aligned), for `rows`
// images: activations x [rows, d_model], qkv [rows, 3 d_attn], att [rows, d_attn],
// y [rows, d_model], hid [rows, d_ff], o [rows, 3K]; the state [rows, state_elements_per_image]
// in the run's StateFormat (kernels/state_format.h: state_block_offset); bytes cur [rows],
// out/given/known [rows, T]; log_prob [rows]; RNG keys [rows]; and the step parameters.
struct BatchLayout {
  int64_t rows = 0;
  size_t x = 0, qkv = 0, att = 0, y = 0, hid = 0, o = 0, state = 0, cur = 0, out = 0, given = 0,
         known = 0, log_prob = 0, keys = 0, params = 0, total = 0;
  StateFormat state_format = StateFormat::Fp32;
  size_t state_row_bytes = 0; // S and z (or the KV cache) of one image (memory_bytes_per_image)
  int state_chunk = 1;        // the state written once a chunk of this many positions (state_chunk)
  size_t state_bytes = 0;     // of all rows with a state, no more
};

// `state_rows` images get a state (the benchmark's softmax decoders keep theirs elsewhere: 0, and
// then state_row_bytes is 0 too). A softmax model's state is its KV cache at full length
// (memory_bytes_per_image; src/softmax: KvOps lays it out).
BatchLayout batch_layout(const Config &c, int64_t rows, StateFormat format, int64_t state_rows);
inline BatchLayout batch_layout(const Config &c, int64_t rows, StateFormat format) {
  return batch_layout(c, rows, format, rows);
}

// The buffers of a layout placed at `base`.
struct StepBuffers {
  int rows = 0;                                 // capacity
  StateFormat state_format = StateFormat::Fp32; // how S is stored (kernels/state_format.h)
  size_t state_row_bytes = 0;                   // S and z of one image
  int state_chunk = 1; // S and z written once a chunk of positions (numerics.h: state_chunk)
  float *x, *qkv, *att, *y, *hid, *o;
  void *state; // [rows] blocks of S in state_format, then z
  uint8_t *cur, *out, *given, *known;
  double *log_prob;
  DrawKey *keys; // [rows], used when the job gives each image its own key
  StepParams *params;
};

StepBuffers step_buffers(void *base, const BatchLayout &l);

} // namespace tarnn
