"""Plain-PyTorch GPT-2 (Hugging Face parameter names and Conv1D [in, out] layout) and AdamW loop.

The reference the engine is checked against: written from the GPT-2 definition, sharing nothing
with the engine. Works in any float dtype; the parity test uses float64 (see torch_parity.py).
"""
import json
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

LAYERNORM_EPS = 1e-5


@dataclass(frozen=True)
class GPT2Config:
    n_layer: int
    n_head: int
    n_embd: int
    block_size: int
    vocab_size: int         # true vocabulary: rows of wte and columns of the logits
    padded_vocab_size: int  # engine-internal padding; never visible in the file

    @staticmethod
    def from_json(text):
        raw = json.loads(text)
        fields = GPT2Config.__dataclass_fields__
        missing = [k for k in fields if k not in raw]
        if missing:
            raise ValueError(f"metadata 'config' lacks {missing}: {text}")
        cfg = GPT2Config(**{k: int(raw[k]) for k in fields})
        if cfg.n_embd % cfg.n_head or cfg.padded_vocab_size < cfg.vocab_size:
            raise ValueError(f"metadata 'config' is inconsistent: {cfg}")
        return cfg


def param_shapes(cfg):
    """{name: shape} for every parameter, in Hugging Face GPT2LMHeadModel order (head tied to wte)."""
    C, V = cfg.n_embd, cfg.vocab_size
    shapes = {"transformer.wte.weight": (V, C), "transformer.wpe.weight": (cfg.block_size, C)}
    for layer in range(cfg.n_layer):
        p = f"transformer.h.{layer}."
        shapes.update({
            p + "ln_1.weight": (C,), p + "ln_1.bias": (C,),
            p + "attn.c_attn.weight": (C, 3 * C), p + "attn.c_attn.bias": (3 * C,),
            p + "attn.c_proj.weight": (C, C), p + "attn.c_proj.bias": (C,),
            p + "ln_2.weight": (C,), p + "ln_2.bias": (C,),
            p + "mlp.c_fc.weight": (C, 4 * C), p + "mlp.c_fc.bias": (4 * C,),
            p + "mlp.c_proj.weight": (4 * C, C), p + "mlp.c_proj.bias": (C,),
        })
    shapes.update({"transformer.ln_f.weight": (C,), "transformer.ln_f.bias": (C,)})
    return shapes


def has_weight_decay(shape):
    """Weight decay applies to the 2-D weights (wte, wpe, matmul weights), not biases or LayerNorm."""
    return len(shape) == 2


def _dropped(t, dropout_scale, site):
    """t, or where a run drops, t times the dropout factors of `site` (dropout_scale(site, t's shape
    [B, ...]) -> a tensor of that shape, one sample a row)."""
    return t if dropout_scale is None else t * dropout_scale(site, tuple(t.shape))


def _attention(x, w, b, n_head, dropout_scale=None, site=None):
    B, T, C = x.shape
    head_size = C // n_head
    q, k, v = (x @ w + b).split(C, dim=2)  # c_attn output is q | k | v, each [C]
    # Head h owns columns h*head_size:(h+1)*head_size of q, k and v: [B, T, C] -> [B, n_head, T, hs].
    q, k, v = (t.view(B, T, n_head, head_size).transpose(1, 2) for t in (q, k, v))
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(head_size)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    scores = scores.masked_fill(~causal, float("-inf"))
    y = _dropped(scores.softmax(dim=-1), dropout_scale, site) @ v
    return y.transpose(1, 2).reshape(B, T, C)


def forward(params, inputs, targets, cfg, dropout_scale=None):
    """logits [B, T, V] and the mean cross-entropy over all B*T positions. dropout_scale (None: no
    dropout) gives the factors nanoGPT's four sites multiply by, the sites numbered as the engine's
    [Note: dropout masks] numbers them: 0 the embedding output, then per layer l 1 + 3l the attention
    probabilities, 2 + 3l the attention's residual branch, 3 + 3l the MLP's."""
    P = params
    B, T = inputs.shape
    C = cfg.n_embd
    x = _dropped(P["transformer.wte.weight"][inputs] + P["transformer.wpe.weight"][:T], dropout_scale, 0)
    for layer in range(cfg.n_layer):
        p = f"transformer.h.{layer}."
        h = F.layer_norm(x, (C,), P[p + "ln_1.weight"], P[p + "ln_1.bias"], LAYERNORM_EPS)
        h = _attention(h, P[p + "attn.c_attn.weight"], P[p + "attn.c_attn.bias"], cfg.n_head, dropout_scale,
                       1 + 3 * layer)
        x = x + _dropped(h @ P[p + "attn.c_proj.weight"] + P[p + "attn.c_proj.bias"], dropout_scale, 2 + 3 * layer)
        h = F.layer_norm(x, (C,), P[p + "ln_2.weight"], P[p + "ln_2.bias"], LAYERNORM_EPS)
        h = F.gelu(h @ P[p + "mlp.c_fc.weight"] + P[p + "mlp.c_fc.bias"], approximate="tanh")
        x = x + _dropped(h @ P[p + "mlp.c_proj.weight"] + P[p + "mlp.c_proj.bias"], dropout_scale, 3 + 3 * layer)
    x = F.layer_norm(x, (C,), P["transformer.ln_f.weight"], P["transformer.ln_f.bias"], LAYERNORM_EPS)
    logits = x @ P["transformer.wte.weight"].T  # LM head tied to wte
    loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))
    return logits, loss


def loss_logits_grads(weights, inputs, targets, cfg, dtype, forward_fn=None):
    """One forward/backward from numpy weights, computed in `dtype`, by `forward_fn` (another
    family's forward(params, inputs, targets, cfg); GPT-2's by default).

    Returns (loss as float, logits tensor, {name: gradient tensor of the mean loss})."""
    params = {n: torch.tensor(w, dtype=dtype, requires_grad=True) for n, w in weights.items()}
    logits, loss = (forward_fn or forward)(params, torch.as_tensor(inputs).long(), torch.as_tensor(targets).long(), cfg)
    loss.backward()
    return loss.item(), logits.detach(), {n: p.grad for n, p in params.items()}


def bf16_round(t):
    """fp32 -> bf16 -> fp32: round to nearest, ties to even (what a bf16 store then load yields)."""
    return t.to(torch.float32).to(torch.bfloat16).to(torch.float32)


def train_losses(start, inputs, targets, cfg, optim, steps, bf16, forward_fn=None):
    """Loss at each of `steps` consecutive AdamW steps on one batch, computed in float64.

    f32 mode: the float64 parameters are the optimized ones, starting from `start`.
    bf16 mode (the engine's mixed precision): `start` is the fp32 master; each step runs forward and
    backward in float64 on working = bf16(master), rounds the gradient to bf16 (from its fp32
    value, as the engine stores it), and torch.optim.AdamW updates the fp32 master in fp32.
    optim: {"lr", "beta1", "beta2", "eps", "weight_decay"} and optionally "grad_clip" (global norm).
    forward_fn: as for loss_logits_grads.
    """
    master_dtype = torch.float32 if bf16 else torch.float64
    master = {n: torch.tensor(w, dtype=master_dtype) for n, w in start.items()}
    groups = [
        {"params": [t for t in master.values() if has_weight_decay(t.shape)], "weight_decay": optim["weight_decay"]},
        {"params": [t for t in master.values() if not has_weight_decay(t.shape)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=optim["lr"], betas=(optim["beta1"], optim["beta2"]),
                                  eps=optim["eps"])
    losses = []
    for _ in range(steps):
        working = {n: (bf16_round(m) if bf16 else m).numpy() for n, m in master.items()}
        loss, _, grads = loss_logits_grads(working, inputs, targets, cfg, torch.float64, forward_fn)
        losses.append(loss)
        for n, m in master.items():
            m.grad = bf16_round(grads[n]) if bf16 else grads[n]
        if optim.get("grad_clip", 0.0) > 0.0:
            torch.nn.utils.clip_grad_norm_(list(master.values()), optim["grad_clip"])
        optimizer.step()
    return losses
