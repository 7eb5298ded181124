// How the state S is stored between positions (include/tarnn/numerics.h: StateFormat), on every
// backend: an element's bytes, the rounding to the storage and the widening back. z stays fp32 in
// every format, and the arithmetic is fp32 whatever the storage: load, widen, update, use, round
// once, store. The layout of one image's state is here too, in bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "tarnn/numerics.h"
#include "tarnn_math.h"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#endif

namespace tarnn {

// ---- IEEE half precision (fp16) -----------------------------------------------------------------

// f rounded to fp16, its bits: to nearest even, subnormals kept, beyond 65504 infinity, NaN kept
// quiet. The rule of F16C's vcvtps2ph and of CUDA's __float2half_rn, which the device uses (the
// tests hold the three to the same bits for every number; a NaN stays a NaN).
TARNN_HD uint16_t fp16_bits(float f) {
#ifdef __CUDA_ARCH__
  return __half_as_ushort(__float2half_rn(f));
#else
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) // NaN: quiet, the payload's top bits
    return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) // 65520 and more: infinity (65504 is the largest fp16)
    return uint16_t(sign | 0x7c00u);
  if (a >= 0x38800000u) { // a normal fp16: rebias the exponent, round the 13 dropped bits
    const uint32_t r = a - 0x38000000u;
    return uint16_t(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
  }
  if (a < 0x33000000u) // below half the least subnormal, 2^-25: a zero of its sign
    return uint16_t(sign);
  const uint32_t m = (a & 0x7fffffu) | 0x800000u; // a subnormal fp16: k 2^-24, k = m 2^(e-126)
  const int shift = 126 - int(a >> 23);           // 14 .. 24
  uint32_t k = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (k & 1u)))
    ++k; // may carry into the least normal, which is right
  return uint16_t(sign | k);
#endif
}

// An fp16's value as a float: exact (a NaN comes back quiet).
TARNN_HD float from_fp16(uint16_t h) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(h));
#else
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu, u;
  if (e == 31) // infinity, or a NaN made quiet (as vcvtph2ps does)
    u = sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0u);
  else if (e != 0)
    u = sign | ((e + 112u) << 23) | (m << 13);
  else if (m == 0)
    u = sign;
  else { // subnormal: m 2^-24, normalised
    uint32_t x = 113;
    while (!(m & 0x400u)) {
      m <<= 1;
      --x;
    }
    u = sign | (x << 23) | ((m & 0x3ffu) << 13);
  }
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
#endif
}

// A bfloat16's value as a float: exact (its bits are a float's top half).
TARNN_HD float from_bf16_bits(uint16_t h) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(uint32_t(h) << 16);
#else
  const uint32_t u = uint32_t(h) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
#endif
}

// ---- one element of S in storage: each format's row --------------------------------------------

// 2^e as a float, exactly (|e| < 127).
TARNN_HD float pow2f(int e) {
  const uint32_t u = uint32_t(127 + e) << 23;
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
#endif
}

// Format F's row: what one element of S is stored as (Storage), whether it is stored scaled by
// the position (kScaled, below), and x rounded to it with exponent e (narrow) and such an element
// widened back, exactly (widen). Every kernel takes a format's size, packing and rounding from
// here; there is no row by default, so a format added to StateFormat does not compile until it has
// its row here, and dispatch below its case.
template <StateFormat F> struct StateTraits;

template <> struct StateTraits<StateFormat::Fp32> {
  using Storage = float;
  static constexpr bool kScaled = false;
  static TARNN_HD float narrow(float x, int) { return x; }
  static TARNN_HD float widen(float h, int) { return h; }
};

// fp16's range is 65504, and S, a running sum with no decay, grows with the position (the shipped
// model's largest |S| is 14,918 over 2,000 test digits; docs/STATE.md). So fp16 stores S 2^-e(t),
// e(t) = floor(log2(t + 1)): about the mean of the t + 1 terms, whatever the length. A power of two
// scales exactly: the rounding is fp16's own, only its range moves. S after position t is stored
// with e(t) and read at t + 1 with it. The other formats keep their own range (e = 0).
template <> struct StateTraits<StateFormat::Fp16> {
  using Storage = uint16_t;
  static constexpr bool kScaled = true;
  static TARNN_HD uint16_t narrow(float x, int e) { return fp16_bits(x * pow2f(-e)); }
  static TARNN_HD float widen(uint16_t h, int e) { return from_fp16(h) * pow2f(e); }
};

template <> struct StateTraits<StateFormat::Bf16> {
  using Storage = uint16_t;
  static constexpr bool kScaled = false;
  static TARNN_HD uint16_t narrow(float x, int) { return bf16_bits(x); }
  static TARNN_HD float widen(uint16_t h, int) { return from_bf16_bits(h); }
};

template <StateFormat F> using StorageOf = typename StateTraits<F>::Storage;
// Whether F stores S as the fp32 it is computed in (no conversion, no scratch copy).
template <StateFormat F> constexpr bool kStoredAsFloat = std::is_same_v<StorageOf<F>, float>;

// A state format as a type: dispatch's argument. It converts to its value in constant
// expressions, so a kernel is instantiated as kernel<F>.
template <StateFormat F> struct Format {
  static constexpr StateFormat value = F;
  TARNN_HD constexpr operator StateFormat() const { return F; }
};

// fn(Format<F>{}) for the F that f names: the one switch from a run's format to the kernels'
// template argument, on every backend. Every format has its case (no default: -Werror=switch).
TARNN_HD_CALLS_ANY
template <class Fn> TARNN_HD decltype(auto) dispatch(StateFormat f, Fn &&fn) {
  switch (f) {
  case StateFormat::Fp32:
    return fn(Format<StateFormat::Fp32>{});
  case StateFormat::Fp16:
    return fn(Format<StateFormat::Fp16>{});
  case StateFormat::Bf16:
    return fn(Format<StateFormat::Bf16>{});
  }
  __builtin_unreachable(); // f is one of the cases (numerics.h parses strings into them)
}

// An element's bytes in format f.
TARNN_HD int state_element_size(StateFormat f) {
  return dispatch(f, [](auto F) { return int(sizeof(StorageOf<F>)); });
}

// The exponent S after position t is stored with in format F (StateTraits::kScaled), e(t) =
// floor(log2(t + 1)); 0 in the other formats and before the first position.
template <StateFormat F> TARNN_HD int state_scale_exponent(int t) {
  if (!StateTraits<F>::kScaled || t < 0)
    return 0;
  int e = 0;
  for (unsigned u = unsigned(t) + 1u; u > 1u; u >>= 1)
    ++e;
  return e;
}
// The exponent S is stored with once position t is done, with the write deferred over chunks of
// `chunk` positions: e(t) where t ends its chunk, else e of the position before the chunk's first
// (S is then as that position left it; the chunk's terms are in the buffer).
template <StateFormat F> TARNN_HD int stored_scale_exponent(int t, int chunk) {
  const int m = t < 0 ? 0 : t % chunk;
  return state_scale_exponent<F>(m == chunk - 1 ? t : t - m - 1);
}
TARNN_HD int state_scale_exponent(StateFormat f, int t) {
  return dispatch(f, [t](auto F) { return state_scale_exponent<F>(t); });
}
TARNN_HD int stored_scale_exponent(StateFormat f, int t, int chunk) {
  return dispatch(f, [t, chunk](auto F) { return stored_scale_exponent<F>(t, chunk); });
}

// x rounded to what format F stores with exponent e: the value the next position will read.
template <StateFormat F> TARNN_HD float quantize(float x, int e = 0) {
  return StateTraits<F>::widen(StateTraits<F>::narrow(x, e), e);
}

// Element i of S stored in format F at S with exponent e, widened; and x rounded into it.
template <StateFormat F> TARNN_HD float load_state(const void *S, size_t i, int e = 0) {
  return StateTraits<F>::widen(static_cast<const StorageOf<F> *>(S)[i], e);
}
template <StateFormat F> TARNN_HD void store_state(void *S, size_t i, float x, int e = 0) {
  static_cast<StorageOf<F> *>(S)[i] = StateTraits<F>::narrow(x, e);
}

// ---- the chunk's buffer (docs/SPEC.md, "The state in chunks") ----------------------------------

// What the chunk's buffer holds phi(k) and v in for state format F: the state's own storage,
// unscaled (e = 0): fp32 for fp32 (any C then keeps C = 1's bits), fp16 rounded to nearest even
// for fp16 (phi(k) and v are no running sum: fp16's range holds them, SPEC says why), bf16 for
// bf16. The one place the buffer's element is decided: the layout, the CPU path, the plain
// reference, the kernels and their twin take it from here.
template <StateFormat F> using BufferOf = StorageOf<F>;
// A block's buffer in format F: element i read widened to fp32 exactly, x set rounded to it. The
// index is the caller's type: the kernels' choice of int or size_t decides their registers.
template <StateFormat F> struct ChunkBuffer {
  BufferOf<F> *p;
  template <class I> TARNN_HD float operator[](I i) const { return StateTraits<F>::widen(p[i], 0); }
  template <class I> TARNN_HD void set(I i, float x) const { p[i] = StateTraits<F>::narrow(x, 0); }
};
template <StateFormat F> TARNN_HD ChunkBuffer<F> chunk_buffer(void *buffer) {
  return {static_cast<BufferOf<F> *>(buffer)};
}

// ---- the state's layout, in bytes ---------------------------------------------------------------

// One (image, layer, head) block: S (F x d, row-major, in the format, padded to 4 bytes) then z
// (F floats); F = features, phi's width (d for the elementwise maps). Blocks are ordered image,
// layer, head, so an image's state is one contiguous range and a chunk's first n images are one
// too (model/batch.h: every backend's layout).
TARNN_HD size_t state_s_bytes(int features, int d, StateFormat f) {
  return (size_t(features) * d * size_t(state_element_size(f)) + 3) / 4 * 4;
}
// With the state's write deferred over chunks of `chunk` positions (docs/SPEC.md, "The state in
// chunks"; 1: written every position, no buffer), the block ends with the chunk's buffer: phi(k)
// then v (F + d elements, BufferOf) of each of the chunk's first chunk - 1 positions, padded to 4
// bytes. The block is an image's whole state at any position, so a copy of it resumes exactly.
TARNN_HD size_t state_chunk_bytes(int features, int d, StateFormat f, int chunk) {
  const size_t element = dispatch(f, [](auto F) { return sizeof(BufferOf<F>); });
  return (size_t(chunk > 1 ? chunk - 1 : 0) * (size_t(features) + size_t(d)) * element + 3) / 4 * 4;
}
TARNN_HD size_t state_block_bytes(int features, int d, StateFormat f, int chunk = 1) {
  return state_s_bytes(features, d, f) + size_t(features) * sizeof(float) +
         state_chunk_bytes(features, d, f, chunk);
}
TARNN_HD size_t state_block_offset(int image, int layer, int head, int n_layers, int n_heads,
                                   int features, int d, StateFormat f, int chunk = 1) {
  return ((size_t(image) * n_layers + layer) * n_heads + head) *
         state_block_bytes(features, d, f, chunk);
}

// (host code) The largest |S| held by `blocks` consecutive state blocks (an image's layers and
// heads, a chunk's images) in host memory, S stored in format F with exponent e: the magnitude
// docs/STATE.md measured the fp16 state for. Read once at the end of a chunk, not in the steps: the
// bits of a 16-bit float's magnitude order as its values do, so it is a max over integers, and one
// conversion.
template <StateFormat F>
float largest_state(const void *state, size_t blocks, int features, int d, int e, int chunk = 1) {
  const size_t n = size_t(features) * d, block = state_block_bytes(features, d, F, chunk);
  const auto *bytes = static_cast<const unsigned char *>(state);
  using Storage = StorageOf<F>;
  if constexpr (kStoredAsFloat<F>) {
    float most = 0.0f;
    for (size_t b = 0; b < blocks; ++b)
      for (size_t i = 0; i < n; ++i)
        most = fmaxf(most, fabsf(reinterpret_cast<const float *>(bytes + b * block)[i]));
    return most;
  } else {
    static_assert(std::is_unsigned_v<Storage>, "a float's bits, the sign highest");
    constexpr Storage magnitude = Storage(~Storage(0)) >> 1; // |h|'s bits: the sign cleared
    Storage most = 0;
    for (size_t b = 0; b < blocks; ++b) {
      const auto *h = reinterpret_cast<const Storage *>(bytes + b * block);
      for (size_t i = 0; i < n; ++i)
        most = Storage(most > (h[i] & magnitude) ? most : (h[i] & magnitude));
    }
    return StateTraits<F>::widen(most, e);
  }
}
inline float largest_state(const void *state, size_t blocks, int features, int d, StateFormat f,
                           int e, int chunk = 1) {
  return dispatch(f,
                  [&](auto F) { return largest_state<F>(state, blocks, features, d, e, chunk); });
}

} // namespace tarnn
