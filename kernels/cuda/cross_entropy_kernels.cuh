// Softmax + cross-entropy kernels on the GPU, device code only (launched by cross_entropy.cu; run
// on the CPU by the SIMT emulation tests, tests/emulation/). One block per row: the max and the
// sum of the exponentials in one read (add_softmax_group, softmax_sums.cuh: a thread's running max, its sum rescaled
// when the max rises, then scaled to the row's max; fixed-order block reductions, the sum in fp64), then one write
// pass. The row (100 KB in bf16 at V = 50257) is read twice and stays in L2 between the passes, so DRAM sees about one
// read and one write of the logits (Llama 3's 250 KB rows, two blocks on each SM, hold more than the H200's L2). Rows
// move in 16-byte groups (4 columns of fp32, 8 of bf16), one vector access each (padded columns loaded but masked),
// where Vp is a multiple of the group and logits and output are aligned16, else one element at a time; the sums' order
// is fixed for either, so results repeat bitwise. logits/probs/dlogits are F32 or BF16 (docs/precision.md: bf16 widened
// on load, each output rounded once); losses are F32. [Note: the cross-entropy's instruction count] The fused kernel
// was bound by the instructions it issues, not by bytes: at 5d45fbb its SASS spent about 54 a column (expf's eleven
// twice, a conversion to fp64 and a double add a column, a bounds check a column, seven integer ops a bf16 store), an
// estimated 0.66 ms of issue on an H200 for [8192, 50304] bf16 against 0.39 ms of DRAM traffic; it measured 0.92 ms,
// and no faster with the row in shared memory. Now exp(x - max) is exp2_ftz(fma(x, log2 e, -max log2 e)) (two
// instructions), a group's exponentials are summed in fp32 and the group's sum added to the thread's fp64 sum, only the
// row's last group checks bounds, the target's gradient is written over its column instead of a compare a column, and
// bf16 stores pack two values an instruction: about 12 a column; and the max and the sum share a
// read of the row, which the first version read three times. The loss is -log of the target's
// probability as computed, log(sum) - ln 2 (x_t log2 e - max log2 e), in fp64.
// [Note: the row in shared memory] Where a row's live groups fit in shared memory with two blocks
// on an SM (bf16 rows of GPT-2's vocabulary: 98 KiB), kRowInSmem keeps the first pass's loads
// there and the write pass reads them back, so the logits cross L2 once instead of twice.
// Each thread reads back only the groups it stored itself, so no barrier is added, and the
// arithmetic is the same, value for value and in the same order: the results are bitwise those of
// the kernel that reads the row twice (tests/emulation checks it). Measured slower on the
// H200 at d650922 (1.074 against 0.916 ms), so not the default (CeRowCache).
#pragma once

#include <math.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/device_helpers.cuh"
#include "kernels/cuda/dynamic_smem.cuh"
#include "kernels/cuda/softmax_sums.cuh"

namespace zt::cuda::detail::ce {

constexpr int kThreads = 1024;  // a block per row

enum class Output { kProbs, kGradient };

// Dynamic shared memory of a kRowInSmem block: the row's live groups of kVec values of T.
template <typename T, int kVec>
constexpr std::size_t row_cache_bytes(int V) {
  return static_cast<std::size_t>((V + kVec - 1) / kVec) * kVec * sizeof(T);
}

// Writes probs (kProbs) or (probs - onehot) * dloss (kGradient) into out; losses[row] in both.
// Each thread owns the groups q = threadIdx.x, threadIdx.x + kThreads, ... of kVec columns of the
// padded row (Vp % kVec == 0); columns v >= V in the last live group are loaded but never enter
// max or sum, and are written 0 like the padding. T is the activation storage type of out and
// logits: widened on load, each output rounded once. kRowInSmem: launched with
// row_cache_bytes<T, kVec>(V) of dynamic shared memory ([Note: the row in shared memory]),
// budgeted for two blocks an SM, so ptxas is held to the 32 registers a thread that two blocks of
// 1024 threads allow. A row max above 2.3e38 (whose shift overflows) gives a NaN loss, which stops
// training as any non-finite loss does.
template <Output kOut, typename T, int kVec, bool kRowInSmem = false>
__global__ void __launch_bounds__(kThreads, 2)
    softmax_ce_kernel(float* losses, T* out, const T* logits, const std::int32_t* targets, int Vp, int V, float dloss) {
  using Vec = detail::ActVec<T, kVec>;
  __shared__ float shared_f[32];
  __shared__ double shared_d[32];
  const std::int64_t row = blockIdx.x;
  const T* x = logits + row * Vp;
  T* o = out + row * Vp;  // may be x: each group is read before the same thread writes it
  // Where the write pass reads the row: the cache the first pass fills, or the row itself.
  T* cache = kRowInSmem ? reinterpret_cast<T*>(detail::dynamic_shared_memory()) : nullptr;
  const T* again = kRowInSmem ? cache : x;
  const std::int32_t target = targets[row];
  const bool target_ok = target >= 0 && target < V;
  const float target_logit = target_ok ? detail::load_act(x + target) : NAN;  // read before any write to the row
  const int full_groups = V / kVec;                                           // groups whose columns are all < V
  const int live_groups = (V + kVec - 1) / kVec;                              // and the partial one after them, if any
  // One read for the max and the sum ([Note: the cross-entropy's instruction count]).
  float mx = -INFINITY, thread_shift = -INFINITY;
  double sum = 0.0;
  for (int q = threadIdx.x; q < live_groups; q += kThreads) {
    const Vec xv = Vec::load(x + q * kVec);
    if constexpr (kRowInSmem) xv.store(cache + q * kVec);  // values of T: stored back exactly
    if (q < full_groups) {
      detail::add_softmax_group<false, kVec>(xv, q * kVec, V, mx, thread_shift, sum);
    } else {
      detail::add_softmax_group<true, kVec>(xv, q * kVec, V, mx, thread_shift, sum);
    }
  }
  const float row_max = detail::block_max(mx, shared_f);
  const float shift = detail::shift_of(row_max);
  if (mx != row_max) sum *= static_cast<double>(detail::exp2_ftz(thread_shift - shift));  // to the row's max
  sum = detail::block_sum(sum, shared_d);
  // All threads have read target_logit and finished their reads of x in the passes above; the
  // block_sum barrier orders them before the writes below.
  const float inv_sum = static_cast<float>(1.0 / sum);
  const float scale = kOut == Output::kGradient ? inv_sum * dloss : inv_sum;
  const int target_group = kOut == Output::kGradient && target_ok ? target / kVec : -1;
  // The write pass sweeps the row from its end. The first pass read it from the start, so where the
  // rows in flight hold more than L2 (Llama 3's 250 KB rows, two blocks on every SM: about 66 MB
  // against the H200's 50 MB) the groups read last, the likeliest to be in L2 still, are read
  // again first, before this pass's own traffic evicts them. A group's outputs do not depend on
  // the order, so neither do the results.
  const int out_groups = Vp / kVec, tid = static_cast<int>(threadIdx.x);
  const int first_q = tid < out_groups ? tid + (out_groups - 1 - tid) / kThreads * kThreads : -1;
  for (int q = first_q; q >= 0; q -= kThreads) {
    Vec p{};  // padded columns stay 0
    if (q < full_groups) {
      const Vec xv = Vec::load(again + q * kVec);
#pragma unroll
      for (int i = 0; i < kVec; ++i) p[i] = detail::exp_shifted(xv[i], shift) * scale;
    } else if (q < live_groups) {
      const Vec xv = Vec::load(again + q * kVec);
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        if (q * kVec + i < V) p[i] = detail::exp_shifted(xv[i], shift) * scale;
      }
    }
    p.store_computed(o + q * kVec);
    // The target's gradient, (p - 1) * dloss with p rounded to fp32 first, written over its column
    // by the same thread (program order): cheaper than a compare a column, or than selecting its
    // slot in the group, which took registers the 32 of two blocks an SM do not have. The explicit
    // roundings keep nvcc from fusing p's product into the subtraction (an FFMA, seen in the PTX),
    // which the emulation tests, compiled without contraction, would not see.
    if (q == target_group) {
      const float p_target = __fmul_rn(detail::exp_shifted(target_logit, shift), inv_sum);
      detail::store_act(o + target, __fsub_rn(p_target, 1.0f) * dloss);
    }
  }
  if (threadIdx.x == 0) {
    // -log(p_target) for p_target = 2^(x_t log2 e - shift) / sum; x_t * kLog2e is exact in fp64.
    const double exponent =
        static_cast<double>(target_logit) * static_cast<double>(detail::kLog2e) - static_cast<double>(shift);
    losses[row] = static_cast<float>(log(sum) - detail::kLn2 * exponent);
  }
}

// Groups of kVec columns and storage type T as in softmax_ce_kernel.
template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads)
    softmax_ce_backward_kernel(T* dlogits, const T* probs, const std::int32_t* targets, int Vp, int V, float dloss) {
  using Vec = detail::ActVec<T, kVec>;
  __shared__ float target_prob;
  const std::int64_t row = blockIdx.x;
  const T* p = probs + row * Vp;
  T* d = dlogits + row * Vp;  // may alias p: the target's probability is read first
  const std::int32_t target = targets[row];
  if (threadIdx.x == 0) target_prob = (target >= 0 && target < V) ? detail::load_act(p + target) : NAN;
  __syncthreads();
  const int live_groups = (V + kVec - 1) / kVec;
  for (int q = threadIdx.x; q < Vp / kVec; q += kThreads) {
    Vec g{};  // padded columns stay 0
    if (q < live_groups) {
      const Vec pv = Vec::load(p + q * kVec);
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        const int v = q * kVec + i;
        if (v < V) g[i] = v == target ? (target_prob - 1.0f) * dloss : pv[i] * dloss;
      }
    }
    g.store(d + q * kVec);
  }
}

}  // namespace zt::cuda::detail::ce
