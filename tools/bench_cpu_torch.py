"""The PyTorch half of tools/bench_cpu.py: trains a float32 GPT-2 or Llama for N steps, times each step.

bench_cpu.py runs this file as a subprocess with the BLAS environment zerotrain uses
(OPENBLAS_CORETYPE, OPENBLAS_NUM_THREADS, OMP_NUM_THREADS) and reads one JSON line from stdout:
{"step_ms": [...], "torch_version", "threads", "blas": {library, core, config}, "losses": [...]}.
The step is what zerotrain's step is: zero_grad, forward, backward, global-norm clip, AdamW.
A Llama (model.arch "llama") is tools/bench_llama_gpu_torch.py's modules, the parity tests' plain
PyTorch Llama as nn.Modules (scaled_dot_product_attention where this torch has it, else the
reference's explicit causal attention), unwrapped and uncompiled, in float32.
"""
import argparse
import ctypes
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def dropout(x, p, training):
    """nanoGPT's dropout at one site; p = 0 (the benchmarks) leaves the graph as it was."""
    return F.dropout(x, p, training) if p > 0 else x


class Block(nn.Module):
    """Pre-LN transformer block; attention is the explicit matmul + causal mask + softmax form."""

    def __init__(self, n_embd, n_head, block_size, flash=False, dropout_p=0.0):
        super().__init__()
        self.n_head = n_head
        self.flash = flash  # torch's fused attention kernel (the GPU benchmark) instead of the explicit form
        self.dropout_p = dropout_p  # on the attention probabilities and both residual branches, as nanoGPT
        self.ln_1 = nn.LayerNorm(n_embd, eps=1e-5)
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.ln_2 = nn.LayerNorm(n_embd, eps=1e-5)
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.mlp_proj = nn.Linear(4 * n_embd, n_embd)
        masked = torch.ones(block_size, block_size, dtype=torch.bool).triu(diagonal=1)
        self.register_buffer("masked", masked, persistent=False)  # True above the diagonal

    def attention(self, x):
        B, T, C = x.shape
        head_size = C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, head_size).transpose(1, 2) for t in (q, k, v))
        if self.flash:
            p = self.dropout_p if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
            return self.c_proj(y.transpose(1, 2).reshape(B, T, C))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(head_size))
        scores = scores.masked_fill(self.masked[:T, :T], float("-inf"))
        y = dropout(scores.softmax(dim=-1), self.dropout_p, self.training) @ v  # [B, n_head, T, head_size]
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))

    def forward(self, x):
        x = x + dropout(self.attention(self.ln_1(x)), self.dropout_p, self.training)
        mlp = self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
        return x + dropout(mlp, self.dropout_p, self.training)


class Gpt(nn.Module):
    """GPT-2: token + learned position embeddings, pre-LN blocks, final LN, head tied to wte.
    dropout_p > 0 drops at nanoGPT's four sites (embedding output, attention probabilities, both
    residual branches) in training mode; the default 0 is the benchmarks' model."""

    def __init__(self, n_layer, n_head, n_embd, block_size, vocab_size, flash=False, dropout_p=0.0):
        super().__init__()
        self.dropout_p = dropout_p
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList(Block(n_embd, n_head, block_size, flash, dropout_p) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd, eps=1e-5)
        for name, p in self.named_parameters():  # GPT-2 initialisation
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, mean=0.0, std=std)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = dropout(self.wte(idx) + self.wpe.weight[:T], self.dropout_p, self.training)
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def blas_in_use():
    """The BLAS library this process mapped, with OpenBLAS's core name and config when it is one."""
    with open("/proc/self/maps") as f:
        paths = sorted({line.split()[-1] for line in f if "blas" in line.rsplit("/", 1)[-1].lower()})
    info = {"libraries": paths, "core": "unknown", "config": "unknown"}
    for path in paths:
        try:
            lib = ctypes.CDLL(path)  # already loaded: returns the same handle
            get_core, get_config = lib.openblas_get_corename, lib.openblas_get_config
        except (OSError, AttributeError):
            continue
        get_core.restype = get_config.restype = ctypes.c_char_p
        info.update(library=path, core=get_core().decode(), config=get_config().decode())
        break
    return info


def llama(m, seq_len):
    """The Llama of the benchmark's model section (its widths written out by bench_cpu.py)."""
    import bench_llama_gpu_torch  # its modules; the GPU anchor's protocol is not used here
    from llama_reference import LlamaConfig  # on the path bench_llama_gpu_torch sets up
    cfg = LlamaConfig(n_layer=m["n_layer"], n_head=m["n_head"], n_kv_head=m["n_kv_head"], n_embd=m["n_embd"],
                      intermediate_size=m["intermediate_size"], block_size=seq_len, vocab_size=m["vocab_size"],
                      rope_theta=m.get("rope_theta", 10000.0), norm_eps=m.get("norm_eps", 1e-5),
                      tie_embeddings=m.get("tie_embeddings", False))
    return bench_llama_gpu_torch.Llama(cfg)


def run(spec):
    model_cfg, train, optim = spec["model"], spec["train"], spec["optim"]
    torch.set_num_threads(spec["threads"])
    torch.manual_seed(train.get("seed", 1337))
    B, T, V = train["micro_batch"], train["seq_len"], model_cfg["vocab_size"]
    model = (llama(model_cfg, T) if model_cfg.get("arch", "gpt2") == "llama" else
             Gpt(model_cfg["n_layer"], model_cfg["n_head"], model_cfg["n_embd"], model_cfg["block_size"], V))
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() == 2], "weight_decay": optim["weight_decay"]},
              {"params": [p for p in params if p.dim() != 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=optim["lr"], betas=(optim["beta1"], optim["beta2"]),
                            eps=optim.get("eps", 1e-8), foreach=spec["foreach"])
    grad_clip = optim.get("grad_clip", 1.0)
    step_ms, losses = [], []
    for _ in range(spec["steps"]):
        tokens = torch.randint(0, V, (train.get("grad_accum", 1), B, T + 1))
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for micro in tokens:
            loss = model(micro[:, :-1], micro[:, 1:]) / tokens.shape[0]
            loss.backward()
        if grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, grad_clip)
        opt.step()
        step_ms.append((time.perf_counter() - t0) * 1e3)
        losses.append(loss.item() * tokens.shape[0])
    return {"step_ms": step_ms, "losses": losses, "torch_version": torch.__version__,
            "threads": torch.get_num_threads(), "n_params": sum(p.numel() for p in params),
            "foreach": "torch default" if spec["foreach"] is None else spec["foreach"], "blas": blas_in_use(),
            # As this process saw it (libgomp reads it at start): whether torch's threads spun.
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", required=True,
                        help='JSON: {"model": {...}, "train": {...}, "optim": {...}, "steps", "threads", "foreach"}')
    spec = json.loads(parser.parse_args().spec)
    print(json.dumps(run(spec)))


if __name__ == "__main__":
    sys.exit(main())
