// One exception type for every user-facing failure: its message is the one line the command
// prints. The library throws nothing else on bad input (files, flags, sizes).
#pragma once

#include <stdexcept>
#include <string>

namespace tarnn {

struct Error : std::runtime_error {
  explicit Error(const std::string &what) : std::runtime_error(what) {}
};

} // namespace tarnn
