"""The PyTorch half of tools/bench_gpu.py: a GPT-2 of the given shapes trained on one GPU the way a
PyTorch user would (torch.compile, bf16 autocast over fp32 parameters, fused AdamW, the flash
attention kernel through scaled_dot_product_attention, tied head), on random tokens, for
warm-up + timed steps. A step is zerotrain's: forward, backward, global-norm clip at 1.0, AdamW.
Prints one JSON line: {"step_ms": [...], "losses": [...], "torch_version", "device", "params"}.
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_cpu_torch import Gpt  # noqa: E402  the same GPT-2 module as the CPU benchmark's


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-layer", type=int, default=12)
    ap.add_argument("--n-head", type=int, default=12)
    ap.add_argument("--n-embd", type=int, default=768)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=50304, help="padded vocabulary, as zerotrain computes with")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()
    torch.manual_seed(1337)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    dev = torch.device("cuda")
    model = Gpt(a.n_layer, a.n_head, a.n_embd, a.seq_len, a.vocab, flash=True).to(dev)
    params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    step_fn_model = model if a.no_compile else torch.compile(model)
    gen = torch.Generator(device=dev).manual_seed(1)
    step_ms, losses = [], []
    for step in range(a.warmup + a.steps):
        idx = torch.randint(0, 50257, (a.batch, a.seq_len + 1), device=dev, generator=gen)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = step_fn_model(idx[:, :-1], idx[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())  # the host reads the loss every step, as zerotrain does
        torch.cuda.synchronize()
        step_ms.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"step_ms": step_ms, "losses": losses, "torch_version": torch.__version__,
                      "device": torch.cuda.get_device_name(), "params": params, "compiled": not a.no_compile}))


if __name__ == "__main__":
    main()
