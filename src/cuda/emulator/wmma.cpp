// The emulated device's tensor cores: the warp-collective side of include/mma.h (what the calls
// are, and each lane's share of a tile, are said there). Every call waits for the whole warp in
// launch.cpp's warp_arrive, as __shfl_xor_sync does; the lane that arrives last checks the warp's
// arguments (and, for mma_sync, computes D for the warp) before any lane goes on. This file is not
// instrumented: gathering the lanes' fragments from their stacks is the emulator's own work, as a
// GPU's register file is; the tiles' loads and stores are the kernel's (mma.h).
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <mma.h>
#include <string>

#include "device.h"

namespace tarnn_emu {

namespace {

constexpr int kWarp = 32, kTile = 16;

std::string hex(const void *p) {
  char s[32];
  std::snprintf(s, sizeof s, "%p", p);
  return s;
}

// A lane's arguments to load_matrix_sync or store_matrix_sync, on its stack while it waits.
struct TileCall {
  const void *p;
  unsigned ldm, element_bytes;
  bool column_major;
  bool operator==(const TileCall &o) const {
    return p == o.p && ldm == o.ldm && element_bytes == o.element_bytes &&
           column_major == o.column_major;
  }
  std::string said() const {
    return "pointer " + hex(p) + ", ldm " + std::to_string(ldm) +
           (column_major ? ", column-major" : "");
  }
};

// lane `l` of the running thread's warp, for a message: "lane 3 (thread (3, 0, 0) of block ...)"
std::string lane_name(int lane, int l) {
  return "lane " + std::to_string(l) + " (" + thread_name(uint16_t(tl_thread->thread - lane + l)) +
         ")";
}

// Every lane of the warp passed what lane 0 did (the last lane to arrive checks, once a call).
template <class Call> void same_in_every_lane(const char *call, const WarpArrival &in) {
  const Call &first = *reinterpret_cast<const Call *>(in.values[0]);
  for (int l = 1; l < kWarp; ++l) {
    const Call &other = *reinterpret_cast<const Call *>(in.values[l]);
    if (!(other == first))
      kernel_fault(cudaErrorLaunchFailure, std::string("completes its warp's ") + call +
                                               ", in which " + lane_name(in.lane, l) + " passed " +
                                               other.said() + " and " + lane_name(in.lane, 0) +
                                               " " + first.said() +
                                               ": every lane must pass the same");
  }
}

// What a GPU refuses of a tile (CUDA's wmma documentation: mptr 256-bit aligned, ldm a multiple
// of 8 for 16-bit elements and of 4 for 32-bit ones).
void check_tile(const char *call, const TileCall &t) {
  const uintptr_t off = reinterpret_cast<uintptr_t>(t.p) % 32;
  if (off)
    kernel_fault(cudaErrorMisalignedAddress, std::string("and its warp call ") + call +
                                                 " with a pointer " + std::to_string(off) +
                                                 " bytes past a 32-byte boundary (" + hex(t.p) +
                                                 "): a tile must be 256-bit aligned");
  if (t.ldm * t.element_bytes % 16)
    kernel_fault(cudaErrorMisalignedAddress,
                 std::string("and its warp call ") + call + " with ldm " + std::to_string(t.ldm) +
                     ": a multiple of " + std::to_string(16 / t.element_bytes) + " for " +
                     std::to_string(8 * t.element_bytes) + "-bit elements");
}

// A lane's operands of mma_sync.
struct MmaCall {
  float *d;
  const __nv_bfloat16 *a, *b;
  const float *c;
  bool a_column_major, b_column_major;
  bool operator==(const MmaCall &o) const {
    return a_column_major == o.a_column_major && b_column_major == o.b_column_major;
  }
  std::string said() const {
    return std::string("A ") + (a_column_major ? "column" : "row") + "-major, B " +
           (b_column_major ? "column" : "row") + "-major";
  }
};

// D = A B + C from the 32 lanes' fragments: every C gathered before any D is written (d and c
// may be one fragment), each element one fma chain over k ascending.
void multiply(const WarpArrival &in) {
  float a[kTile][kTile], b[kTile][kTile], d[kTile][kTile];
  for (int l = 0; l < kWarp; ++l) {
    const MmaCall &m = *reinterpret_cast<const MmaCall *>(in.values[l]);
    for (int i = 0; i < kWmmaShare; ++i) {
      const int e = l * kWmmaShare + i, major = e / kTile, minor = e % kTile;
      // element e in memory order: A[row][k] row-major, B[k][column] row-major, or transposed
      (m.a_column_major ? a[minor][major] : a[major][minor]) = __bfloat162float(m.a[i]);
      (m.b_column_major ? b[minor][major] : b[major][minor]) = __bfloat162float(m.b[i]);
      d[major][minor] = m.c[i];
    }
  }
  for (int i = 0; i < kTile; ++i)
    for (int j = 0; j < kTile; ++j)
      for (int k = 0; k < kTile; ++k)
        d[i][j] = std::fma(a[i][k], b[k][j], d[i][j]);
  for (int l = 0; l < kWarp; ++l) {
    const MmaCall &m = *reinterpret_cast<const MmaCall *>(in.values[l]);
    for (int i = 0; i < kWmmaShare; ++i) {
      const int e = l * kWmmaShare + i;
      m.d[i] = d[e / kTile][e % kTile];
    }
  }
}

} // namespace

int wmma_tile(const char *call, const void *p, unsigned ldm, unsigned element_bytes,
              bool column_major) {
  const TileCall mine{p, ldm, element_bytes, column_major};
  const WarpArrival in = warp_arrive(call, ~0u, reinterpret_cast<uintptr_t>(&mine));
  if (in.last) {
    Quiet quiet(tl_thread);
    same_in_every_lane<TileCall>(call, in);
    check_tile(call, mine);
  }
  return in.lane;
}

void wmma_mma(float *d, const __nv_bfloat16 *a, bool a_column_major, const __nv_bfloat16 *b,
              bool b_column_major, const float *c) {
  const MmaCall mine{d, a, b, c, a_column_major, b_column_major};
  const WarpArrival in = warp_arrive("wmma::mma_sync", ~0u, reinterpret_cast<uintptr_t>(&mine));
  if (in.last) {
    Quiet quiet(tl_thread);
    same_in_every_lane<MmaCall>("wmma::mma_sync", in);
    multiply(in);
  }
}

} // namespace tarnn_emu
