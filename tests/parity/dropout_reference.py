"""GPT-2 with dropout, its masks drawn as the engine's contract defines them, written from that
definition (kernels/contracts/dropout_spec.h, [Note: dropout masks]) and Philox4x32-10's
(Salmon et al. 2011; Random123's known answer is checked by `philox_known_answer`):

  element j of global sample g at site s is kept iff
    philox4x32(ctr = {j / 4, s, g_lo, g_hi}, key = {seed_lo, seed_hi})[j % 4] >= round(p * 2^32),
  and kept values are scaled by 1 / (1 - p) rounded to fp32;

sites: 0 the embedding output [T, C], then per layer 1 + 3l the attention probabilities [H, T, T],
2 + 3l the attention's residual branch [T, C], 3 + 3l the MLP's [T, C] (nanoGPT's placement).
"""
import math

import numpy as np
import torch
import torch.nn.functional as F

import gpt2_reference

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_LOW = np.uint64(0xFFFFFFFF)


def philox4x32(ctr, key):
    """Philox4x32-10 over arrays of counters: ctr four uint32 arrays (or ints), key two ints;
    returns the four output words as uint64 arrays holding 32-bit values."""
    c = [np.asarray(x, dtype=np.uint64) & _LOW for x in ctr]
    k0, k1 = key[0] & 0xFFFFFFFF, key[1] & 0xFFFFFFFF
    for _ in range(10):
        p0, p1 = _M0 * c[0], _M1 * c[2]
        c = [((p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0)) & _LOW, p1 & _LOW,
             ((p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1)) & _LOW, p0 & _LOW]
        k0, k1 = (k0 + _W0) & 0xFFFFFFFF, (k1 + _W1) & 0xFFFFFFFF
    return c


def philox_known_answer():
    """Random123's known-answer vectors for philox4x32-10 (kat_vectors): whether this one gives them."""
    zero = [int(w) for w in philox4x32([0, 0, 0, 0], [0, 0])]
    ones = [int(w) for w in philox4x32([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2)]
    pi = [int(w) for w in philox4x32([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0])]
    return (zero == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
            and ones == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]
            and pi == [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1])


def keep_scale(p):
    """1 / (1 - p) rounded once to fp32, p an fp32 value."""
    return float(np.float32(1.0 / (1.0 - float(np.float32(p)))))


def mask(p, seed, site, sample, n):
    """The [n] scale factors of global sample `sample` at `site`: keep_scale(p) where kept, 0 where dropped."""
    blocks = np.arange((n + 3) // 4, dtype=np.uint64)
    words = philox4x32([blocks, np.full_like(blocks, site), np.full_like(blocks, sample & 0xFFFFFFFF),
                        np.full_like(blocks, sample >> 32)], [seed & 0xFFFFFFFF, seed >> 32])
    bits = np.stack(words, axis=1).reshape(-1)[:n]  # element j = word j % 4 of block j / 4
    threshold = min(round(float(np.float32(p)) * 4294967296.0), 0xFFFFFFFF)
    return np.where(bits >= threshold, keep_scale(p), 0.0)


def forward(params, inputs, targets, cfg, p, seed, first_sample):
    """gpt2_reference.forward with dropout p at the four sites, row b being global sample first_sample + b."""
    P = params
    B, T = inputs.shape
    C, H = cfg.n_embd, cfg.n_head
    hs = C // H

    def scale(site, shape):
        n = math.prod(shape)
        rows = [mask(p, seed, site, first_sample + b, n).reshape(shape) for b in range(B)]
        return torch.from_numpy(np.stack(rows))

    x = (P["transformer.wte.weight"][inputs] + P["transformer.wpe.weight"][:T]) * scale(0, (T, C))
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for layer in range(cfg.n_layer):
        pre = f"transformer.h.{layer}."
        h = F.layer_norm(x, (C,), P[pre + "ln_1.weight"], P[pre + "ln_1.bias"], gpt2_reference.LAYERNORM_EPS)
        q, k, v = (h @ P[pre + "attn.c_attn.weight"] + P[pre + "attn.c_attn.bias"]).split(C, dim=2)
        q, k, v = (t.view(B, T, H, hs).transpose(1, 2) for t in (q, k, v))
        att = ((q @ k.transpose(-2, -1)) / math.sqrt(hs)).masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att * scale(1 + 3 * layer, (H, T, T))) @ v
        y = y.transpose(1, 2).reshape(B, T, C) @ P[pre + "attn.c_proj.weight"] + P[pre + "attn.c_proj.bias"]
        x = x + y * scale(2 + 3 * layer, (T, C))
        h = F.layer_norm(x, (C,), P[pre + "ln_2.weight"], P[pre + "ln_2.bias"], gpt2_reference.LAYERNORM_EPS)
        h = F.gelu(h @ P[pre + "mlp.c_fc.weight"] + P[pre + "mlp.c_fc.bias"], approximate="tanh")
        x = x + (h @ P[pre + "mlp.c_proj.weight"] + P[pre + "mlp.c_proj.bias"]) * scale(3 + 3 * layer, (T, C))
    x = F.layer_norm(x, (C,), P["transformer.ln_f.weight"], P["transformer.ln_f.bias"], gpt2_reference.LAYERNORM_EPS)
    logits = x @ P["transformer.wte.weight"].T
    return logits, F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))
