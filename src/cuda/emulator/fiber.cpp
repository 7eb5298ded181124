// fiber.h: the switch, the stacks and AddressSanitizer's annotations.
#include "fiber.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
#include <utility>

#include "sanitizer.h"

#if defined(__x86_64__)
// tarnn_emu_switch(void **save, void *load): pushes the callee-saved registers and the floating
// point control words on the running stack, stores its pointer in *save, loads `load` and pops the
// same from there. A new fiber's stack is laid out as if it had switched out just before
// tarnn_emu_trampoline, which calls r13(r12) on a frame chain that ends there (rbp = 0).
extern "C" void tarnn_emu_switch(void **save, void *load);
extern "C" void tarnn_emu_trampoline();
asm(R"(
  .text
  .p2align 4
  .globl tarnn_emu_switch
  .hidden tarnn_emu_switch
  .type tarnn_emu_switch, @function
tarnn_emu_switch:
  .cfi_startproc
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .cfi_endproc
  .size tarnn_emu_switch, .-tarnn_emu_switch

  .p2align 4
  .globl tarnn_emu_trampoline
  .hidden tarnn_emu_trampoline
  .type tarnn_emu_trampoline, @function
tarnn_emu_trampoline:
  .cfi_startproc
  .cfi_undefined rip
  pushq %rbp
  movq %r12, %rdi
  callq *%r13
  ud2
  .cfi_endproc
  .size tarnn_emu_trampoline, .-tarnn_emu_trampoline
)");
#endif

namespace tarnn_emu {

namespace {

size_t page_bytes() {
  static const size_t p = size_t(sysconf(_SC_PAGESIZE));
  return p;
}

[[noreturn]] void die(const char *what) {
  std::fprintf(stderr, "tarnn emulated device: %s\n", what);
  std::abort();
}

} // namespace

void fiber_start(Fiber &f, size_t bytes, void (*entry)(void *), void *arg) {
  const size_t page = page_bytes();
  bytes = (bytes + page - 1) / page * page;
  if (!f.stack || f.stack_bytes != bytes) {
    fiber_free(f);
    // a guard page below the stack: an overflow faults instead of writing into a neighbour
    void *m = mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED)
      die("cannot map a fiber's stack");
    mprotect(m, page, PROT_NONE);
    f.stack = static_cast<char *>(m) + page;
    f.stack_bytes = bytes;
  }
#ifdef TARNN_EMU_ASAN
  __asan_unpoison_memory_region(f.stack, f.stack_bytes); // frames abandoned mid-kernel
#endif
  f.asan_bottom = f.stack;
  f.asan_size = f.stack_bytes;
  f.asan_fake_stack = nullptr;
#if defined(__x86_64__)
  auto *top = reinterpret_cast<uint64_t *>(
      (reinterpret_cast<uintptr_t>(f.stack + f.stack_bytes) & ~uintptr_t(15)));
  uint64_t *sp = top - 9;
  sp[0] = 0x037f00001f80ull; // MXCSR 0x1f80 (round to nearest, exceptions masked), x87 0x037f
  sp[1] = 0;                 // r15
  sp[2] = 0;                 // r14
  sp[3] = reinterpret_cast<uint64_t>(entry); // r13
  sp[4] = reinterpret_cast<uint64_t>(arg);   // r12
  sp[5] = 0;                                 // rbx
  sp[6] = 0;                                 // rbp: the end of the frame chain
  sp[7] = reinterpret_cast<uint64_t>(&tarnn_emu_trampoline);
  sp[8] = 0;
  f.sp = sp;
#else
  getcontext(&f.context);
  f.context.uc_stack.ss_sp = f.stack;
  f.context.uc_stack.ss_size = f.stack_bytes;
  f.context.uc_link = nullptr;
  makecontext(&f.context, reinterpret_cast<void (*)()>(entry), 1, arg);
#endif
}

void fiber_free(Fiber &f) {
  if (f.stack)
    munmap(f.stack - page_bytes(), f.stack_bytes + page_bytes());
  f.stack = nullptr;
  f.stack_bytes = 0;
}

void fiber_switch(Fiber &from, Fiber &to) {
#ifdef TARNN_EMU_ASAN
  __sanitizer_start_switch_fiber(&from.asan_fake_stack, to.asan_bottom, to.asan_size);
#endif
#if defined(__x86_64__)
  tarnn_emu_switch(&from.sp, to.sp);
#else
  swapcontext(&from.context, &to.context);
#endif
#ifdef TARNN_EMU_ASAN
  __sanitizer_finish_switch_fiber(from.asan_fake_stack, nullptr, nullptr);
#endif
}

void fiber_entered() {
#ifdef TARNN_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
}

void fiber_of_this_thread(Fiber &f) {
  // once per thread: for the main thread glibc reads /proc/self/maps to answer
  thread_local const std::pair<void *, size_t> bounds = [] {
    pthread_attr_t attr;
    void *bottom = nullptr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      pthread_attr_getstack(&attr, &bottom, &size);
      pthread_attr_destroy(&attr);
    }
    return std::make_pair(bottom, size);
  }();
  f.stack = nullptr;
  f.asan_bottom = bounds.first;
  f.asan_size = bounds.second;
}

} // namespace tarnn_emu
