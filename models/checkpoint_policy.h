// Which decoder layers (GPT blocks, Llama layers) recompute their forward in backward instead of
// keeping their activations: train.activation_checkpointing, for every model family. "selective"
// recomputes no layer's forward: every layer keeps its products' outputs (and attention's
// log-sum-exps or probabilities) and drops only what is cheap to recompute from them (the norms'
// outputs, GELU's or SwiGLU's), which its backward recomputes with the same kernels, so the bits
// are those of no checkpointing (Megatron's selective recomputation, docs/memory.md).
#pragma once

#include <cstdint>
#include <string>

namespace zt {

struct CheckpointPolicy {
  enum class Kind { kNone, kAll, kEvery, kSelective };
  Kind kind = Kind::kNone;
  int every_k = 1;  // with kEvery: layers 0, k, 2k, ... are checkpointed

  bool is_checkpointed(int layer) const {
    switch (kind) {
      case Kind::kNone:
      case Kind::kSelective: return false;
      case Kind::kAll: return true;
      case Kind::kEvery: return layer % every_k == 0;
    }
    return false;
  }
  bool selective() const { return kind == Kind::kSelective; }
  // "none", "selective", "all" or "every:K": the config's spelling.
  std::string to_string() const;
  // Parses that spelling; returns false when it is not one of them.
  static bool parse(const std::string& text, CheckpointPolicy* out);
};

// The activation peak of a decoder's training step under `policy`, in the order its model
// allocates: `resident` bytes throughout (token ids, the residual stream), each of n_layer layers'
// `layer` bytes from its forward to its backward (a checkpointed layer's freed at once and
// allocated again when backward recomputes it), and the head's `head` bytes at the end of the
// forward, freed as backward starts.
std::int64_t checkpointed_peak_bytes(const CheckpointPolicy& policy, int n_layer, std::int64_t resident,
                                     std::int64_t layer, std::int64_t head);

}  // namespace zt
