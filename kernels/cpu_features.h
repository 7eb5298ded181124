// Which instructions this CPU's fast paths may use, decided once at run time: the binary itself is
// built for any x86-64, and the kernels compiled with target attributes are chosen here.
#pragma once

#include <string>

namespace tarnn {

// AVX-512F present and not refused by TARNN_NO_AVX512=1.
bool cpu_has_avx512();

// AVX2 with FMA present and not refused by TARNN_NO_AVX2=1 (which, with TARNN_NO_AVX512=1, forces
// the portable kernels of any x86-64; the tests run every path this CPU has).
bool cpu_has_avx2_fma();

// "AVX-512", "AVX2" or "portable": what the GEMM and the attention run.
const char *cpu_path_name();

// The CPU's model name from /proc/cpuinfo ("AMD EPYC 9R45"), or "unknown CPU".
std::string cpu_model_name();

// The variant for this CPU: AVX-512 where cpu_has_avx512, else AVX2 where cpu_has_avx2_fma.
template <class F> F cpu_pick(F avx512, F avx2, F portable) {
  return cpu_has_avx512() ? avx512 : cpu_has_avx2_fma() ? avx2 : portable;
}

} // namespace tarnn

// Defines NAME_portable, NAME_avx2 and NAME_avx512 with parameters PARAMS, each calling
// NAME_body ARGS (an always-inline function) compiled for its instruction set; cpu_pick chooses
// one at run time. The loops vectorise; no fused multiply-adds are formed (-ffp-contract=off) and
// no sum is reordered, so every variant gives the same bits.
#define TARNN_CPU_VARIANTS(NAME, PARAMS, ARGS)                                                     \
  void NAME##_portable PARAMS { NAME##_body ARGS; }                                                \
  __attribute__((target("avx2,fma"))) void NAME##_avx2 PARAMS { NAME##_body ARGS; }                \
  __attribute__((target("avx512f"))) void NAME##_avx512 PARAMS { NAME##_body ARGS; }
