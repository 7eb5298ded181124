// What the harnesses share: the input written to a file in memory-backed storage (the readers
// take paths), and the rule every harness checks: bad input may only ever be a tarnn::Error.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

#include "tarnn/error.h"

namespace fuzz {

// A file per process, rewritten for every input.
inline std::string scratch(const char *name) {
  const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  return std::string(base) + "/tarnn-fuzz-" + std::to_string(getpid()) + "-" + name;
}

inline void write(const std::string &path, const uint8_t *data, size_t size) {
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    __builtin_trap();
  if (size)
    std::fwrite(data, 1, size, f);
  std::fclose(f);
}

// Runs f; a tarnn::Error is the expected answer to bad input, anything else escapes and libFuzzer
// reports it (as it reports crashes, leaks, hangs and sanitizer findings).
template <class F> void expect_only_errors(F &&f) {
  try {
    f();
  } catch (const tarnn::Error &) {
  }
}

} // namespace fuzz
