// Embeddings on the GPU. Backward without float atomics: positions are sorted by token with a
// stable radix sort (equal tokens keep (b, t) order), then a block per run of equal tokens adds
// the run's dout rows in that order into the token's dwte row; dwpe sums over b in order. All three
// kernels move groups of 4 columns as vector accesses where C % 4 == 0 and every operand is aligned
// to its group's width, else single elements; each element is summed in the same order either way.
// The activation (out, dout) is F32 or BF16 (docs/precision.md): out is the fp32 sum rounded once,
// dout is widened and the parameter gradients stay fp32 sums.
#include "kernels/cuda/embedding.h"

#include <initializer_list>

#include <cub/device/device_radix_sort.cuh>

#include "kernels/cpu/embedding.h"  // embedding_dims: the operand checks both backends share
#include "kernels/cuda/common.cuh"

namespace zt::cuda {

namespace {

constexpr int kThreads = 256;

// A thread per group of kVec columns of one (b, t) row (C % kVec == 0, so groups never straddle rows).
// Act is the activation storage type of out: the fp32 sum, rounded once for bf16.
template <typename Act, int kVec>
__global__ void embedding_forward_kernel(Act* out, const std::int32_t* tokens, const float* wte, const float* wpe,
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
    detail::ActVec<Act, kVec> o;
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
// one thread in (b, t) order, for either kVec. dout is of activation storage type Act, widened.
template <typename Act, int kVec>
__global__ void embedding_backward_wte(float* dwte, const Act* dout, const std::int32_t* sorted_tokens,
                                       const std::int32_t* sorted_positions, std::int64_t BT, int C, int vocab) {
  using Vec = detail::FloatVec<kVec>;
  using GradVec = detail::ActVec<Act, kVec>;
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
      const GradVec g = GradVec::load(dout + std::int64_t{sorted_positions[j]} * C + c);
#pragma unroll
      for (int k = 0; k < kVec; ++k) acc[k] += g[k];
    }
    acc.store(row + c);
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

// Groups of 4 need rows of whole groups (C % 4 == 0) and row starts aligned to the groups' width:
// 16 bytes for the fp32 parameters, act_vec4_aligned for the activation.
template <typename Act>
bool use_vec4(std::int64_t C, const Act* activation, std::initializer_list<const float*> params) {
  if (C % 4 != 0 || !detail::act_vec4_aligned(activation)) return false;
  for (const float* p : params) {
    if (!detail::aligned16(p)) return false;
  }
  return true;
}

using cpu::EmbeddingDims;

// The checked shapes, and (through activation_dtype, naming `op`) out_like's dtype: F32 or BF16.
// wte and wpe are parameters: F32, checked by embedding_dims.
EmbeddingDims check_dims(const char* op, const TensorView& out_like, const TensorView& tokens, const TensorView& wte,
                         const TensorView& wpe) {
  for (const TensorView* v : {&out_like, &tokens, &wte, &wpe}) detail::check_on_gpu(*v, "embedding operand");
  detail::activation_dtype(op, {out_like});
  const EmbeddingDims d = cpu::embedding_dims(out_like, tokens, wte, wpe);
  ZT_CHECK(d.B * d.T < (std::int64_t{1} << 31) && d.vocab < (std::int64_t{1} << 31), "embedding sizes exceed int32");
  return d;
}

}  // namespace

void embedding_forward(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte, TensorView wpe) {
  const cudaStream_t stream = detail::stream_of(ctx);
  const EmbeddingDims d = check_dims("embedding_forward", out, tokens, wte, wpe);
  if (out.numel() == 0) return;
  detail::dispatch_activation(out.dtype, [&](auto type) {
    using Act = typename decltype(type)::type;
    Act* o = detail::act_data<Act>(out);
    const bool vec = use_vec4(d.C, o, {wte.as<float>(), wpe.as<float>()});
    const auto kernel = vec ? embedding_forward_kernel<Act, 4> : embedding_forward_kernel<Act, 1>;
    kernel<<<detail::grid_for(out.numel() / (vec ? 4 : 1), kThreads), kThreads, 0, stream>>>(
        o, tokens.as<std::int32_t>(), wte.as<float>(), wpe.as<float>(), d.B * d.T, static_cast<int>(d.T),
        static_cast<int>(d.C), static_cast<int>(d.vocab));
  });
  ZT_CUDA_CHECK_LAUNCH();
}

void embedding_backward(const ExecContext& ctx, TensorView dwte, TensorView dwpe, TensorView dout, TensorView tokens) {
  const cudaStream_t stream = detail::stream_of(ctx);
  const EmbeddingDims d = check_dims("embedding_backward", dout, tokens, dwte, dwpe);
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
  detail::dispatch_activation(dout.dtype, [&](auto type) {
    using Act = typename decltype(type)::type;
    const Act* g = detail::act_data<Act>(dout);
    const bool vec = use_vec4(d.C, g, {dwte.as<float>(), dwpe.as<float>()});
    const auto wte_kernel = vec ? embedding_backward_wte<Act, 4> : embedding_backward_wte<Act, 1>;
    wte_kernel<<<static_cast<unsigned>(BT), kThreads, 0, stream>>>(dwte.as<float>(), g, sorted_tokens,
                                                                   sorted_positions, BT, static_cast<int>(d.C),
                                                                   static_cast<int>(d.vocab));
    ZT_CUDA_CHECK_LAUNCH();
    const auto wpe_kernel = vec ? embedding_backward_wpe<Act, 4> : embedding_backward_wpe<Act, 1>;
    wpe_kernel<<<detail::grid_for(d.T * d.C / (vec ? 4 : 1), kThreads), kThreads, 0, stream>>>(
        dwpe.as<float>(), g, static_cast<int>(d.B), static_cast<int>(d.T), static_cast<int>(d.C));
  });
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace zt::cuda
