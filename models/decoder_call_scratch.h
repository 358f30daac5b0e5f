// A decoder's CUDA kernel calls as the memory prediction sees them (GPT's and Llama's footprints):
// its linear layers' products, its attention, its norms' backwards and its token table's, each
// call's scratch by kernels/contracts/kernel_scratch.h, and the largest of them, which is what a
// step (or a forward alone) holds at its peak ([Note: the kernels' scratch, predicted]).
#pragma once

#include <cstdint>
#include <span>

#include "engine/base/core/dtype.h"
#include "kernels/contracts/kernel_scratch.h"

namespace zt {

enum class AttentionRoute { kMaterialised, kFlash, kCudnn };

// The route a CUDA run's attention takes: fused where the flash kernels serve the shape
// (`fused`), on cuDNN where it takes them under `choice` (precision.attention), as the backend
// decides per call.
AttentionRoute cuda_attention_route(bool fused, AttentionKernels choice, DType activations, std::int64_t head_size,
                                    bool dropout);

struct DecoderCalls {
  std::span<const kernel_scratch::Product> products;
  bool backward = true;  // false: a forward only
  AttentionRoute attention = AttentionRoute::kFlash;
  std::int64_t batch = 0, heads = 0, seq_len = 0;  // the attention's (query heads)
  DType activations = DType::kF32;
  bool dropout = false;                  // on the attention probabilities
  std::int64_t norm_backward_bytes = 0;  // one norm backward's partials
  std::int64_t vocab = 0;                // the token table's rows (padded)
};

// The largest call's bytes. cuDNN's attention holds a workspace of its own, not predicted.
std::int64_t largest_call_bytes(const DecoderCalls& calls);

}  // namespace zt
