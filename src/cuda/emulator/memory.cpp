// Device memory on the emulated device, and what it checks and counts of every load and store a
// kernel makes. The kernels' files are compiled with the compiler's AddressSanitizer
// instrumentation in its outlined form (CMakeLists.txt: every access a call, at any size): under
// ASan with the callbacks renamed (__tarnn_emu_load4, ...), which check here and then call ASan's
// own; elsewhere in "kernel" mode, whose callbacks (__asan_load4_noabort, ...) are this file's.
// The kernels' bodies are untouched: each access they make, through whatever pointer, comes here.
//
// For each access of a running kernel thread (launch.cpp: tl_thread): its own stack and its
// grid's arguments pass; its block's shared memory and device memory are checked word by word
// (Word: who wrote and read each 4-byte word in which interval between barriers) and device
// memory is counted (the distinct bytes each launch reads and writes); anything else (a host
// pointer, past the end of an allocation or of the block's shared memory) stops the grid with
// cudaErrorIllegalAddress, as compute-sanitizer's memcheck would report it.
//
// The race check: two threads touching the same bytes, one of them writing, with no barrier
// between them (threads of one block in the same interval, or threads of two blocks of one
// launch, which nothing orders) stop the grid with cudaErrorLaunchFailure naming both. What it
// sees: every access the kernels' code makes, in shared and device memory, byte by byte (threads
// owning neighbouring bytes do not race). What it misses: accesses made by code outside the
// kernels' files (none: the kernels call only always-inline helpers, compiled into those files,
// and libm), static __shared__ arrays (none here: cuda_runtime.h), a byte's accesses from an
// interval before the word's last (one interval is kept per word, for its writes and for its
// reads: a conflict with a byte last touched two intervals ago in another block is missed), and
// a read-modify-write instruction's read (the instrumentation reports it as a write).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <link.h>
#include <map>
#include <vector>

#include "device.h"
#include "sanitizer.h"

// The checks of every kernel access run on the emulator's own shadow memory, and under the
// sanitizers most of a kernel's time went to instrumenting them again: their hot path is left
// alone (the release build runs the same code; test_emulator holds it to its answers).
#if defined(__clang__) || defined(__GNUC__)
#define TARNN_EMU_HOT __attribute__((no_sanitize("address", "undefined")))
#else
#define TARNN_EMU_HOT
#endif

namespace tarnn_emu {

namespace {

// ---- allocations and their names
// -----------------------------------------------------------------

struct Allocation {
  char *begin = nullptr;
  size_t bytes = 0;
  std::unique_ptr<Word[]> shadow; // made at the first kernel access
};

std::map<uintptr_t, Allocation> g_allocations; // by where each begins
size_t g_allocated = 0;
Allocation *g_last = nullptr; // the last one found: most accesses fall in it again

struct Label {
  const char *begin, *end;
  int id;
};
std::vector<Label> g_labels;
std::vector<std::string> g_label_names = {"other"};

// The allocation at or below p (its start at most p), or null.
Allocation *below(const char *p) {
  auto it = g_allocations.upper_bound(reinterpret_cast<uintptr_t>(p));
  return it == g_allocations.begin() ? nullptr : &std::prev(it)->second;
}

TARNN_EMU_HOT Allocation *find(const char *p) {
  if (g_last && p >= g_last->begin && p < g_last->begin + g_last->bytes)
    return g_last;
  auto it = g_allocations.upper_bound(reinterpret_cast<uintptr_t>(p));
  if (it == g_allocations.begin())
    return nullptr;
  Allocation &a = std::prev(it)->second;
  if (p >= a.begin + std::max<size_t>(a.bytes, 1))
    return nullptr;
  return g_last = &a;
}

TARNN_EMU_HOT int label_id(const char *p) {
  for (const Label &l : g_labels)
    if (p >= l.begin && p < l.end)
      return l.id;
  return 0;
}

// ---- counts and intervals ----------------------------------------------------------------------

std::vector<std::unique_ptr<Counts>> g_counts; // in the order each first ran
std::map<std::string, Counts *> g_counts_by_name;
uint32_t g_segment = 0, g_launch = 0;
std::vector<Word> g_shared_shadow;
struct Unwritten {
  size_t word;
  uint16_t thread;
};
std::vector<Unwritten> g_unwritten; // this interval's reads of shared words never written
const char *g_arena = nullptr;
size_t g_arena_bytes = 0;

void add(Counts &c, int label, bool write, uint64_t bytes) {
  if (c.by_label.size() <= size_t(label))
    c.by_label.resize(size_t(label) + 1);
  (write ? c.by_label[size_t(label)].written : c.by_label[size_t(label)].read) += bytes;
}

// ---- the memory a kernel may touch besides device and shared memory ----------------------------

struct Range {
  uintptr_t begin, end;
};
std::vector<Range> g_modules; // every loaded module's segments: static data a kernel may read

int add_module(dl_phdr_info *info, size_t, void *) {
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_LOAD)
      g_modules.push_back(
          {info->dlpi_addr + info->dlpi_phdr[i].p_vaddr,
           info->dlpi_addr + info->dlpi_phdr[i].p_vaddr + info->dlpi_phdr[i].p_memsz});
  return 0;
}

bool static_data(uintptr_t a) {
  for (int pass = 0; pass < 2; ++pass) {
    for (const Range &r : g_modules)
      if (a >= r.begin && a < r.end)
        return true;
    if (pass == 0) { // a module loaded since: look again
      g_modules.clear();
      dl_iterate_phdr(&add_module, nullptr);
    }
  }
  return false;
}

bool own_fake_stack(const void *p) {
#ifdef TARNN_EMU_ASAN
  void *fake = __asan_get_current_fake_stack();
  return fake && __asan_addr_is_in_fake_stack(fake, const_cast<void *>(p), nullptr, nullptr);
#else
  (void)p;
  return false;
#endif
}

// ---- one access
// ------------------------------------------------------------------------------------

std::string hex(const void *p) {
  char s[32];
  std::snprintf(s, sizeof s, "%p", p);
  return s;
}

// Where a word is, for a message: "shared memory byte 12 (of 3072)", "device memory at 0x...".
struct Place {
  bool shared;
  size_t offset, bytes;
  const char *begin;
  std::string operator()(size_t word) const {
    const size_t at = word * 4;
    if (shared)
      return "shared memory byte " + std::to_string(at) + " (of " + std::to_string(bytes) + ")";
    return "device memory byte " + std::to_string(at) + " of the allocation at " + hex(begin) +
           " (" + std::to_string(bytes) + " bytes, " + g_label_names[size_t(label_id(begin + at))] +
           ")";
  }
};

// Whether an earlier access in segment `seg` by `other` may run at the same time as the running
// thread's: one of an earlier launch is ordered before it (the stream), one of this block only if
// it is in this interval and another thread's, one of another block of this launch always.
// Whether an earlier access in segment `seg` by `other` (an index + 1, or kMany) may run at the
// same time as the running thread's: one of an earlier launch is ordered before it (the stream),
// one of this block only if it is in this interval and another thread's, one of another block of
// this launch always.
TARNN_EMU_HOT bool concurrent(const ThreadRun &t, uint32_t seg, uint16_t other) {
  if (!other || seg < t.launch_seg)
    return false;
  if (seg >= t.block_seg)
    return seg == t.seg && other != t.thread + 1;
  return true;
}

[[noreturn]] void race(const ThreadRun &t, const Place &place, size_t word, bool write,
                       uint32_t seg, uint16_t other, bool other_wrote) {
  const std::string who = seg < t.block_seg ? "a thread of another block"
                          : other == kMany  ? "other threads"
                                            : thread_name(uint16_t(other - 1));
  kernel_fault(
      cudaErrorLaunchFailure,
      std::string("races: it ") + (write ? "writes " : "reads ") + place(word) + ", which " + who +
          (other_wrote ? " wrote" : " read") +
          (seg < t.block_seg ? " (blocks are not ordered)" : " with no __syncthreads between"));
}

TARNN_EMU_HOT void touch(const ThreadRun &t, Word &w, uint8_t bytes, bool write, const Place &place,
                         size_t word) {
  const uint16_t me = uint16_t(t.thread + 1);
  // a record of an earlier launch, or of an earlier interval of this block, cannot conflict: the
  // bytes are looked at only where one may (most accesses find none)
  auto live = [&](uint32_t seg) {
    return seg >= t.launch_seg && (seg < t.block_seg || seg == t.seg);
  };
  const bool writers = live(w.w_seg), readers = write && live(w.r_seg);
  if (writers || readers)
    for (int b = 0; b < 4; ++b)
      if (bytes >> b & 1u) {
        if (writers && concurrent(t, w.w_seg, w.writer[b]))
          race(t, place, word, write, w.w_seg, w.writer[b], true);
        if (readers && concurrent(t, w.r_seg, w.reader[b]))
          race(t, place, word, write, w.r_seg, w.reader[b], false);
      }
  if (write) {
    if (w.w_seg != t.seg) { // the bytes written before are ordered before this interval
      w.w_seg = t.seg;
      std::fill(w.writer, w.writer + 4, uint16_t(0));
    }
    for (int b = 0; b < 4; ++b)
      if (bytes >> b & 1u)
        w.writer[b] = me;
    return;
  }
  if (place.shared && w.w_seg < t.block_seg && g_unwritten.size() < 4096)
    g_unwritten.push_back({word, t.thread});
  if (w.r_seg != t.seg) {
    // readers in another block of this launch stay, as several: not ordered with anything here
    const bool foreign = w.r_seg >= t.launch_seg && w.r_seg < t.block_seg;
    for (uint16_t &r : w.reader)
      r = foreign && r ? kMany : 0;
    w.r_seg = t.seg;
  }
  for (int b = 0; b < 4; ++b)
    if (bytes >> b & 1u)
      w.reader[b] = w.reader[b] == 0 || w.reader[b] == me ? me : kMany;
}

// The bytes of this launch not counted yet.
TARNN_EMU_HOT void count(const ThreadRun &t, Word &w, uint8_t bytes, bool write, const char *at) {
  if (w.t_launch != t.launch) {
    w.t_launch = t.launch;
    w.t_read = w.t_written = 0;
  }
  uint8_t &seen = write ? w.t_written : w.t_read;
  const uint8_t fresh = bytes & uint8_t(~seen);
  if (!fresh)
    return;
  seen |= fresh;
  add(*t.counts, label_id(at), write, uint64_t(__builtin_popcount(fresh)));
}

// Bytes [offset, offset + n) of memory whose words `shadow` describes (4-byte aligned at 0).
TARNN_EMU_HOT void touch_words(const ThreadRun &t, Word *shadow, const char *base, size_t offset,
                               size_t n, bool write, const Place &place) {
  const size_t end = offset + n;
  for (size_t word = offset / 4; word * 4 < end; ++word) {
    const size_t lo = std::max(offset, word * 4), hi = std::min(end, word * 4 + 4);
    const uint8_t bytes = uint8_t(((1u << (hi - lo)) - 1u) << (lo - word * 4));
    touch(t, shadow[word], bytes, write, place, word);
    if (!place.shared)
      count(t, shadow[word], bytes, write, base + word * 4);
  }
}

void check(ThreadRun *t, uintptr_t address, size_t n, bool write);

TARNN_EMU_HOT void access(uintptr_t address, size_t n, bool write) {
  ThreadRun *t = tl_thread;
  if (!t || t->quiet || n == 0)
    return;
  Quiet quiet(t); // (a fault does not return: the thread's ThreadRun is made anew for its next)
  check(t, address, n, write);
}

TARNN_EMU_HOT void check(ThreadRun *t, uintptr_t address, size_t n, bool write) {
  const char *p = reinterpret_cast<const char *>(address);
  if (p >= t->stack_lo && p < t->stack_hi)
    return;
  if (t->shared && p >= t->shared && p < t->shared + t->shared_bytes) {
    if (p + n > t->shared + t->shared_bytes)
      kernel_fault(cudaErrorIllegalAddress,
                   "touches " + std::to_string(n) + " bytes past the end of its block's " +
                       std::to_string(t->shared_bytes) + " bytes of shared memory");
    touch_words(*t, t->shared_shadow, t->shared, size_t(p - t->shared), n, write,
                Place{true, 0, t->shared_bytes, t->shared});
    return;
  }
  if (p >= t->params_lo && p < t->params_hi) {
    if (write)
      kernel_fault(cudaErrorIllegalAddress, "writes its launch's arguments");
    return;
  }
  if (g_arena && p >= g_arena && p < g_arena + g_arena_bytes)
    kernel_fault(
        cudaErrorIllegalAddress,
        "touches shared memory " +
            (t->shared && p >= t->shared + t->shared_bytes
                 ? std::to_string(p - (t->shared + t->shared_bytes)) + " bytes past the end of"
                 : std::string("before the start of")) +
            " its block's " + std::to_string(t->shared_bytes) + " bytes");
  if (Allocation *a = find(p)) {
    if (p + n > a->begin + a->bytes)
      kernel_fault(cudaErrorIllegalAddress, "touches " + std::to_string(n) + " bytes at byte " +
                                                std::to_string(p - a->begin) + " of a " +
                                                std::to_string(a->bytes) +
                                                "-byte device allocation: past its end");
    if (!a->shadow)
      a->shadow.reset(new Word[(a->bytes + 3) / 4]());
    touch_words(*t, a->shadow.get(), a->begin, size_t(p - a->begin), n, write,
                Place{false, 0, a->bytes, a->begin});
    return;
  }
  if (static_data(address) || own_fake_stack(p))
    return;
  if (const Allocation *a = below(p); a && p < a->begin + a->bytes + 4096)
    kernel_fault(cudaErrorIllegalAddress,
                 std::string(write ? "writes " : "reads ") + std::to_string(n) + " bytes " +
                     std::to_string(p - (a->begin + a->bytes)) + " bytes past the end of a " +
                     std::to_string(a->bytes) + "-byte device allocation");
  kernel_fault(cudaErrorIllegalAddress,
               std::string(write ? "writes " : "reads ") + std::to_string(n) + " bytes at " +
                   hex(p) +
                   ", which is neither device memory, its block's shared memory nor its stack "
                   "(a host pointer?)");
}

} // namespace

// ---- device.h
// ------------------------------------------------------------------------------------

void *device_alloc(size_t bytes) {
  void *p = nullptr;
  if (posix_memalign(&p, 256, std::max<size_t>(bytes, 1)) != 0)
    return nullptr;
  std::memset(p, 0xff, bytes);
  Allocation &a = g_allocations[reinterpret_cast<uintptr_t>(p)];
  a.begin = static_cast<char *>(p);
  a.bytes = bytes;
  g_allocated += bytes;
  return p;
}

bool device_free(void *p) {
  const auto it = g_allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == g_allocations.end())
    return false;
  const char *begin = it->second.begin, *end = begin + it->second.bytes;
  g_labels.erase(std::remove_if(g_labels.begin(), g_labels.end(),
                                [&](const Label &l) { return l.begin >= begin && l.end <= end; }),
                 g_labels.end());
  g_allocated -= it->second.bytes;
  g_last = nullptr;
  g_allocations.erase(it);
  std::free(p);
  return true;
}

size_t device_allocated() { return g_allocated; }

void device_free_all() {
  for (auto &[at, a] : g_allocations)
    std::free(a.begin);
  g_allocations.clear();
  g_labels.clear();
  g_allocated = 0;
  g_last = nullptr;
}

int device_range(const void *p, size_t bytes) {
  Allocation *a = find(static_cast<const char *>(p));
  if (!a)
    return -1;
  return static_cast<const char *>(p) + bytes <= a->begin + a->bytes ? 0 : 1;
}

const std::string &label_at(const void *p) {
  return g_label_names[size_t(label_id(static_cast<const char *>(p)))];
}

void count_gemm(const std::string &name, const void *const reads[], const size_t read_bytes[],
                int n_reads, const void *d, size_t written_bytes) {
  Counts &c = *counts_of(name, true);
  ++c.launches;
  for (int i = 0; i < n_reads; ++i)
    add(c, label_id(static_cast<const char *>(reads[i])), false, read_bytes[i]);
  add(c, label_id(static_cast<const char *>(d)), true, written_bytes);
}

Word *shared_shadow(size_t bytes) {
  g_shared_shadow.assign((bytes + 3) / 4 + 1, Word{});
  g_unwritten.clear();
  return g_shared_shadow.data();
}

std::string unwritten_shared_reads(const ThreadRun &t) {
  std::string why;
  for (const Unwritten &u : g_unwritten)
    if (t.shared_shadow[u.word].w_seg < t.block_seg) {
      why = thread_name(u.thread) + " reads " + Place{true, 0, t.shared_bytes, t.shared}(u.word) +
            ", which no thread of its block had written by the next __syncthreads or the end";
      break;
    }
  g_unwritten.clear();
  return why;
}

void set_shared_arena(const char *begin, size_t bytes) {
  g_arena = begin;
  g_arena_bytes = bytes;
}

uint32_t next_segment() { return ++g_segment; }

uint32_t next_launch() {
  if (g_segment > 0xf0000000u) { // before the numbers wrap: every shadow forgets, as new
    for (auto &[at, a] : g_allocations)
      a.shadow.reset();
    g_segment = 0;
    g_launch = 0;
  }
  return ++g_launch;
}

Counts *counts_of(const std::string &name, bool gemm) {
  Counts *&c = g_counts_by_name[name];
  if (!c) {
    g_counts.push_back(std::make_unique<Counts>());
    c = g_counts.back().get();
    c->name = name;
    c->gemm = gemm;
  }
  return c;
}

// ---- emulator.h
// ------------------------------------------------------------------------------------

void label_memory(const void *p, size_t bytes, const std::string &label) {
  std::lock_guard<std::recursive_mutex> lock(device_mutex());
  const char *begin = static_cast<const char *>(p), *end = begin + bytes;
  g_labels.erase(std::remove_if(g_labels.begin(), g_labels.end(),
                                [&](const Label &l) { return l.begin < end && begin < l.end; }),
                 g_labels.end());
  const auto it = std::find(g_label_names.begin(), g_label_names.end(), label);
  const int id = int(it - g_label_names.begin());
  if (it == g_label_names.end())
    g_label_names.push_back(label);
  g_labels.push_back({begin, end, id});
}

std::vector<Traffic> traffic() {
  std::lock_guard<std::recursive_mutex> lock(device_mutex());
  std::vector<Traffic> all;
  for (const auto &c : g_counts) {
    if (!c->launches)
      continue;
    Traffic t;
    t.name = c->name;
    t.gemm = c->gemm;
    t.launches = c->launches;
    for (size_t i = 0; i < c->by_label.size(); ++i) {
      const Bytes &b = c->by_label[i];
      t.all.read += b.read;
      t.all.written += b.written;
      if (b.read || b.written)
        t.labelled[g_label_names[i]] = b;
    }
    all.push_back(std::move(t));
  }
  return all;
}

void reset_traffic() {
  std::lock_guard<std::recursive_mutex> lock(device_mutex());
  for (auto &c : g_counts) {
    c->launches = 0;
    c->by_label.clear();
  }
}

} // namespace tarnn_emu

// ---- the instrumentation's callbacks
// ---------------------------------------------------------------

using tarnn_emu::access;

#define TARNN_EMU_CALLBACKS(PREFIX, SUFFIX, FORWARD)                                               \
  extern "C" void PREFIX##load1##SUFFIX(uintptr_t a) { FORWARD(load1, a) access(a, 1, false); }    \
  extern "C" void PREFIX##load2##SUFFIX(uintptr_t a) { FORWARD(load2, a) access(a, 2, false); }    \
  extern "C" void PREFIX##load4##SUFFIX(uintptr_t a) { FORWARD(load4, a) access(a, 4, false); }    \
  extern "C" void PREFIX##load8##SUFFIX(uintptr_t a) { FORWARD(load8, a) access(a, 8, false); }    \
  extern "C" void PREFIX##load16##SUFFIX(uintptr_t a) { FORWARD(load16, a) access(a, 16, false); } \
  extern "C" void PREFIX##store1##SUFFIX(uintptr_t a) { FORWARD(store1, a) access(a, 1, true); }   \
  extern "C" void PREFIX##store2##SUFFIX(uintptr_t a) { FORWARD(store2, a) access(a, 2, true); }   \
  extern "C" void PREFIX##store4##SUFFIX(uintptr_t a) { FORWARD(store4, a) access(a, 4, true); }   \
  extern "C" void PREFIX##store8##SUFFIX(uintptr_t a) { FORWARD(store8, a) access(a, 8, true); }   \
  extern "C" void PREFIX##store16##SUFFIX(uintptr_t a) {                                           \
    FORWARD(store16, a) access(a, 16, true);                                                       \
  }                                                                                                \
  extern "C" void PREFIX##loadN##SUFFIX(uintptr_t a, uintptr_t n) {                                \
    FORWARD(loadN, a, n) access(a, n, false);                                                      \
  }                                                                                                \
  extern "C" void PREFIX##storeN##SUFFIX(uintptr_t a, uintptr_t n) {                               \
    FORWARD(storeN, a, n) access(a, n, true);                                                      \
  }

#ifdef TARNN_EMU_ASAN
// AddressSanitizer's checks first (its report names the overrun), then the emulator's.
extern "C" {
void __asan_load1(uintptr_t);
void __asan_load2(uintptr_t);
void __asan_load4(uintptr_t);
void __asan_load8(uintptr_t);
void __asan_load16(uintptr_t);
void __asan_store1(uintptr_t);
void __asan_store2(uintptr_t);
void __asan_store4(uintptr_t);
void __asan_store8(uintptr_t);
void __asan_store16(uintptr_t);
void __asan_loadN(uintptr_t, uintptr_t);
void __asan_storeN(uintptr_t, uintptr_t);
void *__asan_memcpy(void *, const void *, uintptr_t);
void *__asan_memmove(void *, const void *, uintptr_t);
void *__asan_memset(void *, int, uintptr_t);
}
#define TARNN_EMU_ASAN_FIRST(check, ...) __asan_##check(__VA_ARGS__);
TARNN_EMU_CALLBACKS(__tarnn_emu_, , TARNN_EMU_ASAN_FIRST)
extern "C" void *__tarnn_emu_memcpy(void *d, const void *s, uintptr_t n) {
  access(reinterpret_cast<uintptr_t>(s), n, false);
  access(reinterpret_cast<uintptr_t>(d), n, true);
  return __asan_memcpy(d, s, n);
}
extern "C" void *__tarnn_emu_memmove(void *d, const void *s, uintptr_t n) {
  access(reinterpret_cast<uintptr_t>(s), n, false);
  access(reinterpret_cast<uintptr_t>(d), n, true);
  return __asan_memmove(d, s, n);
}
extern "C" void *__tarnn_emu_memset(void *d, int c, uintptr_t n) {
  access(reinterpret_cast<uintptr_t>(d), n, true);
  return __asan_memset(d, c, n);
}
#else
// The "kernel address sanitizer" form: its callbacks are the emulator's alone.
#define TARNN_EMU_NOTHING_FIRST(...)
TARNN_EMU_CALLBACKS(__asan_, _noabort, TARNN_EMU_NOTHING_FIRST)
extern "C" void __asan_handle_no_return() {}
extern "C" void __asan_before_dynamic_init(const char *) {}
extern "C" void __asan_after_dynamic_init() {}
#endif
