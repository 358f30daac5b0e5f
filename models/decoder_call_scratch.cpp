// The largest of a decoder's CUDA kernel calls (see the header).
#include "models/decoder_call_scratch.h"

#include <algorithm>

#include "kernels/ops.h"

namespace zt {

AttentionRoute cuda_attention_route(bool fused, AttentionKernels choice, DType activations, std::int64_t head_size,
                                    bool dropout) {
  if (!fused) return AttentionRoute::kMaterialised;
  return ops::cudnn_attention_refuses(Device::kCUDA, choice, activations, head_size, dropout).empty()
             ? AttentionRoute::kCudnn
             : AttentionRoute::kFlash;
}

std::int64_t largest_call_bytes(const DecoderCalls& c) {
  std::int64_t largest = 0;
  auto add = [&](std::int64_t bytes) { largest = std::max(largest, bytes); };
  for (const kernel_scratch::Product& p : c.products) {
    add(kernel_scratch::product_forward_bytes(p));
    if (c.backward) add(kernel_scratch::product_backward_bytes(p));
  }
  if (c.attention == AttentionRoute::kMaterialised) {
    add(kernel_scratch::attention_forward_bytes(c.heads, c.seq_len, c.activations, c.dropout));
    if (c.backward) add(kernel_scratch::attention_backward_bytes(c.heads, c.seq_len, c.activations, c.dropout));
  } else if (c.attention == AttentionRoute::kFlash && c.backward) {
    add(kernel_scratch::flash_attention_backward_bytes(c.batch, c.heads, c.seq_len));  // cuDNN's: not predicted
  }
  if (c.backward) {
    add(c.norm_backward_bytes);
    add(kernel_scratch::embedding_backward_bytes(c.batch * c.seq_len, c.vocab));
  }
  return largest;
}

}  // namespace zt
