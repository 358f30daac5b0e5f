// The CUDA kernels' scratch by shape (see the header).
#include "kernels/contracts/kernel_scratch.h"

#include <algorithm>

#include "kernels/contracts/exact_square_sum.h"

namespace zt::kernel_scratch {

namespace {

constexpr std::int64_t kF32 = 4, kBf16 = 2;

}  // namespace

std::int64_t layernorm_backward_partial_floats(std::int64_t rows, std::int64_t cols) {
  return chunks_of(rows, kNormRowsPerChunk) * 2 * cols;
}

std::int64_t rmsnorm_backward_partial_floats(std::int64_t rows, std::int64_t cols) {
  return chunks_of(rows, kNormRowsPerChunk) * cols;
}

std::int64_t bias_grad_partial_floats(std::int64_t rows, std::int64_t cols) {
  return chunks_of(rows, kBiasRowsPerChunk) * cols;
}

std::int64_t wide_result_chunk_rows(std::int64_t rows, std::int64_t cols, bool gelu) {
  const std::int64_t row_bytes = cols * kF32 * (gelu ? 2 : 1);
  return std::min(rows, std::max<std::int64_t>(1, kWideResultBytes / row_bytes));
}

std::int64_t sum_of_squares_floats(std::int64_t views) { return 2 * views * (kSquarePartialBlocks + 1); }

std::int64_t exact_sum_of_squares_floats(std::int64_t views) {
  return 2 * std::int64_t{exact_sum::kDigits + 1} * (kExactSquareBlocks + views);
}

std::int64_t product_forward_bytes(const Product& p) {
  std::int64_t bytes = 0;
  if (p.bias && p.bias_unaligned) bytes += p.out * static_cast<std::int64_t>(dtype_size_bytes(p.weight));
  if (rounds_to_bf16(p.weight, p.activations, p.bf16_products)) bytes += kBf16 * p.in * p.out;
  if (rounds_to_bf16(p.activations, p.activations, p.bf16_products)) bytes += kBf16 * p.rows * p.in;
  // An fp32 bias with bf16 results: the product in fp32 chunks, with the GELU's input beside it.
  if (p.bias && p.weight == DType::kF32 && p.activations == DType::kBF16) {
    bytes += kF32 * wide_result_chunk_rows(p.rows, p.out, p.gelu) * p.out * (p.gelu ? 2 : 1);
  }
  return bytes;
}

std::int64_t product_backward_bytes(const Product& p) {
  // dout's copy feeds both products; the weight's copy lives for the input gradient's product, the
  // input's and the bias partials for the weight gradient's.
  const bool rounds_acts = rounds_to_bf16(p.activations, p.activations, p.bf16_products);
  const std::int64_t dout = rounds_acts ? kBf16 * p.rows * p.out : 0;
  const std::int64_t weight =
      p.dinp && rounds_to_bf16(p.weight, p.activations, p.bf16_products) ? kBf16 * p.in * p.out : 0;
  const std::int64_t inp = rounds_acts ? kBf16 * p.rows * p.in : 0;
  const std::int64_t bias = p.bias ? kF32 * bias_grad_partial_floats(p.rows, p.out) : 0;
  return dout + std::max(weight, inp + bias);
}

std::int64_t flash_attention_backward_bytes(std::int64_t batch, std::int64_t heads, std::int64_t seq_len) {
  return kF32 * batch * heads * seq_len;
}

std::int64_t attention_forward_bytes(std::int64_t heads, std::int64_t seq_len, DType activations, bool dropout) {
  const std::int64_t sample = heads * seq_len * seq_len;
  const std::int64_t act = static_cast<std::int64_t>(dtype_size_bytes(activations));
  return (activations == DType::kF32 ? 0 : kF32 * sample) + (dropout ? act * sample : 0);
}

std::int64_t attention_backward_bytes(std::int64_t heads, std::int64_t seq_len, DType activations, bool dropout) {
  const std::int64_t sample = heads * seq_len * seq_len;
  const std::int64_t act = static_cast<std::int64_t>(dtype_size_bytes(activations));
  return kF32 * sample + (activations == DType::kF32 ? 0 : kBf16 * sample) + (dropout ? act * sample : 0);
}

std::pair<int, int> cached_attention_splits(std::int64_t blocks, std::int64_t positions) {
  blocks = std::max<std::int64_t>(blocks, 1);  // an empty batch launches nothing, but divides here
  std::int64_t splits = (kCachedTargetBlocks + blocks - 1) / blocks;
  splits = std::min(splits, (positions + kCachedMinSpan - 1) / kCachedMinSpan);
  splits = std::max<std::int64_t>(std::min(splits, kCachedMaxSplits), 1);
  const std::int64_t span = (positions + splits - 1) / splits;
  return {static_cast<int>((positions + span - 1) / span), static_cast<int>(span)};
}

std::int64_t cached_attention_bytes(std::int64_t batch, std::int64_t new_positions, std::int64_t heads,
                                    std::int64_t positions) {
  const std::int64_t rows = batch * new_positions * heads;
  const int splits = cached_attention_splits(rows, positions).first;
  return splits > 1 ? kF32 * rows * splits * kCachedPartialFloats : 0;
}

std::int64_t embedding_backward_bytes(std::int64_t tokens, std::int64_t vocab) {
  constexpr std::int64_t kI32 = 4;
  return kI32 * (tokens + 2 * tokens + vocab);  // positions, sorted (token, position) pairs, run ends
}

}  // namespace zt::kernel_scratch
