"""Plain-PyTorch Llama decoder (Hugging Face LlamaForCausalLM's names, [out, in] linear weights).

The reference the engine's Llama is checked against, written here from the model's definition
(transformers' modeling_llama: RMSNorm, rotate-half rotary embeddings with fp32 angles, grouped-
query attention, SwiGLU), sharing nothing with the engine. It reads the Hugging Face config.json
the engine writes (debug-state's `hf_config` metadata, `ckpt export --format hf`). Works in any
float dtype; the parity test uses float64. Training helpers are GPT-2's, given this forward.
"""
import functools
import json
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

import gpt2_reference

bf16_round = gpt2_reference.bf16_round
has_weight_decay = gpt2_reference.has_weight_decay  # 2-D tensors decay: embeddings, projections, head


@dataclass(frozen=True)
class LlamaConfig:
    n_layer: int
    n_head: int
    n_kv_head: int
    n_embd: int
    intermediate_size: int
    block_size: int
    vocab_size: int
    rope_theta: float
    norm_eps: float
    tie_embeddings: bool
    rope_scaling: tuple = ()  # config.json's rope_scaling as sorted (key, value) pairs; () for none

    @staticmethod
    def from_hf(text):
        """From Hugging Face config.json text (model_type "llama")."""
        raw = json.loads(text)
        if raw.get("model_type") != "llama":
            raise ValueError(f"not a Llama config.json: model_type {raw.get('model_type')!r}")
        try:
            cfg = LlamaConfig(n_layer=int(raw["num_hidden_layers"]), n_head=int(raw["num_attention_heads"]),
                              n_kv_head=int(raw["num_key_value_heads"]), n_embd=int(raw["hidden_size"]),
                              intermediate_size=int(raw["intermediate_size"]),
                              block_size=int(raw["max_position_embeddings"]), vocab_size=int(raw["vocab_size"]),
                              rope_theta=float(raw["rope_theta"]), norm_eps=float(raw["rms_norm_eps"]),
                              tie_embeddings=bool(raw["tie_word_embeddings"]),
                              rope_scaling=tuple(sorted((raw.get("rope_scaling") or {}).items())))
        except KeyError as e:
            raise ValueError(f"config.json lacks {e}: {text}") from None
        if raw.get("head_dim", cfg.head_size) != cfg.head_size or raw.get("hidden_act", "silu") != "silu":
            raise ValueError(f"config.json has a head_dim or activation this reference does not model: {text}")
        if cfg.n_embd % cfg.n_head or cfg.n_head % cfg.n_kv_head:
            raise ValueError(f"config.json is inconsistent: {cfg}")
        return cfg

    @property
    def head_size(self):
        return self.n_embd // self.n_head


def param_shapes(cfg):
    """{name: shape} of every parameter, in LlamaForCausalLM's order (lm_head only when untied)."""
    C, V, I, hs = cfg.n_embd, cfg.vocab_size, cfg.intermediate_size, cfg.head_size
    shapes = {"model.embed_tokens.weight": (V, C)}
    for layer in range(cfg.n_layer):
        p = f"model.layers.{layer}."
        shapes.update({
            p + "input_layernorm.weight": (C,),
            p + "self_attn.q_proj.weight": (cfg.n_head * hs, C),
            p + "self_attn.k_proj.weight": (cfg.n_kv_head * hs, C),
            p + "self_attn.v_proj.weight": (cfg.n_kv_head * hs, C),
            p + "self_attn.o_proj.weight": (C, cfg.n_head * hs),
            p + "post_attention_layernorm.weight": (C,),
            p + "mlp.gate_proj.weight": (I, C),
            p + "mlp.up_proj.weight": (I, C),
            p + "mlp.down_proj.weight": (C, I),
        })
    shapes["model.norm.weight"] = (C,)
    if not cfg.tie_embeddings:
        shapes["lm_head.weight"] = (V, C)
    return shapes


def rms_norm(x, weight, eps):
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def scaled_inv_freq(inv_freq, rope_scaling):
    """rope_scaling applied to fp32 inverse frequencies as transformers applies it (its
    modeling_rope_utils): "linear" divides each by the factor; "llama3" keeps wavelengths under
    original_max_position_embeddings / high_freq_factor, divides those over ... / low_freq_factor
    by the factor, and blends the two between."""
    s = dict(rope_scaling)
    kind = s.get("rope_type", s.get("type", "default"))
    if kind == "default":
        return inv_freq
    if kind == "linear":
        return inv_freq / s["factor"]
    if kind != "llama3":
        raise ValueError(f"rope_scaling {s} is not one this reference models")
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old_len = s["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = old_len / low, old_len / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(medium, smoothed, scaled)


def rotary_cos_sin(cfg, T, dtype):
    """cos, sin [T, head_size] as transformers computes them: fp32 inverse frequencies (scaled as
    config.json's rope_scaling says) and angles, each frequency used for both halves of the head
    (the rotate-half convention)."""
    hs = cfg.head_size
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, hs, 2, dtype=torch.int64).float() / hs))
    inv_freq = scaled_inv_freq(inv_freq, cfg.rope_scaling)
    angles = torch.arange(T, dtype=torch.float32)[:, None] * inv_freq[None, :]
    emb = torch.cat((angles, angles), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def attention(x, P, p, cfg, cos, sin):
    B, T, _ = x.shape
    hs, group = cfg.head_size, cfg.n_head // cfg.n_kv_head
    q = (x @ P[p + "self_attn.q_proj.weight"].T).view(B, T, cfg.n_head, hs).transpose(1, 2)
    k = (x @ P[p + "self_attn.k_proj.weight"].T).view(B, T, cfg.n_kv_head, hs).transpose(1, 2)
    v = (x @ P[p + "self_attn.v_proj.weight"].T).view(B, T, cfg.n_kv_head, hs).transpose(1, 2)
    q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
    # Query head h reads key/value head h // group (transformers' repeat_kv).
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    y = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1) @ v
    return y.transpose(1, 2).reshape(B, T, cfg.n_head * hs) @ P[p + "self_attn.o_proj.weight"].T


def forward(params, inputs, targets, cfg):
    """logits [B, T, V] and the mean cross-entropy over all B*T positions."""
    P = params
    T = inputs.shape[1]
    x = P["model.embed_tokens.weight"][inputs]
    cos, sin = rotary_cos_sin(cfg, T, x.dtype)
    for layer in range(cfg.n_layer):
        p = f"model.layers.{layer}."
        x = x + attention(rms_norm(x, P[p + "input_layernorm.weight"], cfg.norm_eps), P, p, cfg, cos, sin)
        h = rms_norm(x, P[p + "post_attention_layernorm.weight"], cfg.norm_eps)
        h = F.silu(h @ P[p + "mlp.gate_proj.weight"].T) * (h @ P[p + "mlp.up_proj.weight"].T)
        x = x + h @ P[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, P["model.norm.weight"], cfg.norm_eps)
    head = P["model.embed_tokens.weight"] if cfg.tie_embeddings else P["lm_head.weight"]
    logits = x @ head.T
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    return logits, loss


loss_logits_grads = functools.partial(gpt2_reference.loss_logits_grads, forward_fn=forward)
train_losses = functools.partial(gpt2_reference.train_losses, forward_fn=forward)
