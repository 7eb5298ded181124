// y = act(x W^T + b) with W and x quantized to int8 and the products summed in int32: the CPU's
// GEMM for --precision int8. The arithmetic is kernels/gemm_int8_ref.h's: W with a scale per
// output, each row of x with its own scale computed at each call, the int32 sum scaled back to
// fp32. The integer sum is exact, so every path gives the plain reference's bits whatever the
// instruction set, the rows beside a row, or the threads.
//
// The paths, chosen at run time (Int8Path):
// - AVX512-VNNI: vpdpbusd, 64 products an instruction. It multiplies unsigned bytes by signed
//   ones, so a row of x goes in as qx + 128 (1..255) and the sum starts at -128 sum_k qw[j, k],
//   kept per output at packing: exact in int32 (255 * 127 * 65,536 < 2^31), and one instruction
//   per 64 products, where vpdpwssd on 16-bit x would do 32.
// - AVX-VNNI: the same instruction on 256 bits (CPUs with AVX-VNNI and no AVX-512).
// - AVX2: vpmaddubsw on |qx| and qw with qx's sign (vpsignb), then vpmaddwd into int32: both
//   within -127..127, so a pair's sum is at most 2 * 127 * 127 < 2^15 and never saturates.
// - portable: the integer loop in plain C++.
#pragma once

#include <cstdint>
#include <vector>

#include "../../kernels/gemm_int8_ref.h"
#include "tarnn/model.h"

namespace tarnn {

// W quantized (gemm_int8_ref.h) in panels of 32 outputs: for each group of 4 k, the 32 outputs'
// (qw_k .. qw_k+3) as 4 bytes, the layout vpdpbusd reads; zero-padded to whole panels and groups.
struct PackedLinearInt8 {
  static constexpr int kPanel = 32, kGroup = 4;
  int out = 0, in = 0;
  std::vector<int8_t> w;      // [ceil(out/32)][ceil(in/4)][32][4]
  std::vector<float> scale;   // [ceil(out/32) * 32]: sw, 0 past out
  std::vector<int32_t> start; // [ceil(out/32) * 32]: -128 sum_k qw[j, k], where the VNNI paths'
                              // sums of (qx + 128) qw start, so that they end at sum qx qw
  std::vector<float> b;       // [out], fp32
};

PackedLinearInt8 pack_int8(const Linear &l);

enum class Int8Path { Avx512Vnni, AvxVnni, Avx2, Portable };

// The paths this CPU can run, fastest first (TARNN_NO_AVX512 and TARNN_NO_AVX2 refuse theirs:
// AVX-VNNI counts as AVX2's), and what each is called.
std::vector<Int8Path> int8_paths();
const char *name(Int8Path p);

// y[r * ldy + j] = act(float(acc) * (sx[r] * sw[j]) + b[j]) with the path given (the tests run
// each), or the fastest.
void linear_forward_int8(const PackedLinearInt8 &l, const float *x, int ldx, int rows, float *y,
                         int ldy, Act act, Int8Path path);
void linear_forward_int8(const PackedLinearInt8 &l, const float *x, int ldx, int rows, float *y,
                         int ldy, Act act);

} // namespace tarnn
