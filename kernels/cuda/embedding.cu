// Embeddings on the GPU. Backward without float atomics: positions are sorted by token with a
// stable radix sort (equal tokens keep (b, t) order), then a block per run of equal tokens adds
// the run's dout rows in that order into the token's dwte row; dwpe sums over b in order. All three
// kernels move 16-byte float4 column groups where C % 4 == 0 and their fp32 operands are 16-byte
// aligned, else single floats; each element is summed in the same order either way.
#include "kernels/cuda/embedding.h"

#include <initializer_list>

#include <cub/device/device_radix_sort.cuh>

#include "kernels/cpu/embedding.h"  // embedding_dims: the operand checks both backends share
#include "kernels/cuda/common.cuh"

namespace zt::cuda {

namespace {

constexpr int kThreads = 256;

// A thread per group of kVec columns of one (b, t) row (C % kVec == 0, so groups never straddle rows).
template <int kVec>
__global__ void embedding_forward_kernel(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                                         std::int64_t BT, int T, int C, int vocab) {
  using Vec = detail::FloatVec<kVec>;
  const std::int64_t groups = BT * C / kVec;
  for (std::int64_t q = blockIdx.x * std::int64_t{kThreads} + threadIdx.x; q < groups;
       q += std::int64_t{gridDim.x} * kThreads) {
    const std::int64_t i = q * kVec;
    const std::int64_t bt = i / C;
    const int c = static_cast<int>(i % C);
    const std::int32_t tok = tokens[bt];
    const int t = static_cast<int>(bt % T);
    Vec o;
    if (tok >= 0 && tok < vocab) {
      const Vec e = Vec::load(wte + std::int64_t{tok} * C + c), p = Vec::load(wpe + std::int64_t{t} * C + c);
#pragma unroll
      for (int k = 0; k < kVec; ++k) o[k] = e[k] + p[k];
    } else {
#pragma unroll
      for (int k = 0; k < kVec; ++k) o[k] = NAN;
    }
    o.store(out + i);
  }
}

__global__ void iota_kernel(std::int32_t* v, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{kThreads} + threadIdx.x; i < n; i += std::int64_t{gridDim.x} * kThreads)
    v[i] = static_cast<std::int32_t>(i);
}

// Block i handles the run of equal tokens that starts at sorted position i (others exit at once).
// Its threads own groups of kVec columns and walk the run in order: each dwte element is summed by
// one thread in (b, t) order, for either kVec.
template <int kVec>
__global__ void embedding_backward_wte(float* dwte, const float* dout, const std::int32_t* sorted_tokens,
                                       const std::int32_t* sorted_positions, std::int64_t BT, int C, int vocab) {
  using Vec = detail::FloatVec<kVec>;
  const std::int64_t start = blockIdx.x;
  const std::int32_t tok = sorted_tokens[start];
  if (start > 0 && sorted_tokens[start - 1] == tok) return;  // not the start of a run
  if (tok < 0 || tok >= vocab) return;
  std::int64_t end = start + 1;
  while (end < BT && sorted_tokens[end] == tok) ++end;
  float* row = dwte + std::int64_t{tok} * C;
  for (int c = threadIdx.x * kVec; c < C; c += kThreads * kVec) {
    Vec acc = Vec::load(row + c);
    for (std::int64_t j = start; j < end; ++j) {
      const Vec g = Vec::load(dout + std::int64_t{sorted_positions[j]} * C + c);
#pragma unroll
      for (int k = 0; k < kVec; ++k) acc[k] += g[k];
    }
    acc.store(row + c);
  }
}

// dwpe[t, :] += dout[b, t, :] for b in order; a thread per group of kVec elements of [T, C].
template <int kVec>
__global__ void embedding_backward_wpe(float* dwpe, const float* dout, int B, int T, int C) {
  using Vec = detail::FloatVec<kVec>;
  const std::int64_t n = std::int64_t{T} * C;
  for (std::int64_t i = (blockIdx.x * std::int64_t{kThreads} + threadIdx.x) * kVec; i < n;
       i += std::int64_t{gridDim.x} * kThreads * kVec) {
    Vec acc = Vec::load(dwpe + i);
    for (int b = 0; b < B; ++b) {
      const Vec g = Vec::load(dout + std::int64_t{b} * n + i);
#pragma unroll
      for (int k = 0; k < kVec; ++k) acc[k] += g[k];
    }
    acc.store(dwpe + i);
  }
}

// 16-byte groups need rows of whole groups (C % 4 == 0) and aligned row starts.
bool use_vec4(std::int64_t C, std::initializer_list<const void*> pointers) {
  if (C % 4 != 0) return false;
  for (const void* p : pointers) {
    if (!detail::aligned16(p)) return false;
  }
  return true;
}

using cpu::EmbeddingDims;

EmbeddingDims check_dims(const TensorView& out_like, const TensorView& tokens, const TensorView& wte,
                         const TensorView& wpe) {
  for (const TensorView* v : {&out_like, &tokens, &wte, &wpe}) detail::check_on_gpu(*v, "embedding operand");
  const EmbeddingDims d = cpu::embedding_dims(out_like, tokens, wte, wpe);
  ZT_CHECK(d.B * d.T < (std::int64_t{1} << 31) && d.vocab < (std::int64_t{1} << 31), "embedding sizes exceed int32");
  return d;
}

}  // namespace

void embedding_forward(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte, TensorView wpe) {
  const cudaStream_t stream = detail::stream_of(ctx);
  const EmbeddingDims d = check_dims(out, tokens, wte, wpe);
  if (out.numel() == 0) return;
  const bool vec = use_vec4(d.C, {out.data, wte.data, wpe.data});
  const auto kernel = vec ? embedding_forward_kernel<4> : embedding_forward_kernel<1>;
  kernel<<<detail::grid_for(out.numel() / (vec ? 4 : 1), kThreads), kThreads, 0, stream>>>(
      out.as<float>(), tokens.as<std::int32_t>(), wte.as<float>(), wpe.as<float>(), d.B * d.T,
      static_cast<int>(d.T), static_cast<int>(d.C), static_cast<int>(d.vocab));
  ZT_CUDA_CHECK_LAUNCH();
}

void embedding_backward(const ExecContext& ctx, TensorView dwte, TensorView dwpe, TensorView dout, TensorView tokens) {
  const cudaStream_t stream = detail::stream_of(ctx);
  const EmbeddingDims d = check_dims(dout, tokens, dwte, dwpe);
  const std::int64_t BT = d.B * d.T;
  if (BT == 0) return;
  KernelResources& res = detail::resources_of(ctx);
  const int n = static_cast<int>(BT);
  // All 32 key bits: sorting on fewer would let an out-of-range token interleave with a valid run
  // and split it into two runs written by two blocks (a race). 16k keys sort in microseconds anyway.
  const int end_bit = 32;
  // Sort (token, position) pairs by token; the radix sort is stable, so positions stay in order.
  Buffer positions = res.scratch(DType::kI32, BT);
  Buffer sorted = res.scratch(DType::kI32, 2 * BT);  // sorted tokens, then their positions
  iota_kernel<<<detail::grid_for(BT, kThreads), kThreads, 0, stream>>>(positions.as<std::int32_t>(), BT);
  ZT_CUDA_CHECK_LAUNCH();
  std::int32_t* sorted_tokens = sorted.as<std::int32_t>();
  std::int32_t* sorted_positions = sorted_tokens + BT;
  std::size_t temp_bytes = 0;
  ZT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, tokens.as<std::int32_t>(), sorted_tokens,
                                                positions.as<std::int32_t>(), sorted_positions, n, 0, end_bit, stream));
  Buffer temp = res.scratch(DType::kU16, static_cast<std::int64_t>((temp_bytes + 1) / 2));
  ZT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), temp_bytes, tokens.as<std::int32_t>(), sorted_tokens,
                                                positions.as<std::int32_t>(), sorted_positions, n, 0, end_bit, stream));
  const bool vec = use_vec4(d.C, {dwte.data, dwpe.data, dout.data});
  const auto wte_kernel = vec ? embedding_backward_wte<4> : embedding_backward_wte<1>;
  wte_kernel<<<static_cast<unsigned>(BT), kThreads, 0, stream>>>(
      dwte.as<float>(), dout.as<float>(), sorted_tokens, sorted_positions, BT, static_cast<int>(d.C),
      static_cast<int>(d.vocab));
  ZT_CUDA_CHECK_LAUNCH();
  const auto wpe_kernel = vec ? embedding_backward_wpe<4> : embedding_backward_wpe<1>;
  wpe_kernel<<<detail::grid_for(d.T * d.C / (vec ? 4 : 1), kThreads), kThreads, 0, stream>>>(
      dwpe.as<float>(), dout.as<float>(), static_cast<int>(d.B), static_cast<int>(d.T), static_cast<int>(d.C));
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace zt::cuda
