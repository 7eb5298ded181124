// The test hook that interrupts a job at a known point (docs/ENVIRONMENT.md), so that a test of
// an interrupted run reaches that state whatever the machine's speed, instead of racing a kill
// against the run. Read here only; the command (`sample`, `complete`) and the server act on it.
#pragma once

#include <cstdint>

namespace tarnn {

// With TARNN_TEST_INTERRUPT_AFTER=N (or N:TERM) set: the signal (SIGINT, or SIGTERM) a job that
// has `done` >= N of its outputs finished is to raise at itself now, once per process; 0
// otherwise (unset, not yet, or raised already). Error for a value that is not N or N:TERM.
int test_interrupt_due(int64_t done);

} // namespace tarnn
