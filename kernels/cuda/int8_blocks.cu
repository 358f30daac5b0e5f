// Blockwise int8 quantization on the GPU: checks and launches of int8_blocks_kernels.cuh.
#include "kernels/cuda/int8_blocks.h"

#include "kernels/contracts/int8_blocks.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/int8_blocks_kernels.cuh"

namespace zt::cuda {

namespace {

using detail::int8q::kThreads;

void check_packed(const TensorView& packed, std::int64_t n, const char* op) {
  detail::check_on_gpu(packed, "packed");
  ZT_CHECK(packed.dtype == DType::kI32 && packed.numel() == int8_blocks::packed_words(n),
           "{}: packed form of {} values must be I32 [{}], got {} [{}]", op, n, int8_blocks::packed_words(n),
           dtype_name(packed.dtype), packed.numel());
}

}  // namespace

void quantize_int8_blocks(const ExecContext& ctx, TensorView src, TensorView packed) {
  const cudaStream_t stream = detail::stream_of(ctx);
  detail::check_on_gpu(src, "src");
  const std::int64_t n = src.numel();
  check_packed(packed, n, "quantize_int8_blocks");
  if (n == 0) return;
  auto* scales = static_cast<float*>(packed.data);
  auto* codes = reinterpret_cast<std::int8_t*>(scales + int8_blocks::num_blocks(n));
  const int warps_per_block = kThreads / detail::kWarpSize;
  const unsigned grid = detail::grid_for(int8_blocks::num_blocks(n), warps_per_block);
  if (src.dtype == DType::kF32) {
    detail::int8q::quantize<<<grid, kThreads, 0, stream>>>(scales, codes, static_cast<const float*>(src.data), n);
  } else {
    ZT_CHECK(src.dtype == DType::kBF16, "quantize_int8_blocks: src must be F32 or BF16");
    detail::int8q::quantize<<<grid, kThreads, 0, stream>>>(scales, codes, static_cast<const __nv_bfloat16*>(src.data),
                                                           n);
  }
  ZT_CUDA_CHECK_LAUNCH();
}

void dequantize_int8_blocks(const ExecContext& ctx, TensorView packed, TensorView dst, bool accumulate) {
  const cudaStream_t stream = detail::stream_of(ctx);
  detail::check_on_gpu(dst, "dst");
  const std::int64_t n = dst.numel();
  check_packed(packed, n, "dequantize_int8_blocks");
  ZT_CHECK(dst.dtype == DType::kF32 || (dst.dtype == DType::kBF16 && !accumulate),
           "dequantize_int8_blocks: dst must be F32, or BF16 when not accumulating");
  if (n == 0) return;
  const auto* scales = static_cast<const float*>(packed.data);
  const auto* codes = reinterpret_cast<const std::int8_t*>(scales + int8_blocks::num_blocks(n));
  const unsigned grid = detail::grid_for(n, kThreads);
  if (dst.dtype == DType::kBF16) {
    detail::int8q::dequantize<__nv_bfloat16, false>
        <<<grid, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(dst.data), scales, codes, n);
  } else if (accumulate) {
    detail::int8q::dequantize<float, true>
        <<<grid, kThreads, 0, stream>>>(static_cast<float*>(dst.data), scales, codes, n);
  } else {
    detail::int8q::dequantize<float, false>
        <<<grid, kThreads, 0, stream>>>(static_cast<float*>(dst.data), scales, codes, n);
  }
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace zt::cuda
