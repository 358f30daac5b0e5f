// Embeddings on the GPU. Backward without float atomics: positions are sorted by token with a
// stable radix sort (equal tokens keep (b, t) order), then a block per run of equal tokens adds
// the run's dout rows in that order into the token's dwte row; dwpe sums over b in order.
#include "kernels/cuda/embedding.h"

#include <cub/device/device_radix_sort.cuh>

#include "kernels/cpu/embedding.h"  // embedding_dims: the operand checks both backends share
#include "kernels/cuda/common.cuh"

namespace zt::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void embedding_forward_kernel(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                                         std::int64_t BT, int T, int C, int vocab) {
  const std::int64_t n = BT * C;
  for (std::int64_t i = blockIdx.x * std::int64_t{kThreads} + threadIdx.x; i < n; i += std::int64_t{gridDim.x} * kThreads) {
    const std::int64_t bt = i / C;
    const int c = static_cast<int>(i % C);
    const std::int32_t tok = tokens[bt];
    const int t = static_cast<int>(bt % T);
    out[i] = (tok >= 0 && tok < vocab) ? wte[std::int64_t{tok} * C + c] + wpe[std::int64_t{t} * C + c] : NAN;
  }
}

__global__ void iota_kernel(std::int32_t* v, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{kThreads} + threadIdx.x; i < n; i += std::int64_t{gridDim.x} * kThreads)
    v[i] = static_cast<std::int32_t>(i);
}

// Block i handles the run of equal tokens that starts at sorted position i (others exit at once).
// Its threads own columns and walk the run in order: one thread per dwte element, fixed order.
__global__ void embedding_backward_wte(float* dwte, const float* dout, const std::int32_t* sorted_tokens,
                                       const std::int32_t* sorted_positions, std::int64_t BT, int C, int vocab) {
  const std::int64_t start = blockIdx.x;
  const std::int32_t tok = sorted_tokens[start];
  if (start > 0 && sorted_tokens[start - 1] == tok) return;  // not the start of a run
  if (tok < 0 || tok >= vocab) return;
  std::int64_t end = start + 1;
  while (end < BT && sorted_tokens[end] == tok) ++end;
  float* row = dwte + std::int64_t{tok} * C;
  for (int c = threadIdx.x; c < C; c += kThreads) {
    float acc = row[c];
    for (std::int64_t j = start; j < end; ++j) acc += dout[std::int64_t{sorted_positions[j]} * C + c];
    row[c] = acc;
  }
}

__global__ void embedding_backward_wpe(float* dwpe, const float* dout, int B, int T, int C) {
  const std::int64_t n = std::int64_t{T} * C;
  for (std::int64_t i = blockIdx.x * std::int64_t{kThreads} + threadIdx.x; i < n; i += std::int64_t{gridDim.x} * kThreads) {
    float acc = dwpe[i];
    for (int b = 0; b < B; ++b) acc += dout[std::int64_t{b} * n + i];
    dwpe[i] = acc;
  }
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
  embedding_forward_kernel<<<detail::grid_for(out.numel(), kThreads), kThreads, 0, stream>>>(
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
  embedding_backward_wte<<<static_cast<unsigned>(BT), kThreads, 0, stream>>>(
      dwte.as<float>(), dout.as<float>(), sorted_tokens, sorted_positions, BT, static_cast<int>(d.C),
      static_cast<int>(d.vocab));
  ZT_CUDA_CHECK_LAUNCH();
  embedding_backward_wpe<<<detail::grid_for(d.T * d.C, kThreads), kThreads, 0, stream>>>(
      dwpe.as<float>(), dout.as<float>(), static_cast<int>(d.B), static_cast<int>(d.T), static_cast<int>(d.C));
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace zt::cuda
