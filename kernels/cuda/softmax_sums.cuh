// What the cross-entropy kernels (cross_entropy_kernels.cuh, chunked_cross_entropy_kernels.cuh)
// share, device code only: exp(x - max) as one FFMA and the hardware's base-2 exponential, and a
// thread's share of a row's max and sum of exponentials taken in one read ([Note: the
// cross-entropy's instruction count] in cross_entropy_kernels.cuh).
#pragma once

#include <math.h>

#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail {

constexpr float kLog2e = 1.44269504088896340736f;  // rounds to the fp32 nearest log2(e)
constexpr double kLn2 = 0.69314718055994530942;

// The shift of a max m: m * kLog2e rounded once, never fused into a neighbouring add (nvcc would
// contract `a - m * kLog2e`, which the emulator's -ffp-contract=off does not), so every use of one
// max's shift is the same value.
__device__ __forceinline__ float shift_of(float m) { return __fmul_rn(m, kLog2e); }

// exp(x - m) for shift = shift_of(m): 2^(x log2 e - shift).
__device__ __forceinline__ float exp_shifted(float x, float shift) { return exp2_ftz(fmaf(x, kLog2e, -shift)); }

// A thread's share of a row's max and sum, a group at a time (columns first_col .. + kVec; with
// kCheck only those < live count): mx is the largest value so far and `sum` holds its values'
// exp_shifted(x, thread_shift) with thread_shift = shift_of(mx); when the group raises mx, the sum
// is rescaled to the new shift first. The group's exponentials are added in column order in fp32,
// then to the fp64 sum. While mx is still -inf (every value so far -inf), the group's -inf values
// add exp2(-inf) = 0, as exp(x - max) does for them once a finite max exists (with the shift of
// -inf itself, fma(-inf, log2 e, +inf) would be NaN). Before a block sum, each thread's sum is
// rescaled to the row's shift (exp2_ftz(thread_shift - row_shift), 0 for a thread that saw no
// finite value).
template <bool kCheck, int kVec, typename Vec>
__device__ __forceinline__ void add_softmax_group(const Vec& xv, int first_col, int live, float& mx,
                                                  float& thread_shift, double& sum) {
  float group_max = mx;
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    if (!kCheck || first_col + i < live) group_max = fmaxf(group_max, xv[i]);
  }
  if (group_max > mx) {
    const float new_shift = shift_of(group_max);
    sum *= static_cast<double>(exp2_ftz(thread_shift - new_shift));
    mx = group_max, thread_shift = new_shift;
  }
  const float shift = mx == -INFINITY ? 0.0f : thread_shift;
  float group = 0.0f;
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    if (!kCheck || first_col + i < live) group += exp_shifted(xv[i], shift);
  }
  sum += static_cast<double>(group);
}

}  // namespace zt::cuda::detail
