"""Dropout masks for GPT-2's reference, drawn as the engine's contract defines them, written from that
definition (kernels/contracts/dropout_spec.h, [Note: dropout masks]) and Philox4x32-10's
(Salmon et al. 2011; Random123's known answer is checked by `philox_known_answer`):

  element j of global sample g at site s is kept iff
    philox4x32(ctr = {j / 4, s, g_lo, g_hi}, key = {seed_lo, seed_hi})[j % 4] >= round(p * 2^32),
  and kept values are scaled by 1 / (1 - p) rounded to fp32;

sites: 0 the embedding output [T, C], then per layer 1 + 3l the attention probabilities [H, T, T],
2 + 3l the attention's residual branch [T, C], 3 + 3l the MLP's [T, C] (nanoGPT's placement, which
gpt2_reference.forward applies given `scales`).
"""
import math

import numpy as np
import torch


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


def scales(p, seed, first_sample):
    """gpt2_reference.forward's dropout_scale for a batch whose row b is global sample first_sample + b."""
    def scale(site, shape):
        n = math.prod(shape[1:])
        return torch.from_numpy(np.stack([mask(p, seed, site, first_sample + b, n).reshape(shape[1:])
                                          for b in range(shape[0])]))
    return scale
