// The one memory check: a job is refused before any work when what it needs would not fit.
#pragma once

#include <cstdint>
#include <string>

namespace tarnn {

int64_t physical_memory_bytes();

// Throws Error "WHAT needs N MB, more than 3/4 of this machine's M MB" when `bytes` is over 3/4
// of the physical memory (the rest is the system's, the model's and the outputs').
void check_memory(double bytes, const std::string &what);

} // namespace tarnn
