// Stand-in for <mma.h> (nvcuda::wmma) under the SIMT emulator: 16 x 16 x 16 tiles with bf16 or
// fp32 elements, worked on by the warp's lane 0 ([Note: SIMT emulation] in simt_runtime.h). Loads
// and stores check the documented rules first: a 256-bit aligned pointer and a leading dimension
// that is a multiple of 16 bytes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

// The whole tile, meaningful in lane 0 only.
template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulator has 16 x 16 x 16 tiles only");
  float v[16][16];
};

namespace emulated {

inline bool lane0() { return threadIdx.x % 32 == 0; }

inline float widen(float x) { return x; }
inline float widen(__nv_bfloat16 x) { return __uint_as_float(static_cast<unsigned>(x.bits) << 16); }

template <typename T>
void check_rules(const T* p, unsigned ldm, const char* op) {
  if (reinterpret_cast<std::uintptr_t>(p) % 32 != 0 || (ldm * sizeof(T)) % 16 != 0) {
    char msg[160];
    std::snprintf(msg, sizeof(msg), "%s: pointer %p (must be 32-byte aligned), ldm %u x %zu bytes (multiple of 16)", op,
                  static_cast<const void*>(p), ldm, sizeof(T));
    simt::report_violation(msg);
  }
}

}  // namespace emulated

template <typename Use, typename T, typename Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f, float value) {
  for (auto& row : f.v)
    for (float& x : row) x = value;
}

// A or B operand: the layout is part of the fragment's type.
template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const T* p, unsigned ldm) {
  static_assert(std::is_same_v<Layout, row_major> || std::is_same_v<Layout, col_major>);
  emulated::check_rules(p, ldm, "load_matrix_sync");
  if (!emulated::lane0()) return;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      f.v[r][c] = emulated::widen(std::is_same_v<Layout, row_major> ? p[r * ldm + c] : p[c * ldm + r]);
}

// Accumulator: the layout is an argument.
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ldm, layout_t l) {
  emulated::check_rules(p, ldm, "load_matrix_sync (accumulator)");
  if (!emulated::lane0()) return;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) f.v[r][c] = l == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm, layout_t l) {
  emulated::check_rules(p, ldm, "store_matrix_sync");
  if (!emulated::lane0()) return;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) (l == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.v[r][c];
}

// d = a b + c in fp32 (bf16 products are exact in fp32); d may be c.
template <typename T, typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, T, LayoutA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LayoutB>& b, const fragment<accumulator, 16, 16, 16, float>& c) {
  if (!emulated::lane0()) return;
  float out[16][16];
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 16; ++n) {
      float s = c.v[r][n];
      for (int k = 0; k < 16; ++k) s += a.v[r][k] * b.v[k][n];
      out[r][n] = s;
    }
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 16; ++n) d.v[r][n] = out[r][n];
}

}  // namespace nvcuda::wmma
