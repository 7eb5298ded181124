// The feed-forward block and its LayerNorm in one kernel (feed_forward.h): tensor cores through
// nvcuda::wmma, bf16 16 x 16 x 16 tiles with fp32 accumulators. W is [out, in] row-major, so a
// tile of W^T is a col_major load with ldm = in, from L2 (the weights are every block's).
//
// A block of kFeedForwardWarps warps owns kFeedForwardRows rows (two 16-row tiles). Per chunk of
// the hidden layer (a 16-column tile a warp):
//   A. warp w sums its tile's rows of x16 W1_c^T over d_model's k ascending, for both row tiles,
//      into fp32 in shared memory; then every thread adds b1, applies act and rounds to bf16;
//   B. warp w adds the chunk's k-tiles, ascending, into the accumulators of its output tiles
//      (the same 16 output columns for both row tiles, W2's tile loaded once for both).
// The accumulators stay in registers across the chunks, so each output sums the whole hidden
// layer in order, as one GEMM's. Then they go to shared memory (over the bytes the GEMMs used),
// and each warp normalizes rows: x + (y + b2), warp_layernorm.h's code. Barriers only between
// phases (__syncthreads): shared memory is never reused within one.
#include <cuda_bf16.h>
#include <mma.h>

#include "bias_act.h"
#include "cuda_util.h"
#include "feed_forward.h"
#include "launch.h"
#include "warp_layernorm.h"

namespace tarnn {

namespace {

using namespace nvcuda;

constexpr int M = kFeedForwardRows, MT = M / 16, H = kFeedForwardHidden;
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

__device__ const __nv_bfloat16 *bf16_at(const uint16_t *p) {
  return reinterpret_cast<const __nv_bfloat16 *>(p);
}

struct alignas(16) Bf16x8 { // 8 bf16, one 16-byte load (rows of x16 are 32 bytes aligned)
  uint32_t v[4];
};

// The block's rows of x16 into xs [M, d] (rows past the batch as zeros, read but never written
// out), 8 bf16 a load.
__device__ void load_rows(uint16_t *xs, const uint16_t *x16, int64_t row0, int valid, int d) {
  const int per_row = d / 8;
  Bf16x8 *to = reinterpret_cast<Bf16x8 *>(xs);
  const Bf16x8 *from = reinterpret_cast<const Bf16x8 *>(x16 + size_t(row0) * d);
  for (int e = threadIdx.x; e < M * per_row; e += blockDim.x)
    to[e] = e / per_row < valid ? from[e] : Bf16x8{};
}

// Phase A, warp `warp`'s hidden tile (columns c0 + 16 warp ...) of both row tiles: the fp32 sums
// of x16 W1^T into hf [M, H] (row-major), k ascending.
__device__ void hidden_sums(const FeedForwardNorm &f, const uint16_t *xs, float *hf, int c0,
                            int warp) {
  const int d = f.d_model;
  FragC acc[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m)
    wmma::fill_fragment(acc[m], 0.0f);
  const uint16_t *w1 = f.w1 + size_t(c0 + 16 * warp) * d;
  for (int k = 0; k < d; k += 16) {
    FragB b;
    wmma::load_matrix_sync(b, bf16_at(w1 + k), d);
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      FragA a;
      wmma::load_matrix_sync(a, bf16_at(xs + 16 * m * d + k), d);
      wmma::mma_sync(acc[m], a, b, acc[m]);
    }
  }
#pragma unroll
  for (int m = 0; m < MT; ++m)
    wmma::store_matrix_sync(hf + 16 * m * H + 16 * warp, acc[m], H, wmma::mem_row_major);
}

// Phase A's epilogue: hs = bf16(act(hf + b1)) over the chunk's `width` columns, as the unfused
// path's bf16 epilogue (or bias_act, then a rounding pass) writes hid16.
__device__ void hidden_epilogue(const FeedForwardNorm &f, const float *hf, uint16_t *hs, int c0,
                                int width) {
  for (int e = threadIdx.x; e < M * H; e += blockDim.x) {
    const int c = e % H;
    if (c < width)
      hs[e] = bf16_bits(activate(hf[e] + f.b1[c0 + c], f.act));
  }
}

// Warp `warp`'s output tiles (columns 16 (warp + kFeedForwardWarps n) < d, both row tiles) +=
// a W^T over k ascending from 0 to `width`: a [M, width] row-major (lda apart) in shared memory,
// W's rows ldw apart from w (its column of k = 0). Phase B (a = the hidden chunk, w = W2 at the
// chunk's column) and phase 0 (a = att16's rows, w = Wo).
template <int NT>
__device__ void sum_tiles(const uint16_t *a, int lda, const uint16_t *w, int ldw, int width, int d,
                          FragC (&y)[NT][MT], int warp) {
  for (int k = 0; k < width; k += 16) {
    FragA at[MT];
#pragma unroll
    for (int m = 0; m < MT; ++m)
      wmma::load_matrix_sync(at[m], bf16_at(a + 16 * m * lda + k), lda);
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const int col = 16 * (warp + kFeedForwardWarps * n);
      if (col >= d) // warp-uniform
        continue;
      FragB b;
      wmma::load_matrix_sync(b, bf16_at(w + size_t(col) * ldw + k), ldw);
#pragma unroll
      for (int m = 0; m < MT; ++m)
        wmma::mma_sync(y[n][m], at[m], b, y[n][m]);
    }
  }
}

// The accumulators into ys [M, d] (fp32, row-major), then zeros in them.
template <int NT> __device__ void store_tiles(float *ys, FragC (&y)[NT][MT], int d, int warp) {
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    const int col = 16 * (warp + kFeedForwardWarps * n);
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      if (col < d)
        wmma::store_matrix_sync(ys + 16 * m * d + col, y[n][m], d, wmma::mem_row_major);
      wmma::fill_fragment(y[n][m], 0.0f);
    }
  }
}

// Phase 0 (with the out-projection): the block's rows of att16 into xs's bytes, y = att16 Wo^T,
// then per row x1 = LayerNorm1(x + (y + bo)) (the unfused path's order: the GEMM's bias epilogue,
// then the residual) into x1s in fp32 and into xs in bf16 (zeros past the batch). The accumulators
// end as zeros, for the feed-forward.
template <int K, int NT>
__device__ void out_projection_norm(const FeedForwardNorm &f, const float *x, const uint16_t *att16,
                                    int64_t row0, int valid, float *x1s, uint16_t *xs,
                                    FragC (&y)[NT][MT], int warp, int lane) {
  const int d = f.d_model;
  load_rows(xs, att16, row0, valid, d);
  __syncthreads();
  sum_tiles<NT>(xs, d, f.wo, d, d, d, y, warp);
  store_tiles<NT>(x1s, y, d, warp); // x1s is not att16's bytes: no barrier before
  __syncthreads();                  // every warp's tiles in x1s; att16's rows read
  for (int r = warp; r < M; r += kFeedForwardWarps) { // warp-uniform: full-warp shuffles
    float *x1 = x1s + size_t(r) * d;
    if (r >= valid) {
      for (int i = lane; i < d; i += 32)
        xs[size_t(r) * d + i] = 0;
      continue;
    }
    const float *xr = x + size_t(row0 + r) * d;
    layernorm_row_warp<K>([&](int i) { return xr[i] + (x1[i] + f.bo[i]); }, lane, d, f.norm1_w,
                          f.norm1_b, nullptr, nullptr, x1, xs + size_t(r) * d);
  }
}

// K floats a lane hold a row (d_model <= 32 K, as layernorm_rows_kernel<K>); NT = K / 4 output
// tiles of 16 columns a warp cover it (8 warps: 128 NT columns). kOut: with the out-projection and
// LayerNorm1 first (phase 0), `in` att16 and x1 (LayerNorm2's residual) in shared memory; else
// `in` x16, x's bf16 copy, and the residual x.
template <int K, bool kOut>
__global__ void __launch_bounds__(32 * kFeedForwardWarps)
    feed_forward_norm_kernel(FeedForwardNorm f, const float *x, const uint16_t *in, int rows,
                             float *out, uint16_t *out16) {
  constexpr int NT = K / 4;
  static_assert(32 * K == 128 * NT, "a row's registers and the output tiles cover one width");
  TARNN_DYNAMIC_SHARED(float, shared);
  const int d = f.d_model, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float *x1s = shared, *ys = kOut ? shared + M * d : shared; // ys [M, d] fp32 after the GEMMs
  uint16_t *xs = reinterpret_cast<uint16_t *>(ys), *hs = xs + M * d;
  float *hf = reinterpret_cast<float *>(hs + M * H);
  const int64_t row0 = int64_t(blockIdx.x) * M;
  const int valid = rows - row0 < M ? int(rows - row0) : M;
  FragC y[NT][MT];
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int m = 0; m < MT; ++m)
      wmma::fill_fragment(y[n][m], 0.0f);
  if (kOut)
    out_projection_norm<K, NT>(f, x, in, row0, valid, x1s, xs, y, warp, lane);
  else
    load_rows(xs, in, row0, valid, d);
  __syncthreads();
  for (int c0 = 0; c0 < f.d_ff; c0 += H) {
    const int width = f.d_ff - c0 < H ? f.d_ff - c0 : H;
    if (16 * warp < width)
      hidden_sums(f, xs, hf, c0, warp);
    __syncthreads();
    hidden_epilogue(f, hf, hs, c0, width);
    __syncthreads();
    sum_tiles<NT>(hs, H, f.w2 + c0, f.d_ff, width, d, y, warp);
    __syncthreads(); // hs and hf are the next chunk's; after the last, ys takes their bytes
  }
  store_tiles<NT>(ys, y, d, warp);
  __syncthreads();
  for (int r = warp; r < valid; r += kFeedForwardWarps) { // warp-uniform: full-warp shuffles
    const size_t row = size_t(row0 + r) * d;
    const float *yr = ys + size_t(r) * d, *res = kOut ? x1s + size_t(r) * d : x + row;
    layernorm_row_warp<K>([&](int i) { return res[i] + (yr[i] + f.b2[i]); }, lane, d, f.norm_w,
                          f.norm_b, f.then_w, f.then_b, out ? out + row : nullptr,
                          out16 ? out16 + row : nullptr);
  }
}

template <int K, bool kOut>
void launch_block(const FeedForwardNorm &f, const float *x, const uint16_t *in, int rows,
                  float *out, uint16_t *out16, cudaStream_t s) {
  const auto shared_bytes = kOut ? after_attention_shared_bytes : feed_forward_shared_bytes;
  // once, before any capture (a step's first run is plain launches): the most this build asks
  static const cudaError_t most = cudaFuncSetAttribute(
      feed_forward_norm_kernel<K, kOut>, cudaFuncAttributeMaxDynamicSharedMemorySize,
      int(shared_bytes(std::min(32 * K, kOut ? kAfterAttentionWidest : kFeedForwardWidest))));
  cuda_check(most, "cudaFuncSetAttribute (feed_forward_norm_kernel)");
  const unsigned blocks = unsigned((int64_t(rows) + M - 1) / M);
  TARNN_LAUNCH((feed_forward_norm_kernel<K, kOut>), blocks, 32 * kFeedForwardWarps,
               shared_bytes(f.d_model), s)
  (f, x, in, rows, out, out16);
}

// The kernel of the row width d_model's registers hold.
template <bool kOut>
void launch_width(const FeedForwardNorm &f, const float *x, const uint16_t *in, int rows,
                  float *out, uint16_t *out16, cudaStream_t s) {
  auto *launch = f.d_model <= 128   ? &launch_block<4, kOut>
                 : f.d_model <= 256 ? &launch_block<8, kOut>
                                    : &launch_block<16, kOut>;
  launch(f, x, in, rows, out, out16, s);
  launch_check("feed_forward_norm_kernel");
}

} // namespace

void launch_feed_forward_norm(const FeedForwardNorm &f, const float *x, const uint16_t *x16,
                              int rows, float *out, uint16_t *out16, cudaStream_t s) {
  if (rows <= 0) // an empty grid is a launch error
    return;
  const std::string refused = feed_forward_refusal(f.d_model, f.d_ff);
  if (!refused.empty())
    throw Error("launch_feed_forward_norm: the fused feed-forward needs " + refused);
  launch_width<false>(f, x, x16, rows, out, out16, s);
}

void launch_after_attention(const FeedForwardNorm &f, const float *x, const uint16_t *att16,
                            int rows, float *out, uint16_t *out16, cudaStream_t s) {
  if (rows <= 0)
    return;
  const std::string refused = after_attention_refusal(f.d_model, f.d_ff, f.d_model);
  if (!refused.empty() || !f.wo)
    throw Error("launch_after_attention: the layer's kernel needs " +
                (f.wo ? refused : std::string("the out-projection's weights")));
  launch_width<true>(f, x, att16, rows, out, out16, s);
}

} // namespace tarnn
