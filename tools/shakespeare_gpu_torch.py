"""The PyTorch half of tools/shakespeare_gpu.py: nanoGPT's shakespeare-char recipe -- dropout at its
four sites, AdamW with weight decay on the 2-D tensors only, linear warm-up then cosine decay,
global-norm clipping, bf16 autocast, torch.compile, fused AdamW, flash attention through
scaled_dot_product_attention (its dropout_p in training) -- on tools/bench_cpu_torch.py's GPT-2
(zerotrain's model: biases, tanh GELU, tied head), reading the llm.c token files `zerotrain prepare`
wrote, with the hyperparameters the main tool resolved from configs/shakespeare_char.json (--spec).

Batches are nanoGPT's: B random windows of T + 1 train tokens per step. Evaluation every
train.eval_every steps and after the last: the mean loss over train.eval_batches batches of fixed
validation windows (drawn once), in eval mode (no dropout). A step is zerotrain's: batch, forward,
backward, clip, AdamW, the loss read by the host; step_ms times it.

SIGTERM (or --stop-after K, a test hook) stops at the next step boundary and saves everything to
--checkpoint; the same command continues from it. --device cpu (tests only) runs without compile,
autocast, fused AdamW or flash attention. Prints one JSON line at the end: {"complete",
"steps_done", "hyperparameters": {"model", "train", "optim"} read back from the model and
optimizer, "decayed_numel", "not_decayed_numel", "step_ms", "loss", "lr" (per step), "evals":
[[step, val_loss]], "segments", "torch_version", "device", "compiled", "autocast", "fused_adamw",
"flash_attention"}.
"""
import argparse
import contextlib
import json
import math
import os
import signal
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_cpu_torch import Gpt  # noqa: E402  the same GPT-2 module as the benchmarks'

LLMC_MAGIC, LLMC_VERSION, LLMC_HEADER_INTS = 20240520, 1, 256


def read_llmc_tokens(path, vocab_size):
    """The uint16 tokens of an llm.c token file (engine/app/data/token_file.h), checked as zerotrain does."""
    header = np.fromfile(path, dtype=np.int32, count=LLMC_HEADER_INTS)
    if len(header) < LLMC_HEADER_INTS or header[0] != LLMC_MAGIC or header[1] != LLMC_VERSION:
        sys.exit(f"shakespeare_gpu_torch: {path}: not an llm.c token file")
    tokens = np.fromfile(path, dtype=np.uint16, offset=4 * LLMC_HEADER_INTS)
    if len(tokens) != header[2] or len(tokens) == 0 or int(tokens.max()) >= vocab_size:
        sys.exit(f"shakespeare_gpu_torch: {path}: {len(tokens)} tokens, header says {header[2]}, "
                 f"or a token >= {vocab_size}")
    return tokens


def lr_at(step, o):
    """Step s's learning rate (0-based): nanoGPT's get_lr, which is zerotrain's LrSchedule::at."""
    if step < o["warmup_steps"]:
        return o["lr"] * (step + 1) / (o["warmup_steps"] + 1)
    if step >= o["decay_steps"]:
        return o["min_lr"]
    r = (step - o["warmup_steps"]) / (o["decay_steps"] - o["warmup_steps"])
    return o["min_lr"] + 0.5 * (1.0 + math.cos(math.pi * r)) * (o["lr"] - o["min_lr"])


def windows(tokens, starts, T):
    """(inputs, targets) of the windows of T + 1 tokens at `starts`: [B, T] each."""
    w = tokens[starts[:, None] + torch.arange(T + 1, device=tokens.device)]
    return w[:, :-1], w[:, 1:]


def hyperparameters(model, opt, spec):
    """What the run actually uses, read back from the module and optimizer where they hold it."""
    decay, no_decay = opt.param_groups
    t, o = spec["train"], spec["optim"]
    return {"model": {"n_layer": len(model.h), "n_head": model.h[0].n_head, "n_embd": model.wte.embedding_dim,
                      "block_size": model.wpe.num_embeddings, "vocab_size": model.wte.num_embeddings,
                      "dropout": model.dropout_p},
            "train": {"micro_batch": t["micro_batch"], "seq_len": t["seq_len"], "grad_accum": 1,
                      "max_steps": t["max_steps"], "eval_every": t["eval_every"], "eval_batches": t["eval_batches"],
                      "seed": t["seed"]},
            "optim": {"lr": o["lr"], "min_lr": o["min_lr"], "warmup_steps": o["warmup_steps"], "decay": "cosine",
                      "decay_steps": o["decay_steps"], "beta1": decay["betas"][0], "beta2": decay["betas"][1],
                      "eps": decay["eps"], "weight_decay": decay["weight_decay"],
                      "no_decay_weight_decay": no_decay["weight_decay"], "grad_clip": o["grad_clip"]}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", required=True, help="the resolved run config as JSON (model, train, optim sections)")
    ap.add_argument("--data", required=True, help="directory with train.bin and val.bin")
    ap.add_argument("--checkpoint", required=True, help="state file: continued from when present, written on a stop")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--stop-after", type=int, default=0, help="test hook: stop as on SIGTERM after this step")
    a = ap.parse_args()
    spec = json.loads(a.spec)
    m, t, o = spec["model"], spec["train"], spec["optim"]
    B, T, steps = t["micro_batch"], t["seq_len"], t["max_steps"]
    if t.get("grad_accum", 1) != 1 or o.get("decay", "cosine") != "cosine":
        sys.exit("shakespeare_gpu_torch: only grad_accum 1 and cosine decay are implemented")
    cuda = a.device == "cuda"
    dev = torch.device(a.device)
    stop = {"requested": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(requested=True))

    torch.manual_seed(t["seed"])
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True  # as nanoGPT
        torch.backends.cudnn.allow_tf32 = True
    train, val = (torch.from_numpy(read_llmc_tokens(os.path.join(a.data, f), m["vocab_size"]).astype(np.int64)).to(dev)
                  for f in ("train.bin", "val.bin"))
    model = Gpt(m["n_layer"], m["n_head"], m["n_embd"], m["block_size"], m["vocab_size"], flash=cuda,
                dropout_p=m.get("dropout", 0.0)).to(dev)
    params = list(model.parameters())
    decay = [p for p in params if p.dim() >= 2]  # nanoGPT: every 2-D tensor (matmul weights, embeddings)
    no_decay = [p for p in params if p.dim() < 2]  # biases and LayerNorm
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": o["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o.get("eps", 1e-8),
                            **({"fused": True} if cuda else {}))
    gen = torch.Generator(device=dev)
    gen.manual_seed(t["seed"])
    val_gen = torch.Generator(device=dev)
    val_gen.manual_seed(t["seed"] + 1)
    val_starts = torch.randint(len(val) - T, (t["eval_batches"], B), generator=val_gen, device=dev)

    run = {"step": 0, "step_ms": [], "loss": [], "lr": [], "evals": [], "segments": 0}
    if os.path.exists(a.checkpoint):
        saved = torch.load(a.checkpoint, map_location="cpu")  # RNG states stay on the host; the loads copy the rest
        if saved["spec"] != spec:
            sys.exit(f"shakespeare_gpu_torch: {a.checkpoint} belongs to another configuration; delete it to start over")
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        gen.set_state(saved["gen"])
        torch.set_rng_state(saved["cpu_rng"])
        if cuda:
            torch.cuda.set_rng_state(saved["cuda_rng"])
        run = saved["run"]
    run["segments"] += 1
    step_model = torch.compile(model) if cuda else model
    amp = torch.autocast(device_type="cuda", dtype=torch.bfloat16) if cuda else contextlib.nullcontext()

    def evaluate():
        model.eval()
        total = torch.zeros((), device=dev)
        with torch.no_grad():
            for starts in val_starts:
                with amp:
                    total += step_model(*windows(val, starts, T)).float()
        model.train()
        return (total / len(val_starts)).item()

    model.train()
    step = run["step"]
    while step < steps:
        lr = lr_at(step, o)
        for g in opt.param_groups:
            g["lr"] = lr
        t0 = time.perf_counter()
        x, y = windows(train, torch.randint(len(train) - T, (B,), generator=gen, device=dev), T)
        with amp:
            loss = step_model(x, y)
        loss.backward()
        if o["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(params, o["grad_clip"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        run["loss"].append(loss.item())  # the host reads the loss every step, as zerotrain does
        if cuda:
            torch.cuda.synchronize()
        run["step_ms"].append((time.perf_counter() - t0) * 1e3)
        run["lr"].append(lr)
        step += 1
        if (t["eval_every"] > 0 and step % t["eval_every"] == 0) or step == steps:
            run["evals"].append([step, evaluate()])
        if step < steps and (stop["requested"] or step == a.stop_after):
            break
    run["step"] = step
    complete = step == steps
    if not complete:
        state = {"spec": spec, "model": model.state_dict(), "opt": opt.state_dict(), "gen": gen.get_state(),
                 "cpu_rng": torch.get_rng_state(), "run": run}
        if cuda:
            state["cuda_rng"] = torch.cuda.get_rng_state()
        torch.save(state, a.checkpoint + ".tmp")
        os.replace(a.checkpoint + ".tmp", a.checkpoint)
    elif os.path.exists(a.checkpoint):
        os.remove(a.checkpoint)
    n_decay, n_no_decay = sum(p.numel() for p in decay), sum(p.numel() for p in no_decay)
    print(json.dumps({"complete": complete, "steps_done": step, "hyperparameters": hyperparameters(model, opt, spec),
                      "decayed_numel": n_decay, "not_decayed_numel": n_no_decay,
                      **{k: v for k, v in run.items() if k != "step"},
                      "torch_version": torch.__version__,
                      "device": torch.cuda.get_device_name() if cuda else "cpu", "compiled": cuda,
                      "autocast": "bf16" if cuda else None, "fused_adamw": cuda, "flash_attention": cuda}))


if __name__ == "__main__":
    main()
