// Small helpers every layer may use (this folder includes nothing of the project's).
#pragma once

#include <chrono>
#include <string>

namespace tarnn {

// Seconds on the steady clock since `t0`.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The folder part of a path: "a/b" -> "a", "b" -> ".", "/b" -> "/".
inline std::string folder_of(const std::string &path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

} // namespace tarnn
