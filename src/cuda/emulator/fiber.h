// The emulated device's fibers: one stack and saved registers per emulated GPU thread, switched
// by hand (x86-64: the callee-saved registers, the stack pointer, MXCSR and the x87 control word;
// elsewhere ucontext), so that a block's threads take turns between barriers in one host
// thread, deterministically, at about 10 ns a switch (swapcontext's signal-mask system calls
// would cost a microsecond). AddressSanitizer is told of every switch.
#pragma once

#include <cstddef>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace tarnn_emu {

struct Fiber {
  void *sp = nullptr; // saved stack pointer while switched out (x86-64)
#if !defined(__x86_64__)
  ucontext_t context;
#endif
  char *stack = nullptr; // null: the host thread's own stack (a scheduler)
  size_t stack_bytes = 0;
  // AddressSanitizer's view: the stack's bounds (a scheduler's learnt at the first switch) and
  // its fake stack while switched out
  const void *asan_bottom = nullptr;
  size_t asan_size = 0;
  void *asan_fake_stack = nullptr;
};

// A stack of `bytes` (plus a guard page below it) that runs entry(arg) at the first switch into
// it; entry never returns. Again on a used fiber: its stack starts over, whatever was on it.
void fiber_start(Fiber &f, size_t bytes, void (*entry)(void *), void *arg);
void fiber_free(Fiber &f);
// Saves the running context in `from`, resumes `to`; returns when something switches back.
void fiber_switch(Fiber &from, Fiber &to);
// The first thing entry() calls: completes the switch that started it.
void fiber_entered();
// `f` describes the calling host thread's own stack (a scheduler, which switches to fibers).
void fiber_of_this_thread(Fiber &f);

} // namespace tarnn_emu
