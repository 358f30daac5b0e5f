// Causal attention through cuDNN's fused scaled-dot-product kernels (the cuDNN frontend's graph
// API), what PyTorch and llm.c run on Hopper: the same interface and result as
// kernels/cuda/flash_attention.h for BF16 activations, with fp32 softmax statistics (lse, the
// log-sum-exp of each row's scaled scores, as the flash kernels keep) and a deterministic backward.
// cuDNN is optional twice over: a build without its headers leaves it out, and a build with them
// loads libcudnn.so.9 at run time, so a machine without the library runs the flash kernels.
// Graphs are built once per shape and kept in KernelResources ([Note: cuDNN plans] in the .cpp).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cuda {

// Why cuDNN's attention cannot run in this process, or "" when it can: a build without cuDNN's
// headers, or libcudnn.so.9 that does not load. The library is loaded on the first call.
std::string cudnn_attention_unavailable();

// "cuDNN 90100" (its backend's version number), or "no cuDNN" where it cannot run here. Loads the
// library, as cudnn_attention_unavailable does.
std::string cudnn_library_version();

// Why cuDNN's attention does not take operands of this kind, or "" when it does: BF16 activations,
// a head size that is a multiple of 8 up to 128, and no dropout on the probabilities (cuDNN would
// draw its own masks, not the CPU's that every other attention path shares).
std::string cudnn_attention_refuses(DType activations, std::int64_t head_size, bool dropout);

// Whether cuDNN runs this attention on ctx's device: available, not refused, every operand 16-byte
// aligned, and plans for both passes of the shape (built on the first call for a shape, once, on
// ctx's cuDNN handle). When it does not, `why` (if given) says why. n_kv_head: key/value heads for
// grouped-query attention (0: n_head).
bool cudnn_attention_serves(const ExecContext& ctx, DType activations, std::int64_t batch, std::int64_t seq_len,
                            int n_head, std::int64_t head_size, bool dropout,
                            std::initializer_list<const void*> operands, std::string* why = nullptr, int n_kv_head = 0);

// As flash_attention_forward without dropout: out [B, T, C] and lse [B, n_head, T] from qkv
// [B, T, (n_head + 2 n_kv_head) hs] (n_kv_head 0: n_head, qkv [B, T, 3C]); BF16 out and qkv, F32
// lse. Fails naming the reason where cuDNN does not serve.
void cudnn_attention_forward(const ExecContext& ctx, TensorView out, TensorView lse, TensorView qkv, int n_head,
                             int n_kv_head = 0);

// As flash_attention_backward without dropout: dqkv (overwritten, shaped as qkv) from dout, the
// forward's out, qkv and lse.
void cudnn_attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView out, TensorView qkv,
                              TensorView lse, int n_head, int n_kv_head = 0);

}  // namespace zt::cuda
