#include "cpu_features.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tarnn {

namespace {

bool refused(const char *env) {
  const char *v = std::getenv(env);
  return v && *v && std::strcmp(v, "0") != 0;
}

} // namespace

bool cpu_has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && !refused("TARNN_NO_AVX512");
  return has;
}

bool cpu_has_avx2_fma() {
  static const bool has =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && !refused("TARNN_NO_AVX2");
  return has;
}

const char *cpu_path_name() {
  return cpu_has_avx512() ? "AVX-512" : cpu_has_avx2_fma() ? "AVX2" : "portable";
}

std::string cpu_model_name() {
  static const std::string name = [] {
    std::string found = "unknown CPU";
    FILE *f = std::fopen("/proc/cpuinfo", "r");
    if (!f)
      return found;
    char line[512];
    while (std::fgets(line, sizeof line, f))
      if (std::strncmp(line, "model name", 10) == 0) {
        const char *colon = std::strchr(line, ':');
        if (colon && colon[1])
          found = colon + 2;
        while (!found.empty() && (found.back() == '\n' || found.back() == ' '))
          found.pop_back();
        break;
      }
    std::fclose(f);
    return found;
  }();
  return name;
}

} // namespace tarnn
