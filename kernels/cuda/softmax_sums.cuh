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

// exp(x - m) for shift = m * kLog2e (rounded once): 2^(x log2 e - shift).
__device__ __forceinline__ float exp_shifted(float x, float shift) { return exp2_ftz(fmaf(x, kLog2e, -shift)); }

// A thread's share of a row's max and sum, a group at a time (columns first_col .. + kVec; with
// kCheck only those < live count): mx is the largest value so far and `sum` holds its values'
// exp_shifted(x, thread_shift) with thread_shift = mx * kLog2e; when the group raises mx, the sum
// is rescaled to the new shift first. The group's exponentials are added in column order in fp32,
// then to the fp64 sum. Before a block sum, each thread's sum is rescaled to the row's shift
// (exp2_ftz(thread_shift - row_shift), 0 for a thread that saw no value).
template <bool kCheck, int kVec, typename Vec>
__device__ __forceinline__ void add_softmax_group(const Vec& xv, int first_col, int live, float& mx,
                                                  float& thread_shift, double& sum) {
  float group_max = mx;
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    if (!kCheck || first_col + i < live) group_max = fmaxf(group_max, xv[i]);
  }
  if (group_max > mx) {
    const float new_shift = group_max * kLog2e;
    sum *= static_cast<double>(exp2_ftz(thread_shift - new_shift));
    mx = group_max, thread_shift = new_shift;
  }
  float group = 0.0f;
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    if (!kCheck || first_col + i < live) group += exp_shifted(xv[i], thread_shift);
  }
  sum += static_cast<double>(group);
}

}  // namespace zt::cuda::detail
