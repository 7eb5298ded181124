// src/jobs/test_interrupt.h: TARNN_TEST_INTERRUPT_AFTER, parsed once it is first asked for.
#include "test_interrupt.h"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <string>

#include "tarnn/error.h"

namespace tarnn {

int test_interrupt_due(int64_t done) {
  static std::atomic<bool> raised{false};
  const char *env = std::getenv("TARNN_TEST_INTERRUPT_AFTER");
  if (!env || raised)
    return 0;
  const std::string value = env, count = value.substr(0, value.find(':'));
  const std::string signal = count.size() < value.size() ? value.substr(count.size() + 1) : "INT";
  if (count.empty() || count.size() > 18 || count.find_first_not_of("0123456789") != count.npos ||
      (signal != "INT" && signal != "TERM"))
    throw Error("TARNN_TEST_INTERRUPT_AFTER must be N or N:TERM, a whole number of outputs (got '" +
                value.substr(0, 40) + "')");
  if (done < std::stoll(count) || raised.exchange(true))
    return 0;
  return signal == "TERM" ? SIGTERM : SIGINT;
}

} // namespace tarnn
