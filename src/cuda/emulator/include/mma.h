// The emulated device's tensor cores (src/cuda/emulator): the part of CUDA's <mma.h>
// (nvcuda::wmma) the kernels use, with the toolkit's names and signatures, so that a kernel's file
// compiles unchanged under nvcc (the toolkit's header) and in the emulated build (this one, on its
// include path only). What it has: 16 x 16 x 16 tiles of bf16 inputs, matrix_a and matrix_b each
// row- or column-major, and an fp32 accumulator; fragment (num_elements, x[]), fill_fragment,
// load_matrix_sync, store_matrix_sync, mma_sync. Anything else of <mma.h> does not compile here.
//
// Each call but fill_fragment is the warp's, as on a GPU: all 32 lanes call it together with the
// same arguments (wmma.cpp, through launch.cpp's warp_arrive): a lane that has exited or exits
// while the others wait, or that passes another pointer or ldm, fails the launch
// (cudaErrorLaunchFailure) naming the kernel and the lanes; so do lanes that never come (a
// deadlock: who waits where). A tile's pointer must be 256-bit (32-byte) aligned and ldm a
// multiple of 8 for bf16, of 4 for float (16 bytes), else cudaErrorMisalignedAddress. Outside a
// kernel the process aborts, saying so.
//
// A fragment holds 8 of the tile's 256 elements a lane (num_elements): lane l the elements
// 8l..8l+7, numbered in memory order for matrix_a and matrix_b (row r, column c of a row-major
// tile is element 16r + c; of a column-major one 16c + r) and by rows for the accumulator,
// whichever layout it is loaded or stored in. A GPU's split is opaque: code may apply one
// element-wise operation to all of x[], nothing that depends on where an element sits. Each lane
// loads and stores only its own elements, here in this header: compiled into the kernel's file,
// those accesses are checked and counted as the kernel's own (memory.cpp), so a tile's bytes
// count once (512 for bf16, 1,024 for fp32), each byte touched by exactly one lane.
//
// mma_sync: D = A B + C for the warp, computed once, by the lane that arrives last, from every
// lane's fragments: d[i][j] = c[i][j], then d[i][j] = fmaf(a[i][k], b[k][j], d[i][j]) for k = 0..15
// ascending, in fp32 (a product of two bf16 is exact). That is the emulated cuBLASLt's order (one
// fused multiply-add chain over k ascending per element, blas.cpp), so a kernel that chains its
// k-tiles in ascending order into one accumulator, starting from zero, gets the reference GEMM's
// bits on the emulated device (kernels/gemm_ref.h's linear_forward_ref over the bf16 values).
// A GPU's tensor cores sum in their own order: not these bits, within fp32's rounding of them.
#pragma once

#include <cstddef>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <type_traits>

namespace tarnn_emu {

// wmma.cpp. The running lane's part in `call` (load_matrix_sync or store_matrix_sync) of the tile
// at p, whose rows (columns if `column_major`) are ldm elements of `element_bytes` apart: it waits
// for the whole warp, which must pass the same; then the tile is checked as a GPU checks it.
// Returns the lane (0-31).
int wmma_tile(const char *call, const void *p, unsigned ldm, unsigned element_bytes,
              bool column_major);
// mma_sync's: every lane's fragments (8 elements each, as above), D = A B + C for the warp.
void wmma_mma(float *d, const __nv_bfloat16 *a, bool a_column_major, const __nv_bfloat16 *b,
              bool b_column_major, const float *c);

constexpr int kWmmaShare = 8; // the elements of a 16 x 16 tile one lane holds

// The lane's share of a tile at p: element e = 8 lane + i is at row e / 16, column e % 16 of
// the row-major view, or with `across` (an accumulator in mem_col_major) of the column-major one.
template <class T>
inline void wmma_load(const char *call, T *x, const T *p, unsigned ldm, bool column_major,
                      bool across) {
  const unsigned lane = unsigned(wmma_tile(call, p, ldm, sizeof(T), column_major));
  for (unsigned i = 0; i < kWmmaShare; ++i) {
    const unsigned e = lane * kWmmaShare + i, r = e / 16, c = e % 16;
    x[i] = across ? p[size_t(c) * ldm + r] : p[size_t(r) * ldm + c];
  }
}

template <class T> inline void wmma_store(T *p, const T *x, unsigned ldm, bool across) {
  const unsigned lane = unsigned(wmma_tile("wmma::store_matrix_sync", p, ldm, sizeof(T), across));
  for (unsigned i = 0; i < kWmmaShare; ++i) {
    const unsigned e = lane * kWmmaShare + i, r = e / 16, c = e % 16;
    (across ? p[size_t(c) * ldm + r] : p[size_t(r) * ldm + c]) = x[i];
  }
}

} // namespace tarnn_emu

namespace nvcuda {
namespace wmma {

struct row_major;
struct col_major;
struct matrix_a;
struct matrix_b;
struct accumulator;

enum layout_t { mem_row_major, mem_col_major };

template <typename T> struct helper_traits {
  typedef T element_type;
  typedef T storage_element_type;
  typedef T fill_argument_type;
};

template <typename T, int size, int packed_size = size> struct alignas(8) __frag_base {
  enum { num_elements = size };
  enum { num_storage_elements = packed_size };
  typedef T element_type;
  typedef typename helper_traits<T>::storage_element_type storage_element_type;
  storage_element_type x[num_storage_elements];
};

// Every element of the lane's fragment (each lane its own: not a collective call).
template <typename FragEleType, int size, int packed_size>
inline void fill_fragment(__frag_base<FragEleType, size, packed_size> &f,
                          const typename helper_traits<FragEleType>::fill_argument_type &in) {
  for (int i = 0; i < f.num_storage_elements; ++i)
    f.x[i] = in;
}

template <typename Use, int m, int n, int k, typename T, typename Layout = void> class fragment;

template <>
class fragment<matrix_a, 16, 16, 16, __nv_bfloat16, row_major>
    : public __frag_base<__nv_bfloat16, tarnn_emu::kWmmaShare> {};
template <>
class fragment<matrix_a, 16, 16, 16, __nv_bfloat16, col_major>
    : public __frag_base<__nv_bfloat16, tarnn_emu::kWmmaShare> {};
template <>
class fragment<matrix_b, 16, 16, 16, __nv_bfloat16, row_major>
    : public __frag_base<__nv_bfloat16, tarnn_emu::kWmmaShare> {};
template <>
class fragment<matrix_b, 16, 16, 16, __nv_bfloat16, col_major>
    : public __frag_base<__nv_bfloat16, tarnn_emu::kWmmaShare> {};
template <>
class fragment<accumulator, 16, 16, 16, float> : public __frag_base<float, tarnn_emu::kWmmaShare> {
};

} // namespace wmma
} // namespace nvcuda

namespace tarnn_emu { // (not in nvcuda::wmma: no name there that the toolkit's header lacks)
template <typename Use, typename Layout>
using bf16_tile = nvcuda::wmma::fragment<Use, 16, 16, 16, __nv_bfloat16, Layout>;
using float_tile = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>;
template <typename Layout>
constexpr bool kColumnMajor = std::is_same<Layout, nvcuda::wmma::col_major>::value;
} // namespace tarnn_emu

namespace nvcuda {
namespace wmma {

// (Templates over the tiles' layouts where the toolkit's header spells out each overload: the
// same calls compile, for the fragments above alone.)
template <typename Use, typename Layout>
inline void load_matrix_sync(tarnn_emu::bf16_tile<Use, Layout> &a, const __nv_bfloat16 *p,
                             unsigned ldm) {
  tarnn_emu::wmma_load("wmma::load_matrix_sync", a.x, p, ldm, tarnn_emu::kColumnMajor<Layout>,
                       false);
}
inline void load_matrix_sync(tarnn_emu::float_tile &a, const float *p, unsigned ldm,
                             layout_t layout) {
  const bool across = layout == mem_col_major;
  tarnn_emu::wmma_load("wmma::load_matrix_sync", a.x, p, ldm, across, across);
}

inline void store_matrix_sync(float *p, const tarnn_emu::float_tile &a, unsigned ldm,
                              layout_t layout) {
  tarnn_emu::wmma_store(p, a.x, ldm, layout == mem_col_major);
}

template <typename LayoutA, typename LayoutB>
inline void mma_sync(tarnn_emu::float_tile &d, const tarnn_emu::bf16_tile<matrix_a, LayoutA> &a,
                     const tarnn_emu::bf16_tile<matrix_b, LayoutB> &b,
                     const tarnn_emu::float_tile &c) {
  tarnn_emu::wmma_mma(d.x, a.x, tarnn_emu::kColumnMajor<LayoutA>, b.x,
                      tarnn_emu::kColumnMajor<LayoutB>, c.x);
}

} // namespace wmma
} // namespace nvcuda
