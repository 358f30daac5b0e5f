// What a CUDA kernel call takes from KernelResources::scratch (kernels/cuda/kernel_resources.h) for
// its own duration, by shape. The CUDA kernels size their scratch by these functions and the
// memory prediction takes a step's largest call from them (ModelFamily::cuda_call_scratch_bytes),
// so the two cannot drift apart. Host code, in every build: `zerotrain memory` and `plan` predict a
// CUDA run on machines without nvcc.
//
// [Note: the kernels' scratch, predicted]
// Scratch lives for one call (a product's bf16 operand copies, a norm backward's partial sums) and
// is charged to the workspace category while it does, so the category's peak is the run's own
// buffers plus the largest single call's scratch. Not predicted, because it depends on the
// libraries at run time: cuDNN attention's workspace (the size its graph asks for), CUB's sort
// temporaries in the embedding backward (tuned per GPU); nor the timed searches' copies of the
// first step, which predict_timed_step_memory bounds apart.
#pragma once

#include <cstdint>
#include <utility>

#include "engine/base/core/dtype.h"

namespace zt::kernel_scratch {

// Rows whose partial sums a LayerNorm or RMSNorm backward block writes as one row of partials
// (layernorm_kernels.cuh, rmsnorm_kernels.cuh).
inline constexpr int kNormRowsPerChunk = 32;
// Rows a bias-gradient block sums into one row of partials (matmul_kernels.cuh).
inline constexpr int kBiasRowsPerChunk = 128;
// The fp32 results a product with an fp32 bias and bf16 results takes at a time ([Note: fp32 bias
// with bf16 results] in kernels/cuda/matmul.cu).
inline constexpr std::int64_t kWideResultBytes = std::int64_t{32} << 20;
// Blocks of the gradient norm's partial sums a view (norm_kernels.cuh: fixed, so the order of the
// sum depends on the view alone), and of its exact sums.
inline constexpr int kSquarePartialBlocks = 1024;
inline constexpr int kExactSquareBlocks = 256;

// Rows of partials for `rows` rows in chunks of `per_chunk`.
constexpr std::int64_t chunks_of(std::int64_t rows, int per_chunk) { return (rows + per_chunk - 1) / per_chunk; }

// Elements each call allocates (in the dtype the kernel names).
std::int64_t layernorm_backward_partial_floats(std::int64_t rows, std::int64_t cols);  // dweight's and dbias'
std::int64_t rmsnorm_backward_partial_floats(std::int64_t rows, std::int64_t cols);
std::int64_t bias_grad_partial_floats(std::int64_t rows, std::int64_t cols);
// Rows of a product's fp32 result (and of the GELU's fp32 input, `gelu`) a chunk holds.
std::int64_t wide_result_chunk_rows(std::int64_t rows, std::int64_t cols, bool gelu);
// F32 words (pairs hold doubles, exact digits 64-bit words) for `views` gradient views.
std::int64_t sum_of_squares_floats(std::int64_t views);
std::int64_t exact_sum_of_squares_floats(std::int64_t views);

// Whether an operand of dtype `operand` reaches cuBLASLt as a bf16 copy: fp32 operands of products
// in bf16 (bf16 activations, or precision.matmul = "bf16" with fp32 ones: `bf16_products`).
constexpr bool rounds_to_bf16(DType operand, DType activations, bool bf16_products) {
  return operand == DType::kF32 && (activations == DType::kBF16 || bf16_products);
}

// A linear layer's product, out[rows, out] = inp[rows, in] @ W (+ bias), as kernels/cuda/matmul.cu
// runs it.
struct Product {
  std::int64_t rows = 0, in = 0, out = 0;
  DType activations = DType::kF32;  // inp, out and their gradients
  DType weight = DType::kF32;
  bool bias = false;            // in the weight's dtype
  bool bias_unaligned = false;  // not 16-byte aligned in its unit: copied to an aligned buffer
  bool gelu = false;            // GELU in the epilogue (precision.gelu_epilogue), its input kept
  bool bf16_products = false;   // fp32 operands rounded to bf16 (see rounds_to_bf16)
  bool dinp = true;             // the backward computes the input's gradient
};

// Bytes a product's forward holds at once (matmul_forward, matmul_residual_forward with the
// residual apart from out), and its backward (the input gradient's product, then the weight's
// with the bias gradient: the two-stage kernels' partials, which bound cuBLASLt's epilogue route's
// sums).
std::int64_t product_forward_bytes(const Product& p);
std::int64_t product_backward_bytes(const Product& p);

// Attention. The flash kernels' backward holds each row's delta; cuDNN's workspace is not
// predicted (this is the bound it is counted by). The materialised kernels take one sample's scores
// at a time (and its dropped probabilities).
std::int64_t flash_attention_backward_bytes(std::int64_t batch, std::int64_t heads, std::int64_t seq_len);
std::int64_t attention_forward_bytes(std::int64_t heads, std::int64_t seq_len, DType activations, bool dropout);
std::int64_t attention_backward_bytes(std::int64_t heads, std::int64_t seq_len, DType activations, bool dropout);

// The embedding backward's sort of `tokens` token ids and its run ends over `vocab` rows, less
// CUB's own temporaries.
std::int64_t embedding_backward_bytes(std::int64_t tokens, std::int64_t vocab);

// A decoding step's cached attention (kernels/cuda/cached_attention.cu) splits each query's cached
// positions until its grid has about two blocks an SM on an H100 or H200 (132 SMs), at most one
// split per kCachedMinSpan positions ([Note: split positions] in cached_attention_kernels.cuh), and
// holds each split's partial result (its maximum, its sum and a head's values, up to 256) in fp32.
inline constexpr std::int64_t kCachedTargetBlocks = 264;
inline constexpr std::int64_t kCachedMinSpan = 64;
inline constexpr std::int64_t kCachedMaxSplits = 64;
inline constexpr int kCachedPartialFloats = 2 + 256;
// {splits, span} for a cache of `positions` and a grid of `blocks` (new position, head, sample)
// blocks: split z covers [z span, (z + 1) span).
std::pair<int, int> cached_attention_splits(std::int64_t blocks, std::int64_t positions);
// Bytes a call of `new_positions` queries a sample over a cache of `positions` holds.
std::int64_t cached_attention_bytes(std::int64_t batch, std::int64_t new_positions, std::int64_t heads,
                                    std::int64_t positions);

}  // namespace zt::kernel_scratch
