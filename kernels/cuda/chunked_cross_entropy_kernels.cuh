// Chunked softmax + cross-entropy kernels on the GPU, device code only (launched by
// chunked_cross_entropy.cu; run on the CPU by tests/emulation). One block per row of the chunk
// [N, Vc] (columns begin .. begin + Vc of the logits): the stats kernel takes the chunk's max over
// its real columns and the sum of exp(x - new max) in one read (add_softmax_group, softmax_sums.cuh:
// 2^(x log2 e - shift_of(max)); block reductions in a fixed order, the sum in fp64), rescales the
// running sum to the new max's shift and keeps the target's logit; the backward writes
// (exp(x - lse) - onehot) * dloss, padding 0, the exponential as the whole-row kernel takes it and
// the target's column written over after its group ([Note: the cross-entropy's instruction count]
// in cross_entropy_kernels.cuh). Columns move in groups of kVec (16 bytes where the launcher found
// whole groups and aligned rows), and the sums' order is fixed, so results repeat bitwise.
// Semantics: kernels/cpu/chunked_cross_entropy.h.
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/cuda/device_helpers.cuh"
#include "kernels/cuda/softmax_sums.cuh"

namespace zt::cuda::detail::chunked_ce {

constexpr int kThreads = 512;

template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads)
    chunk_stats_kernel(float* row_max, float* row_sum, float* target_logit, const T* logits,
                       const std::int32_t* targets, int cols, int live, std::int64_t begin, int vocab, bool first) {
  using Vec = detail::ActVec<T, kVec>;
  __shared__ float shared_f[32];
  __shared__ double shared_d[32];
  const std::int64_t row = blockIdx.x;
  const T* x = logits + row * cols;
  const std::int64_t t = targets[row] - begin;
  if (threadIdx.x == 0) {
    // A target outside the vocabulary (not checked on the host: that needs a sync) makes the
    // row's loss NaN, as the whole-row kernel does, so the trainer's non-finite check stops the run.
    const bool target_ok = targets[row] >= 0 && targets[row] < vocab;
    if (first) target_logit[row] = target_ok ? 0.0f : NAN;
    if (target_ok && t >= 0 && t < live) target_logit[row] = detail::load_act(x + t);
  }
  if (live == 0) {
    if (first && threadIdx.x == 0) row_max[row] = -INFINITY, row_sum[row] = 0.0f;
    return;
  }
  const int full_groups = live / kVec, live_groups = (live + kVec - 1) / kVec;
  float mx = -INFINITY, thread_shift = -INFINITY;  // the chunk's max and sum in one read
  double sum = 0.0;
  for (int q = threadIdx.x; q < live_groups; q += kThreads) {
    const Vec xv = Vec::load(x + q * kVec);
    if (q < full_groups) {
      detail::add_softmax_group<false, kVec>(xv, q * kVec, live, mx, thread_shift, sum);
    } else {
      detail::add_softmax_group<true, kVec>(xv, q * kVec, live, mx, thread_shift, sum);
    }
  }
  const float chunk_max = detail::block_max(mx, shared_f);
  const float old_max = first ? -INFINITY : row_max[row];  // read by every thread before thread 0 writes
  const float new_max = fmaxf(old_max, chunk_max);
  if (mx != new_max) sum *= static_cast<double>(detail::exp2_ftz(thread_shift - detail::shift_of(new_max)));
  sum = detail::block_sum(sum, shared_d);  // its barriers order every thread's read of row_max first
  if (threadIdx.x == 0) {
    // row_sum is a sum of 2^(x log2 e - shift_of(max)), so it moves to the new max's shift by the
    // difference of the two shifts (not of the maxes: each shift is rounded once, and the loss and lse
    // below read the sum against its own shift). Nothing carried while every earlier logit was -inf
    // (its sum is 0; -inf - -inf is NaN).
    const double carried =
        first || old_max == -INFINITY
            ? 0.0
            : static_cast<double>(row_sum[row]) *
                  exp2(static_cast<double>(detail::shift_of(old_max)) - static_cast<double>(detail::shift_of(new_max)));
    row_sum[row] = static_cast<float>(carried + sum);
    row_max[row] = new_max;
  }
}

// losses and lse per row (one thread each); lse may alias row_max.
__global__ void chunk_loss_kernel(float* losses, float* lse, const float* row_max, const float* row_sum,
                                  const float* target_logit, std::int64_t rows) {
  const std::int64_t n = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= rows) return;
  // The sum is of 2^(x log2 e - shift): lse = shift ln 2 + log(sum), and the loss lse - x_t as the
  // whole-row kernel takes it (x_t * kLog2e is exact in fp64).
  const double log_sum = log(static_cast<double>(row_sum[n]));
  const double shift = detail::shift_of(row_max[n]);
  const double exponent = static_cast<double>(target_logit[n]) * static_cast<double>(detail::kLog2e) - shift;
  losses[n] = static_cast<float>(log_sum - detail::kLn2 * exponent);
  lse[n] = static_cast<float>(detail::kLn2 * shift + log_sum);
}

template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads)
    chunk_backward_kernel(T* dlogits, const T* logits, const float* lse, const std::int32_t* targets, int cols,
                          int live, std::int64_t begin, float dloss) {
  using Vec = detail::ActVec<T, kVec>;
  const std::int64_t row = blockIdx.x;
  const T* x = logits + row * cols;
  T* d = dlogits + row * cols;                         // may be x: each group is read before the same thread writes it
  const float lse_shift = detail::shift_of(lse[row]);  // p = exp(x - lse) = exp_shifted(x, lse_shift)
  const std::int64_t t = targets[row] - begin;
  const int full_groups = live / kVec, live_groups = (live + kVec - 1) / kVec;
  const std::int64_t target_group = t >= 0 && t < live ? t / kVec : -1;
  for (int q = threadIdx.x; q < cols / kVec; q += kThreads) {
    Vec g{};  // padded columns stay 0
    if (q < full_groups) {
      const Vec xv = Vec::load(x + q * kVec);
#pragma unroll
      for (int i = 0; i < kVec; ++i) g[i] = detail::exp_shifted(xv[i], lse_shift) * dloss;
    } else if (q < live_groups) {
      const Vec xv = Vec::load(x + q * kVec);
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        if (q * kVec + i < live) g[i] = detail::exp_shifted(xv[i], lse_shift) * dloss;
      }
    }
    // The target's logit read by the thread that owns its group, before that thread's store.
    const float target_x = q == target_group ? detail::load_act(x + t) : 0.0f;
    g.store_computed(d + q * kVec);
    // The target's gradient written over its column (the same thread, in program order).
    if (q == target_group) detail::store_act(d + t, (detail::exp_shifted(target_x, lse_shift) - 1.0f) * dloss);
  }
}

}  // namespace zt::cuda::detail::chunked_ce
