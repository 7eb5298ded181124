// The emulated device's half precision (src/cuda/emulator): __half and the conversions the
// kernels use, to CUDA's documented results, written from the definition of IEEE binary16
// (arithmetic on the value, not bit tricks: an implementation apart from kernels/state_format.h's,
// which the tests compare it with).
#pragma once

#include <cmath>
#include <cstdint>

struct __half {
  uint16_t __x;
};

// f to the nearest binary16, ties to even (__float2half_rn): 11 significant bits for a normal
// result, a multiple of 2^-24 below 2^-14, beyond 65504 (from 65520 up) infinity; a NaN becomes
// the canonical NaN (0x7fff), as the GPU's cvt.rn.f16.f32 gives it.
inline __half __float2half_rn(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000u : 0u;
  const double a = std::fabs(double(f));
  if (std::isnan(f))
    return {uint16_t(0x7fffu)};
  if (a >= 65520.0)
    return {uint16_t(0x7c00u | sign)};
  if (a < std::ldexp(1.0, -14)) // subnormal (or zero): k 2^-24, k rounded to even
    return {uint16_t(sign | uint16_t(std::nearbyint(std::ldexp(a, 24))))};
  const int e = std::ilogb(a);                                     // -14 .. 15
  const double m = std::nearbyint(std::ldexp(a, 10 - e));          // 1024 .. 2048
  const int ex = m == 2048.0 ? e + 1 : e;                          // rounded up to the next binade
  const uint16_t frac = uint16_t(m == 2048.0 ? 0 : int(m) - 1024); // the 10 stored bits
  return {uint16_t(sign | uint16_t((ex + 15) << 10) | frac)};
}

// h's value, exactly (__half2float).
inline float __half2float(__half h) {
  const int e = (h.__x >> 10) & 0x1f, m = h.__x & 0x3ff;
  const double sign = (h.__x & 0x8000u) ? -1.0 : 1.0;
  if (e == 31)
    return float(m ? std::nan("") : sign * INFINITY);
  const double v = e == 0 ? std::ldexp(double(m), -24) : std::ldexp(double(1024 + m), e - 25);
  return float(sign * v);
}

inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __ushort_as_half(unsigned short u) { return {u}; }
