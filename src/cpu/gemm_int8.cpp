#include "gemm_int8.h"

#include <algorithm>
#include <array>
#include <cpuid.h>
#include <cstring>
#include <immintrin.h>
#include <utility>

#include "../../kernels/cpu_features.h"
#include "gemm_tiles.h"
#include "tarnn/error.h"

namespace tarnn {

namespace {

using gemm::kRows;
constexpr int P = PackedLinearInt8::kPanel, G = PackedLinearInt8::kGroup;
static_assert(P == gemm::kPanel);
constexpr int kOffset = 128; // the VNNI paths' x: qx + 128, unsigned

bool cpu_has_avx512_vnni() {
  static const bool yes = cpu_has_avx512() && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vnni");
  return yes;
}

bool cpu_has_avx_vnni() { // CPUID.(7,1):EAX bit 4; clang 14's __builtin_cpu_supports lacks it
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return cpu_has_avx2_fma() && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1u);
  }();
  return yes;
}

int groups_of(int in) { return (in + G - 1) / G; }

int32_t load4(const uint8_t *p) { // 4 bytes of a row as vpdpbusd broadcasts them
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// ---- a GEMM's input, quantized row by row -------------------------------------------------------

// Row r of x quantized into q (groups_of(in) * 4 bytes: qx + bias, bias past in) and its scale:
// bias 128 for the VNNI paths (unsigned), 0 for the others (signed, stored in the same bytes).
void quantize_row_portable(const float *x, int in, uint8_t *q, int bias, float &sx) {
  const Int8Scale s = int8_scale(abs_max_bits(x, in));
  sx = s.scale;
  for (int k = 0; k < in; ++k)
    q[k] = uint8_t((s.inv == 0.0f ? 0 : int8_quantize(x[k], s.inv)) + bias);
  std::fill(q + in, q + groups_of(in) * G, uint8_t(bias));
}

#pragma GCC diagnostic push // GCC 12's intrinsics headers: a false positive (gemm_tiles.h)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// qx + bias of 16 floats, as 16 bytes
__attribute__((target("avx512f"), always_inline)) inline __m128i bytes16(__m512 x, __m512 inv,
                                                                         __m512i bias) {
  return _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(x, inv)), bias));
}

// qx + bias of 64 floats, as 64 bytes: two packs with signed saturation (qx is within -127..127:
// nothing saturates), the lanes put back in order, then + bias as bytes (xor 0x80 adds 128).
__attribute__((target("avx512f,avx512bw"), always_inline)) inline __m512i
bytes64(const float *x, __m512 inv, bool offset) {
  const __m512i a = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x), inv));
  const __m512i b = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16), inv));
  const __m512i c = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 32), inv));
  const __m512i d = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 48), inv));
  // per 128-bit lane l: a_l b_l c_l d_l, 4 bytes each: lane l of the result holds x[4l..] of each
  const __m512i q = _mm512_packs_epi16(_mm512_packs_epi32(a, b), _mm512_packs_epi32(c, d));
  const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  const __m512i r = _mm512_permutexvar_epi32(order, q);
  return offset ? _mm512_xor_si512(r, _mm512_set1_epi8(char(0x80))) : r;
}

// The same 16 floats at a time: the largest |x| as an integer max of the bits, then
// vcvtps2dq(x * inv), which rounds to nearest even as int8_quantize does. int8_quantize's clamp
// never acts (|x * inv| < 127.5 where a is the row's true largest |x|), so it is left out; vpmovdb
// keeps the low byte of qx + bias.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void
quantize_row_avx512(const float *x, int in, uint8_t *q, int bias, float &sx) {
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
  __m512i amax = _mm512_setzero_si512();
  for (int k = 0; k < in; k += 16) {
    const __mmask16 m = __mmask16(in - k >= 16 ? 0xffff : (1u << (in - k)) - 1);
    amax = _mm512_max_epu32(amax, _mm512_and_si512(_mm512_maskz_loadu_epi32(m, x + k), magnitude));
  }
  const Int8Scale s = int8_scale(uint32_t(_mm512_reduce_max_epu32(amax)));
  sx = s.scale;
  const int padded = groups_of(in) * G;
  if (s.inv == 0.0f) {
    std::memset(q, bias, size_t(padded));
    return;
  }
  const __m512 inv = _mm512_set1_ps(s.inv);
  const __m512i add = _mm512_set1_epi32(bias);
  int k = 0;
  for (; k + 64 <= in; k += 64)
    _mm512_storeu_si512(q + k, bytes64(x + k, inv, bias != 0));
  for (; k + 16 <= in; k += 16) // whole vectors: a plain store (a masked vpmovdb to memory is slow)
    _mm_storeu_si128(reinterpret_cast<__m128i *>(q + k), bytes16(_mm512_loadu_ps(x + k), inv, add));
  for (; k < padded; k += 16) { // the tail: zeros past in, so the bias
    const int left = std::min(16, in - k);
    const __mmask16 m = __mmask16(left <= 0 ? 0 : (1u << left) - 1);
    _mm_mask_storeu_epi8(q + k, __mmask16((1u << std::min(16, padded - k)) - 1),
                         bytes16(_mm512_maskz_loadu_ps(m, x + k), inv, add));
  }
}

// ---- the tiles: R rows of x against one panel of 32 outputs ------------------------------------

struct TileArgs {
  const int8_t *panel; // [groups][32][4]
  int groups;
  const uint8_t *xq; // R rows of groups * 4 bytes
  int ldq;
  const float *sx, *sw; // R row scales; 32 output scales
  const int32_t *start; // 32 outputs' sums before the first product (the VNNI paths)
  const float *b;       // null: no bias
  int ncols;
  float *y;
  int ldy;
  Act act;
};

// The epilogue from int32 sums: act(float(acc) * (sx * sw) + b), element by element.
template <int R> void finish_tile(const int32_t (&acc)[R][P], const TileArgs &a) {
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < a.ncols; ++j)
      a.y[r * a.ldy + j] = int8_finish(acc[r][j], a.sx[r], a.sw[j], a.b, j, a.act);
}

// acc += x (unsigned bytes) . w (signed bytes), four products a lane: vpdpbusd, written as the
// instruction itself. GCC 12 compiles the intrinsic with a copy of the accumulator around each
// (and spills some of the 16 to the stack): the tile ran at 72% of the instruction's rate.
__attribute__((target("avx512f,avx512vnni"), always_inline)) inline __m512i
dpbusd(__m512i acc, __m512i x, __m512i w) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(x), "v"(w));
  return acc;
}

template <int R>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void tile_avx512_vnni(const TileArgs &a) {
  __m512i c0[R], c1[R];
  const __m512i o0 = _mm512_loadu_si512(a.start), o1 = _mm512_loadu_si512(a.start + 16);
  for (int r = 0; r < R; ++r) // at -128 sum qw: the offset off before any product, not after
    c0[r] = o0, c1[r] = o1;   // the last (7% faster at in = 256)
  for (int g = 0; g < a.groups; ++g) {
    const __m512i w0 = _mm512_loadu_si512(a.panel + g * P * G);
    const __m512i w1 = _mm512_loadu_si512(a.panel + g * P * G + 64);
    for (int r = 0; r < R; ++r) {
      const __m512i xb = _mm512_set1_epi32(load4(a.xq + r * a.ldq + g * G));
      c0[r] = dpbusd(c0[r], xb, w0);
      c1[r] = dpbusd(c1[r], xb, w1);
    }
  }
  const __m512 s0 = _mm512_loadu_ps(a.sw), s1 = _mm512_loadu_ps(a.sw + 16);
  __m512 f0[R], f1[R];
  for (int r = 0; r < R; ++r) { // float(acc) * (sx * sw), then + b and act
    const __m512 sxr = _mm512_set1_ps(a.sx[r]);
    f0[r] = _mm512_mul_ps(_mm512_cvtepi32_ps(c0[r]), _mm512_mul_ps(sxr, s0));
    f1[r] = _mm512_mul_ps(_mm512_cvtepi32_ps(c1[r]), _mm512_mul_ps(sxr, s1));
  }
  gemm::store_tile_avx512<R>(f0, f1, a.b, a.ncols, a.y, a.ldy, a.act);
}

// A 256-bit path's tile: 16 outputs (two vectors) by up to 4 rows at a time (16 registers), each
// step DOT(acc, x broadcast, w), from START (a vector of 8 sums: 0, or the VNNI paths' offset).
// One body for two instruction sets: a target is a function's, so each path is its own function.
#define TARNN_INT8_TILE_256(NAME, TARGET, START, DOT)                                              \
  template <int N>                                                                                 \
  __attribute__((target(TARGET), always_inline)) inline void NAME##_block(                         \
      const TileArgs &a, int r0, int half, int32_t(*acc)[P]) {                                     \
    __m256i c0[N], c1[N];                                                                          \
    for (int r = 0; r < N; ++r)                                                                    \
      c0[r] = START(a.start + half * 16), c1[r] = START(a.start + half * 16 + 8);                  \
    const int8_t *w = a.panel + half * 16 * G;                                                     \
    for (int g = 0; g < a.groups; ++g) {                                                           \
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w + g * P * G));     \
      const __m256i w1 =                                                                           \
          _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w + g * P * G + 32));               \
      for (int r = 0; r < N; ++r) {                                                                \
        const __m256i xb = _mm256_set1_epi32(load4(a.xq + (r0 + r) * a.ldq + g * G));              \
        c0[r] = DOT(c0[r], xb, w0);                                                                \
        c1[r] = DOT(c1[r], xb, w1);                                                                \
      }                                                                                            \
    }                                                                                              \
    for (int r = 0; r < N; ++r) {                                                                  \
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(acc[r0 + r] + half * 16), c0[r]);            \
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(acc[r0 + r] + half * 16 + 8), c1[r]);        \
    }                                                                                              \
  }                                                                                                \
  template <int R> __attribute__((target(TARGET))) void NAME(const TileArgs &a) {                  \
    int32_t acc[R][P];                                                                             \
    for (int half = 0; half < 2; ++half) {                                                         \
      int r = 0;                                                                                   \
      for (; r + 4 <= R; r += 4)                                                                   \
        NAME##_block<4>(a, r, half, acc);                                                          \
      if constexpr (R % 4 == 3)                                                                    \
        NAME##_block<3>(a, r, half, acc);                                                          \
      if constexpr (R % 4 == 2)                                                                    \
        NAME##_block<2>(a, r, half, acc);                                                          \
      if constexpr (R % 4 == 1)                                                                    \
        NAME##_block<1>(a, r, half, acc);                                                          \
    }                                                                                              \
    finish_tile<R>(acc, a);                                                                        \
  }

// AVX-VNNI: vpdpbusd on 256 bits, x as qx + 128, from the offset.
#define TARNN_DOT_VNNI(c, xb, w) _mm256_dpbusd_avx_epi32(c, xb, w)
#define TARNN_START_OFFSET(p) _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p))
TARNN_INT8_TILE_256(tile_avx_vnni, "avx2,avxvnni", TARNN_START_OFFSET, TARNN_DOT_VNNI)

// AVX2: |qx| times qw with qx's sign in pairs (vpmaddubsw: at most 2 * 127 * 127, below its
// saturation), the pairs summed into int32 (vpmaddwd by 1).
#define TARNN_DOT_AVX2(c, xb, w)                                                                   \
  _mm256_add_epi32(                                                                                \
      c, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(xb), _mm256_sign_epi8(w, xb)),     \
                           _mm256_set1_epi16(1)))
#define TARNN_START_ZERO(p) _mm256_setzero_si256()
TARNN_INT8_TILE_256(tile_avx2, "avx2", TARNN_START_ZERO, TARNN_DOT_AVX2)

template <int R> void tile_portable(const TileArgs &a) {
  int32_t acc[R][P] = {};
  for (int g = 0; g < a.groups; ++g)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < P; ++j)
        for (int i = 0; i < G; ++i)
          acc[r][j] +=
              int32_t(int8_t(a.xq[r * a.ldq + g * G + i])) * int32_t(a.panel[(g * P + j) * G + i]);
  finish_tile<R>(acc, a);
}

#pragma GCC diagnostic pop

using TileFn = void (*)(const TileArgs &);
using Tiles = std::array<TileFn, kRows>;
using QuantizeFn = void (*)(const float *, int, uint8_t *, int, float &);

template <size_t... R> Tiles tiles(Int8Path p, std::index_sequence<R...>) {
  switch (p) {
  case Int8Path::Avx512Vnni:
    return {{&tile_avx512_vnni<int(R) + 1>...}};
  case Int8Path::AvxVnni:
    return {{&tile_avx_vnni<int(R) + 1>...}};
  case Int8Path::Avx2:
    return {{&tile_avx2<int(R) + 1>...}};
  case Int8Path::Portable:
    return {{&tile_portable<int(R) + 1>...}};
  }
  throw Error("an int8 path without tiles");
}

struct PathKernels {
  Tiles tile;
  QuantizeFn quantize;
  int bias; // added to qx: 128 where vpdpbusd reads x as unsigned
};

const PathKernels &kernels_of(Int8Path p) {
  static const std::array<PathKernels, 4> all = [] {
    std::array<PathKernels, 4> k;
    for (Int8Path q : {Int8Path::Avx512Vnni, Int8Path::AvxVnni, Int8Path::Avx2, Int8Path::Portable})
      k[size_t(q)] = {tiles(q, std::make_index_sequence<kRows>()),
                      q == Int8Path::Avx512Vnni ? &quantize_row_avx512 : &quantize_row_portable,
                      q == Int8Path::Avx512Vnni || q == Int8Path::AvxVnni ? kOffset : 0};
    return k;
  }();
  return all[size_t(p)];
}

} // namespace

std::vector<Int8Path> int8_paths() {
  std::vector<Int8Path> p;
  if (cpu_has_avx512_vnni())
    p.push_back(Int8Path::Avx512Vnni);
  if (cpu_has_avx_vnni())
    p.push_back(Int8Path::AvxVnni);
  if (cpu_has_avx2_fma())
    p.push_back(Int8Path::Avx2);
  p.push_back(Int8Path::Portable);
  return p;
}

const char *name(Int8Path p) {
  switch (p) {
  case Int8Path::Avx512Vnni:
    return "AVX512-VNNI";
  case Int8Path::AvxVnni:
    return "AVX-VNNI";
  case Int8Path::Avx2:
    return "AVX2";
  case Int8Path::Portable:
    return "portable";
  }
  throw Error("an int8 path without a name");
}

PackedLinearInt8 pack_int8(const Linear &l) {
  if (l.in > 65536) // 255 * 127 * in must stay below 2^31 (config.h bounds in to 65,536)
    throw Error("an int8 GEMM sums at most 65536 products (this one: " + std::to_string(l.in) +
                ")");
  PackedLinearInt8 p;
  p.out = l.out;
  p.in = l.in;
  p.b = l.b;
  const int panels = (l.out + P - 1) / P, groups = groups_of(l.in);
  p.w.assign(size_t(panels) * groups * P * G, 0);
  p.scale.assign(size_t(panels) * P, 0.0f);
  p.start.assign(size_t(panels) * P, 0);
  std::vector<int8_t> q(size_t(l.in));
  for (int j = 0; j < l.out; ++j) {
    p.scale[size_t(j)] = int8_quantize_vector(&l.w[size_t(j) * l.in], l.in, q.data());
    int32_t sum = 0;
    for (int k = 0; k < l.in; ++k) {
      p.w[((size_t(j / P) * groups + k / G) * P + j % P) * G + k % G] = q[size_t(k)];
      sum += q[size_t(k)];
    }
    p.start[size_t(j)] = -kOffset * sum;
  }
  return p;
}

void linear_forward_int8(const PackedLinearInt8 &l, const float *x, int ldx, int rows, float *y,
                         int ldy, Act act, Int8Path path) {
  const PathKernels &k = kernels_of(path);
  const int groups = groups_of(l.in), ldq = groups * G;
  thread_local std::vector<uint8_t> xq; // x quantized once per call, not once per panel
  thread_local std::vector<float> sx;
  xq.resize(size_t(rows) * ldq);
  sx.resize(size_t(rows));
  for (int r = 0; r < rows; ++r)
    k.quantize(x + size_t(r) * ldx, l.in, xq.data() + size_t(r) * ldq, k.bias, sx[size_t(r)]);
  const size_t panel = size_t(groups) * P * G; // bytes of W a panel
  const size_t tiles = size_t((rows + kRows - 1) / kRows);
  gemm::for_each_tile(l.out, rows, [&](int p, int r, int n, int ncols) {
    // the next panel of W into the caches, a slice a row tile, while this one runs from them: in a
    // step W comes from memory (the attention's state has moved through the caches since)
    const size_t next = size_t(p + 1) * panel, t = size_t(r / kRows);
    if (next + panel <= l.w.size())
      for (size_t b = panel * t / tiles; b < panel * (t + 1) / tiles; b += 64)
        __builtin_prefetch(l.w.data() + next + b, /*write*/ 0, /*keep*/ 2);
    k.tile[size_t(n - 1)](TileArgs{
        l.w.data() + size_t(p) * groups * P * G, groups, xq.data() + size_t(r) * ldq, ldq,
        sx.data() + r, l.scale.data() + p * P, l.start.data() + p * P,
        l.b.empty() ? nullptr : l.b.data() + p * P, ncols, y + size_t(r) * ldy + p * P, ldy, act});
  });
}

void linear_forward_int8(const PackedLinearInt8 &l, const float *x, int ldx, int rows, float *y,
                         int ldy, Act act) {
  static const Int8Path fastest = int8_paths().front();
  linear_forward_int8(l, x, ldx, rows, y, ldy, act, fastest);
}

} // namespace tarnn
