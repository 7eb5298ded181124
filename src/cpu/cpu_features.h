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

} // namespace tarnn
