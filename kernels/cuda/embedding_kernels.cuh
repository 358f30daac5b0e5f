// Embedding kernels on the GPU, device code only (launched by embedding.cu, which sorts the
// positions by token with CUB for the backward; run on the CPU by the SIMT emulation tests,
// tests/emulation/). All three move 16-byte groups of the activation's columns (4 of fp32, 8 of
// bf16; fp32 tables take the same columns in two float4) as vector accesses where the launcher
// found C a multiple of the group and every operand aligned16, else single elements; each
// element is summed in the same order either way. The activation (out, dout) is of storage type
// Act, float or bf16; the tables read by the forward of type P, float or bf16 working weights
// (with bf16 activations, check_param_dtype); the gradients are fp32 sums (docs/precision.md).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail::embedding {

constexpr int kThreads = 256;

// A thread per group of kVec columns of one (b, t) row (C % kVec == 0, so groups never straddle rows).
// Act is the activation storage type of out: the fp32 sum of the widened table rows, rounded once
// for bf16. wte holds vocabulary rows [row_begin, row_begin + rows): positions whose token lies
// elsewhere in [0, vocab) are left untouched (another chunk's), a token outside it writes NaN.
template <typename Act, typename P, int kVec>
__global__ void embedding_forward_kernel(Act* out, const std::int32_t* tokens, const P* wte, const P* wpe,
                                         std::int64_t BT, int T, int C, int vocab, int row_begin, int rows) {
  using Vec = detail::ActVec<P, kVec>;
  const std::int64_t groups = BT * C / kVec;
  for (std::int64_t q = blockIdx.x * std::int64_t{kThreads} + threadIdx.x; q < groups;
       q += std::int64_t{gridDim.x} * kThreads) {
    const std::int64_t i = q * kVec;
    const std::int64_t bt = i / C;
    const int c = static_cast<int>(i % C);
    const std::int32_t tok = tokens[bt];
    const int t = static_cast<int>(bt % T);
    detail::ActVec<Act, kVec> o;
    const int r = tok - row_begin;
    if (tok >= 0 && tok < vocab && (r < 0 || r >= rows)) continue;  // another chunk's row
    if (tok >= 0 && tok < vocab) {
      const Vec e = Vec::load(wte + std::int64_t{r} * C + c);
      if (wpe == nullptr) {  // no position table (rotary models)
#pragma unroll
        for (int k = 0; k < kVec; ++k) o[k] = e[k];
      } else {
        const Vec p = Vec::load(wpe + std::int64_t{t} * C + c);
#pragma unroll
        for (int k = 0; k < kVec; ++k) o[k] = e[k] + p[k];
      }
    } else {
#pragma unroll
      for (int k = 0; k < kVec; ++k) o[k] = NAN;
    }
    o.store(out + i);
  }
}

__global__ void iota_kernel(std::int32_t* v, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{kThreads} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * kThreads)
    v[i] = static_cast<std::int32_t>(i);
}

// run_end[tok] = one past the last sorted position of token tok's run, for every token present
// (in range); the entries of absent tokens are not written (and never read).
__global__ void run_ends_kernel(std::int32_t* run_end, const std::int32_t* sorted_tokens, std::int64_t BT, int vocab) {
  for (std::int64_t i = blockIdx.x * std::int64_t{kThreads} + threadIdx.x; i < BT;
       i += std::int64_t{gridDim.x} * kThreads) {
    const std::int32_t tok = sorted_tokens[i];
    if (tok >= 0 && tok < vocab && (i + 1 == BT || sorted_tokens[i + 1] != tok)) {
      run_end[tok] = static_cast<std::int32_t>(i + 1);
    }
  }
}

// Block i handles the run of equal tokens that starts at sorted position i (others exit at once);
// run_end (run_ends_kernel) says where it stops. Its threads own groups of kVec columns and walk
// the run in order: each dwte element is summed by one thread in (b, t) order, for either kVec.
// The run's positions come through shared memory kThreads at a time, so a thread's loads of
// successive dout rows do not wait on each other (a run is long for a small vocabulary: a common
// character's run holds thousands of positions), while the additions keep their order; the row is
// read and written back once per chunk. dout is of activation storage type Act, widened.
template <typename Act, int kVec>
__global__ void embedding_backward_wte(float* dwte, const Act* dout, const std::int32_t* sorted_tokens,
                                       const std::int32_t* sorted_positions, const std::int32_t* run_end, int C,
                                       int vocab, int row_begin, int rows) {
  using Vec = detail::FloatVec<kVec>;
  using GradVec = detail::ActVec<Act, kVec>;
  __shared__ std::int32_t positions[kThreads];
  const std::int64_t start = blockIdx.x;
  const std::int32_t tok = sorted_tokens[start];
  if (start > 0 && sorted_tokens[start - 1] == tok) return;  // not the start of a run (the whole block)
  if (tok < 0 || tok >= vocab || tok < row_begin || tok - row_begin >= rows) return;  // dwte holds other rows
  const std::int64_t end = run_end[tok];
  float* row = dwte + std::int64_t{tok - row_begin} * C;
  for (std::int64_t s = start; s < end; s += kThreads) {
    const int n = static_cast<int>(end - s < kThreads ? end - s : kThreads);
    __syncthreads();  // the previous chunk's readers are done with `positions`
    if (static_cast<int>(threadIdx.x) < n) positions[threadIdx.x] = sorted_positions[s + threadIdx.x];
    __syncthreads();
    for (int c = threadIdx.x * kVec; c < C; c += kThreads * kVec) {
      Vec acc = Vec::load(row + c);
#pragma unroll 4
      for (int j = 0; j < n; ++j) {
        const GradVec g = GradVec::load(dout + std::int64_t{positions[j]} * C + c);
#pragma unroll
        for (int k = 0; k < kVec; ++k) acc[k] += g[k];
      }
      acc.store(row + c);
    }
  }
}

// dwpe[t, :] += dout[b, t, :] for b in order; a thread per group of kVec elements of [T, C].
template <typename Act, int kVec>
__global__ void embedding_backward_wpe(float* dwpe, const Act* dout, int B, int T, int C) {
  using Vec = detail::FloatVec<kVec>;
  using GradVec = detail::ActVec<Act, kVec>;
  const std::int64_t n = std::int64_t{T} * C;
  for (std::int64_t i = (blockIdx.x * std::int64_t{kThreads} + threadIdx.x) * kVec; i < n;
       i += std::int64_t{gridDim.x} * kThreads * kVec) {
    Vec acc = Vec::load(dwpe + i);
    for (int b = 0; b < B; ++b) {
      const GradVec g = GradVec::load(dout + std::int64_t{b} * n + i);
#pragma unroll
      for (int k = 0; k < kVec; ++k) acc[k] += g[k];
    }
    acc.store(dwpe + i);
  }
}

}  // namespace zt::cuda::detail::embedding
