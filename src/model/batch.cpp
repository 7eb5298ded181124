#include "batch.h"

namespace tarnn {

namespace {

constexpr size_t kAlign = 256; // cudaMalloc's own alignment; keeps every row block coalesced

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

} // namespace

BatchLayout batch_layout(const Config &c, int64_t rows, StateFormat format, int64_t state_rows) {
  BatchLayout l;
  l.rows = rows;
  const size_t n = size_t(rows), T = size_t(c.bytes_per_image());
  size_t at = 0;
  auto place = [&](size_t &field, size_t bytes) {
    field = at;
    at = align_up(at + bytes);
  };
  place(l.x, n * c.d_model * 4);
  place(l.qkv, n * 3 * c.d_attn() * 4);
  place(l.att, n * c.d_attn() * 4);
  place(l.y, n * c.d_model * 4);
  place(l.hid, n * c.d_ff * 4);
  place(l.o, n * c.d_out() * 4);
  l.state_format = format;
  l.state_chunk = state_chunk();
  // a softmax model's "state" is its KV cache (full length): kept per image as S and z are
  l.state_row_bytes = state_rows > 0 ? size_t(memory_bytes_per_image(c, format)) : 0;
  l.state_bytes = size_t(state_rows) * l.state_row_bytes;
  place(l.state, l.state_bytes);
  place(l.cur, n);
  place(l.out, n * T);
  place(l.given, n * T);
  place(l.known, n * T);
  place(l.log_prob, n * 8);
  place(l.keys, n * sizeof(DrawKey));
  static_assert(sizeof(StepParams) <= 64, "StepParams outgrew its place");
  place(l.params, 64); // StepParams, with room to grow
  l.total = at;
  return l;
}

StepBuffers step_buffers(void *base, const BatchLayout &l) {
  char *m = static_cast<char *>(base);
  auto f = [&](size_t at) { return reinterpret_cast<float *>(m + at); };
  auto u = [&](size_t at) { return reinterpret_cast<uint8_t *>(m + at); };
  StepBuffers b;
  b.rows = int(l.rows);
  b.state_format = l.state_format;
  b.state_row_bytes = l.state_row_bytes;
  b.state_chunk = l.state_chunk;
  b.x = f(l.x), b.qkv = f(l.qkv), b.att = f(l.att), b.y = f(l.y), b.hid = f(l.hid), b.o = f(l.o);
  b.state = m + l.state;
  b.cur = u(l.cur), b.out = u(l.out), b.given = u(l.given), b.known = u(l.known);
  b.log_prob = reinterpret_cast<double *>(m + l.log_prob);
  b.keys = reinterpret_cast<DrawKey *>(m + l.keys);
  b.params = reinterpret_cast<StepParams *>(m + l.params);
  return b;
}

} // namespace tarnn
