// Launchers of the kernels in kernels/*.cu (CUDA-only header). Each checks its launch and throws
// Error naming the kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

#include "bias_act.h"
#include "feature_map.h"
#include "feed_forward.h"
#include "state_format.h"
#include "step_params.h"

namespace tarnn {

// positions: the rows are consecutive positions of ONE image, from p->t (a prefill): the
// embedding takes row r at p->t + r, and the attention walks the rows in order through one state.
void launch_embedding(float *x, const float *E, const float *P, const uint8_t *cur,
                      const StepParams *p, int rows, int d_model, cudaStream_t s,
                      bool positions = false);
// state: S in format f (state_format.h), then z; p->t the position (of row 0, with positions);
// m: the layer's phi (feature_map.h; its omega in device memory); att16: the output written there
// in bf16 (round_bf16.h's rule) instead of into att, for a bf16 GEMM, where not null; qkv16: q, k
// and v read there in bf16 (the q,k,v GEMM's bf16 output, linear_attention.h's QkvIn) instead of
// from qkv, where not null
void launch_linear_attention(const float *qkv, void *state, float *att, int rows, int layer,
                             int n_layers, int n_heads, const PhiMap &m, StateFormat f,
                             const StepParams *p, cudaStream_t s, bool positions = false,
                             uint16_t *att16 = nullptr, const uint16_t *qkv16 = nullptr);
// The same with the state's write deferred over chunks of C > 1 positions (chunked_attention.h):
// state laid out with the chunk's buffer (state_block_bytes(..., C)); p->t the position
void launch_chunked_attention(const float *qkv, void *state, float *att, int rows, int layer,
                              int n_layers, int n_heads, const PhiMap &m, StateFormat f,
                              const StepParams *p, cudaStream_t s, bool positions, uint16_t *att16,
                              int C, const uint16_t *qkv16 = nullptr);
void launch_bias_act(float *y, const float *b, int rows, int n, Act a, cudaStream_t s);
// x16: also x's bf16 copy (residual_layernorm.h), where not null
void launch_residual_layernorm(float *x, const float *y, const float *w, const float *nb, int rows,
                               int n, cudaStream_t s, uint16_t *x16 = nullptr);
// LayerNorm(x + y), then LayerNorm with (w2, nb2) where w2 is not null, each row read once (n <=
// kLayerNormRegisterWidth, residual_layernorm.h); the result into out (fp32) and out16 (bf16),
// each where not null; out may be x
void launch_layernorm_rows(const float *x, const float *y, const float *w, const float *nb,
                           const float *w2, const float *nb2, int rows, int n, float *out,
                           uint16_t *out16, cudaStream_t s);
// x = LayerNorm2(x + W2 act(W1 x16 + b1) + b2) (then f's second norm where given) for rows of x and
// of x16, x's bf16 copy, in one kernel (feed_forward.h); the result into out (fp32) and out16
// (bf16), each where not null; out may be x and out16 x16 (a block reads its rows first)
void launch_feed_forward_norm(const FeedForwardNorm &f, const float *x, const uint16_t *x16,
                              int rows, float *out, uint16_t *out16, cudaStream_t s);
// What follows the attention in a layer, in one kernel (feed_forward.h, f.wo set): x1 =
// LayerNorm1(x + att16 Wo^T + bo), then the feed-forward and LayerNorm2 over x1 as above; att16
// [rows, d_model] the attention's bf16 output; out may be x and out16 att16
void launch_after_attention(const FeedForwardNorm &f, const float *x, const uint16_t *att16,
                            int rows, float *out, uint16_t *out16, cudaStream_t s);
void launch_sample_bytes(const float *o, int K, const uint8_t *given, const uint8_t *known, int T,
                         uint8_t *cur, uint8_t *out, double *log_prob, const StepParams *p,
                         int rows, cudaStream_t s);
void launch_advance_position(StepParams *p, cudaStream_t s);
void launch_round_bf16(const float *x, uint16_t *out, size_t n, cudaStream_t s);
// --precision int8 (int8_rows.h): q (rows ldq apart, zeros after in), sx of x's rows; then
// y = act(acc * (sx sw) + b), acc's rows ldacc apart (y may be acc where ldacc is out)
void launch_quantize_rows_int8(const float *x, int rows, int in, int ldq, int8_t *q, float *sx,
                               cudaStream_t s);
void launch_finish_int8(const int32_t *acc, int ldacc, const float *sx, const float *sw,
                        const float *b, int rows, int out, Act act, float *y, cudaStream_t s);

} // namespace tarnn
