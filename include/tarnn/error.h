// One exception type for every user-facing failure: its message is the one line the command
// prints. The library throws nothing else on bad input (files, flags, sizes). Its kind says what
// went wrong, for bindings that have their own exception types (Python: ValueError, OSError,
// RuntimeError).
#pragma once

#include <stdexcept>
#include <string>

namespace tarnn {

struct Error : std::runtime_error {
  enum class Kind {
    Invalid, // a bad argument, size or option, or a malformed file's content
    File,    // a file or folder that cannot be opened, read or written
    Runtime, // the machine: no device, a thread that would not start, memory
  };
  explicit Error(const std::string &what, Kind kind = Kind::Invalid)
      : std::runtime_error(what), kind_(kind) {}
  Kind kind() const { return kind_; }

private:
  Kind kind_;
};

} // namespace tarnn
