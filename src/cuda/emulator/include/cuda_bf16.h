// The emulated device's bfloat16 (src/cuda/emulator): __nv_bfloat16 and its conversions, to
// CUDA's documented results, from the format's definition (no kernel here uses them yet: the
// backend rounds with kernels/tarnn_math.h's bf16_bits, which sends subnormals to zero as the
// CPU's vcvtne2ps2bf16 does, where __float2bfloat16 keeps them; test_kernels says so).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

struct __nv_bfloat16 {
  uint16_t __x;
};

// f to the nearest bfloat16, ties to even (__float2bfloat16): 8 significant bits, subnormals
// kept; a NaN becomes the canonical NaN (0x7fff).
inline __nv_bfloat16 __float2bfloat16(float f) {
  if (std::isnan(f))
    return {uint16_t(0x7fffu)};
  const double a = std::fabs(double(f));
  double r = a; // rounded to 8 significant bits (a multiple of 2^-133 below 2^-126)
  if (a != 0 && std::isfinite(a)) {
    const int e = std::max(std::ilogb(a), -126);
    r = std::ldexp(std::nearbyint(std::ldexp(a, 7 - e)), e - 7);
  }
  const float rounded = float(std::signbit(f) ? -r : r); // exact, or infinity past the largest
  uint32_t u;
  std::memcpy(&u, &rounded, 4);
  return {uint16_t(u >> 16)};
}

// b's value, exactly (__bfloat162float).
inline float __bfloat162float(__nv_bfloat16 b) {
  const uint32_t u = uint32_t(b.__x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return {u}; }
