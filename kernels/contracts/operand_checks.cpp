// The shared operand checks (see the header).
#include "kernels/contracts/operand_checks.h"

#include "engine/base/core/check.h"
#include "kernels/contracts/activation_dtype.h"

namespace zt {

namespace {

// The checks both entry points share: qkv rows, heads, out.
AttentionDims qkv_dims(const TensorView& out_like, const TensorView& qkv, int n_head, int n_kv_head) {
  ZT_CHECK(qkv.shape.ndim() == 3, "qkv must be [B, T, 3C], has {} dims", qkv.shape.ndim());
  if (n_kv_head == 0) n_kv_head = n_head;
  ZT_CHECK(n_head > 0 && n_kv_head > 0 && n_head % n_kv_head == 0, "n_head={} is not a multiple of n_kv_head={}",
           n_head, n_kv_head);
  AttentionDims d;
  d.B = qkv.shape[0];
  d.T = qkv.shape[1];
  d.W = qkv.shape[2];
  const std::int64_t heads = n_head + 2 * static_cast<std::int64_t>(n_kv_head);  // q, k and v heads in a row
  ZT_CHECK(d.W % heads == 0, "qkv last dim {} is not (n_head + 2 n_kv_head) = {} heads", d.W, heads);
  d.hs = d.W / heads;
  d.NH = n_head;
  d.NKV = n_kv_head;
  d.C = d.NH * d.hs;
  d.k_off = d.NH * d.hs;
  d.v_off = (d.NH + d.NKV) * d.hs;
  ZT_CHECK(out_like.numel() == d.B * d.T * d.C && out_like.shape[out_like.shape.ndim() - 1] == d.C,
           "out/dout must be [B={}, T={}, C={}]", d.B, d.T, d.C);
  return d;
}

}  // namespace

AttentionDims attention_dims(const TensorView& out_like, const TensorView& att, const TensorView& qkv, int n_head,
                             int n_kv_head) {
  activation_dtype("attention", {out_like, att, qkv});  // one dtype, F32 or BF16
  const AttentionDims d = qkv_dims(out_like, qkv, n_head, n_kv_head);
  ZT_CHECK(att.numel() == d.B * d.NH * d.T * d.T && (att.data != nullptr || att.numel() == 0),
           "att must be [B={}, n_head={}, T={}, T]", d.B, d.NH, d.T);
  return d;
}

AttentionDims fused_attention_dims(const TensorView& out_like, const TensorView& qkv, int n_head, int n_kv_head) {
  activation_dtype("attention", {out_like, qkv});
  return qkv_dims(out_like, qkv, n_head, n_kv_head);
}

CachedAttentionDims cached_attention_dims(const TensorView& out, const TensorView& cache, int n_head, int n_kv_head) {
  activation_dtype("cached_attention_forward", {out, cache});
  ZT_CHECK(out.shape.ndim() == 3, "cached attention: out must be [B, Tq, C], has {} dims", out.shape.ndim());
  CachedAttentionDims d;
  // The cache's qkv rows as a [B, P, W] qkv, with out [B, P, C] for qkv_dims' row check.
  const std::int64_t Tq = out.shape[1], P = cache.shape.ndim() == 3 ? cache.shape[1] : 0;
  ZT_CHECK(Tq > 0 && Tq <= P, "cached attention: {} new positions for a cache of {}", Tq, P);
  TensorView whole = out;
  whole.shape = Shape{out.shape[0], P, out.shape[2]};
  static_cast<AttentionDims&>(d) = qkv_dims(whole, cache, n_head, n_kv_head);
  d.Tq = Tq;
  d.first = P - Tq;
  return d;
}

bool flash_attention_shape_supported(std::int64_t batch, std::int64_t n_head, std::int64_t head_size) {
  const bool compiled = head_size == 8 || head_size == 16 || head_size == 32 || head_size == 64 || head_size == 128;
  return compiled && batch * n_head <= 65535;  // one grid row per (sample, head)
}

bool flash_attention_tc_head_size(std::int64_t head_size) {
  return head_size == 16 || head_size == 32 || head_size == 64 || head_size == 128;
}

std::string cudnn_attention_shape_refuses(DType activations, std::int64_t head_size, bool dropout) {
  if (activations != DType::kBF16) return "cuDNN's fused attention takes bf16 activations";
  if (head_size % 8 != 0 || head_size > 128) return fmt::format("cuDNN attention has no head size {}", head_size);
  if (dropout) return "dropout on the probabilities (cuDNN would draw its own masks, not the CPU's)";
  return "";
}

RopeDims rope_dims(const TensorView& x, int n_heads, int head_size, const RopeFrequencies& freq) {
  ZT_CHECK(x.shape.ndim() == 3, "rope: x must be [B, T, W]");
  ZT_CHECK(head_size > 0 && head_size % 2 == 0, "rope: head_size {} must be even", head_size);
  ZT_CHECK(n_heads >= 0 && static_cast<std::int64_t>(n_heads) * head_size <= x.shape[2],
           "rope: {} heads of {} exceed the row's {} columns", n_heads, head_size, x.shape[2]);
  ZT_CHECK(freq.theta > 0.0f, "rope: theta {} must be positive", freq.theta);
  const RopeScaling& s = freq.scaling;
  ZT_CHECK(s.type == RopeScalingType::kNone || s.factor >= 1.0f, "rope: scaling factor {} must be at least 1",
           s.factor);
  ZT_CHECK(s.type != RopeScalingType::kLlama3 ||
               (s.low_freq_factor > 0.0f && s.high_freq_factor > s.low_freq_factor && s.original_max_position > 0.0f),
           "rope: llama3 scaling needs 0 < low_freq_factor ({}) < high_freq_factor ({}) and "
           "original_max_position ({}) > 0",
           s.low_freq_factor, s.high_freq_factor, s.original_max_position);
  return {x.shape[0], x.shape[1], x.shape[2]};
}

EmbeddingDims embedding_dims(const TensorView& out_like, const TensorView& tokens, const TensorView& wte,
                             const TensorView& wpe, EmbeddingTables tables) {
  ZT_CHECK(tokens.dtype == DType::kI32 && tokens.shape.ndim() == 2, "tokens must be I32 [B, T]");
  ZT_CHECK(out_like.dtype == DType::kF32 || out_like.dtype == DType::kBF16, "embedding out/dout must be F32 or BF16");
  if (tables == EmbeddingTables::kParameters) {
    check_param_dtype("embedding_forward", out_like.dtype, {wte, wpe});
    ZT_CHECK(wte.dtype == wpe.dtype, "embedding_forward: wte is {}, wpe {} (one dtype)", dtype_name(wte.dtype),
             dtype_name(wpe.dtype));
  } else {
    ZT_CHECK(wte.dtype == DType::kF32 && wpe.dtype == DType::kF32, "embedding gradients are F32");
  }
  ZT_CHECK(wte.shape.ndim() == 2 && wpe.shape.ndim() == 2, "wte/wpe must be 2-D");
  EmbeddingDims d{tokens.shape[0], tokens.shape[1], wte.shape[1], wte.shape[0], wpe.shape[0]};
  ZT_CHECK(wpe.shape[1] == d.C, "wpe has {} columns, wte {}", wpe.shape[1], d.C);
  ZT_CHECK(d.T <= d.max_T, "sequence length {} exceeds the {} learned positions", d.T, d.max_T);
  ZT_CHECK(out_like.numel() == d.B * d.T * d.C, "out/dout must be [B={}, T={}, C={}]", d.B, d.T, d.C);
  return d;
}

}  // namespace zt
