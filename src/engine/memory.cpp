
#include <unistd.h>

#include "tarnn/run.h"

#include "tarnn/error.h"

namespace tarnn {

int64_t physical_memory_bytes() {
  return int64_t(sysconf(_SC_PHYS_PAGES)) * int64_t(sysconf(_SC_PAGE_SIZE));
}

void check_memory(double bytes, const Message &what) {
  const double have = double(physical_memory_bytes());
  if (bytes <= 0.75 * have)
    return;
  Message m = what;
  m += " needs " + std::to_string(int64_t(bytes / 1e6)) + " MB, more than 3/4 of this machine's " +
       std::to_string(int64_t(have / 1e6)) + " MB";
  throw Error(m);
}

} // namespace tarnn
