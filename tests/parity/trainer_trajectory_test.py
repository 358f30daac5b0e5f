#!/usr/bin/python3
"""Whole training runs against PyTorch: what the trainer does around the model, checked step by step.

torch_parity.py holds one batch's forward, backward and AdamW steps to a PyTorch model. This test
holds the rest of a run: the data walk, the learning-rate schedule, micro-batches and ranks making
up the global batch, global-norm clipping, weight decay by parameter, the validation loss, and a
resume on another rank count. `zerotrain train` runs on token files (data.order = "sequential":
llm.c's walk, so global sample g of the run is the window of T + 1 tokens at g * T) and a float64
PyTorch loop trains the same model from the same initial weights on the same windows:
torch.optim.AdamW (decay on the 2-D weights only), torch.nn.utils.clip_grad_norm_, and nanoGPT's
get_lr (linear warmup (it + 1) / (warmup + 1), cosine to min_lr at decay_steps), written here from
those definitions. Every step's logged lr, loss and pre-clip gradient norm, every evaluation's
val_loss (the mean of eval_batches batch means over the validation file's first windows) and the
final weights must agree with it.

Runs, all against one reference trajectory per model (the global batch is the same 8 windows a step
however it is split):
  * GPT-2, 1 rank, 2 micro-batches of 4 a step (ZeRO stage 0);
  * GPT-2, 2 ranks at stage 3, one micro-batch of 4 each, checkpointing at step 8;
  * that checkpoint resumed on 1 rank (2 micro-batches a step) for steps 9-16;
  * a Llama (grouped-query, tied head), 2 ranks at stage 3, 2 micro-batches of 2 each.
The schedule is exercised where it bends (3 warmup steps, cosine to min_lr) and clipping acts on
some steps and not others (checked on the reference). The bounds (BOUNDS) are shown to catch a
plausible mistake in each rule: the same reference with weight decay on every parameter, with no
clipping, or with the schedule's warmup one step late lands outside them.

usage: trainer_trajectory_test.py MPIRUN [MPIRUN FLAGS...] -- PATH/TO/zerotrain
"""
import json
import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import gpt2_reference  # noqa: E402
import llama_reference  # noqa: E402
from check_report import Checks  # noqa: E402
from run_dir_util import mpi_driver, ranks_trainer, train_records  # noqa: E402
from safetensors_io import read_safetensors  # noqa: E402

T = 32               # tokens a window
ROWS = 8             # windows a step (the global batch)
STEPS = 16
EVAL_EVERY = 8
EVAL_BATCHES = 2
VOCAB = 65
OPTIM = {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 3, "decay": "cosine", "grad_clip": 1.3,
         "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8}
CONFIG = {
    "model": {"n_layer": 2, "n_head": 2, "n_embd": 48, "block_size": T, "vocab_size": VOCAB},
    "data": {"order": "sequential"},  # the token files are added in main()
    "train": {"micro_batch": 4, "seq_len": T, "global_batch_tokens": ROWS * T, "max_steps": STEPS,
              "eval_every": EVAL_EVERY, "eval_batches": EVAL_BATCHES, "num_threads": 1, "seed": 4321},
    "optim": OPTIM,
    "log": {"sample_tokens": 0, "progress": "plain", "every_steps": 100},
}
LLAMA_MODEL = {"arch": "llama", "n_layer": 2, "n_head": 4, "n_kv_head": 2, "n_embd": 48, "block_size": T,
               "vocab_size": VOCAB, "intermediate_size": 128, "tie_embeddings": True, "rope_theta": 10000.0, "norm_eps": 1e-5}
# fp32 engine against a float64 reference. Measured on the 2-core CI machine: lr 7.7e-8 (its fp32
# rounding), losses, gradient norms and validation losses at most 1.4e-7, weights 2.5e-6 (GPT-2's
# key bias aside, below). The bounds leave 40-100x for other CPUs' BLAS kernels and orders of
# summation, and are 10x tighter than torch_parity.py's single-batch trajectories (1e-4), so the
# schedule's, clipping's and decay's mistakes below land outside them by orders of magnitude.
BOUNDS = {"lr": 1e-6, "loss": 1e-5, "grad_norm": 1e-5, "val_loss": 1e-5, "weights": 1e-4}


def markov_tokens(n, seed):
    """n tokens of a fixed random first-order chain over the vocabulary (each token followed by one
    of 4 likely successors): something a small model learns within a few steps."""
    rng = np.random.default_rng(seed)
    successors = rng.integers(0, VOCAB, size=(VOCAB, 4))
    choices = rng.integers(0, 4, size=n)
    out = np.empty(n, dtype=np.uint16)
    out[0] = 0
    for i in range(1, n):
        out[i] = successors[out[i - 1], choices[i]]
    return out


def windows(tokens, first, count):
    """inputs, targets [count, T] of sequential windows first .. first + count - 1."""
    starts = [g * T for g in range(first, first + count)]
    assert starts[-1] + T + 1 <= len(tokens), "the token file is too short for the run's windows"
    x = np.stack([tokens[s:s + T] for s in starts]).astype(np.int64)
    y = np.stack([tokens[s + 1:s + T + 1] for s in starts]).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def nanogpt_lr(it, lr, min_lr, warmup, decay_steps):
    """nanoGPT's get_lr for 0-based iteration `it`."""
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it >= decay_steps:
        return min_lr
    ratio = (it - warmup) / (decay_steps - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def reference_run(start, forward, cfg, train_tokens, val_tokens, micro_batch, variant=""):
    """The float64 trajectory: per step (lr, loss, pre-clip norm, clipped?), {step: val_loss} and the
    final weights. `variant` changes one rule on purpose (the bounds must catch it)."""
    params = {n: torch.tensor(w, dtype=torch.float64, requires_grad=True) for n, w in start.items()}
    decays = (lambda p: True) if variant == "decay_all" else (lambda p: gpt2_reference.has_weight_decay(p.shape))
    groups = [{"params": [p for p in params.values() if decays(p)], "weight_decay": OPTIM["weight_decay"]},
              {"params": [p for p in params.values() if not decays(p)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=OPTIM["lr"], betas=(OPTIM["beta1"], OPTIM["beta2"]), eps=OPTIM["eps"])
    warmup = OPTIM["warmup_steps"] + (1 if variant == "late_warmup" else 0)
    steps, evals = [], {}
    for it in range(STEPS):
        lr = nanogpt_lr(it, OPTIM["lr"], OPTIM["min_lr"], warmup, STEPS)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = windows(train_tokens, it * ROWS, ROWS)
        _, loss = forward(params, x, y, cfg)
        opt.zero_grad()
        loss.backward()
        clip = math.inf if variant == "no_clip" else OPTIM["grad_clip"]
        norm = float(torch.nn.utils.clip_grad_norm_(list(params.values()), clip))
        opt.step()
        steps.append((lr, loss.item(), norm, norm > OPTIM["grad_clip"]))
        if (it + 1) % EVAL_EVERY == 0 or it + 1 == STEPS:
            with torch.no_grad():
                batch_losses = []
                for b in range(EVAL_BATCHES):
                    vx, vy = windows(val_tokens, b * micro_batch, micro_batch)
                    batch_losses.append(forward(params, vx, vy, cfg)[1].item())
            evals[it + 1] = sum(batch_losses) / len(batch_losses)
    return steps, evals, {n: p.detach().numpy() for n, p in params.items()}


def relative(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def key_bias_free(name, w):
    """w without GPT-2's key bias (the middle third of c_attn.bias). Its gradient is zero in exact
    arithmetic (q . b_k shifts a whole row of scores, which the softmax ignores), so what either side
    computes is rounding noise, which AdamW divides by its own root-mean-square: about +-lr a step in
    directions neither side shares (measured 2-3e-4 of the tensor's norm after 16 steps)."""
    if not name.endswith("attn.c_attn.bias"):
        return w
    third = w.shape[0] // 3
    return np.concatenate([w[:third], w[2 * third:]])


def normwise(weights, ref):
    """max over tensors of |w - ref| / |ref| (Frobenius), GPT-2's key bias left out."""
    worst = 0.0
    for n in ref:
        w, r = key_bias_free(n, weights[n].astype(np.float64)), key_bias_free(n, ref[n])
        worst = max(worst, float(np.linalg.norm(w - r) / max(np.linalg.norm(r), 1e-30)))
    return worst


def run_errors(run_dir, reference, first_step=1):
    """The largest relative error of each compared quantity of the run against the reference (the
    run's steps from first_step), or None where the run lacks records."""
    steps, evals, final = reference
    recs = train_records(run_dir)
    train = {r["step"]: r for r in recs if r["type"] == "train"}
    evaluated = {r["step"]: r["val_loss"] for r in recs if r["type"] == "eval"}
    wanted = range(first_step, STEPS + 1)
    # A resumed run logs its checkpoint's last evaluation again (step 8 here): compared too.
    if sorted(train) != list(wanted) or not set(s for s in evals if s >= first_step) <= set(evaluated) <= set(evals):
        return None
    errors = {
        "lr": max(relative(train[s]["lr"], steps[s - 1][0]) for s in wanted),
        "loss": max(relative(train[s]["loss"], steps[s - 1][1]) for s in wanted),
        "grad_norm": max(relative(train[s]["grad_norm"], steps[s - 1][2]) for s in wanted),
        "val_loss": max(relative(evaluated[s], evals[s]) for s in evaluated),
    }
    weights, _, _ = read_safetensors(os.path.join(run_dir, "final.safetensors"))
    if sorted(weights) != sorted(final):
        return None
    errors["weights"] = normwise(weights, final)
    return errors


def check_run(check, name, run_dir, reference, first_step=1):
    if run_dir is None:
        return None
    errors = run_errors(run_dir, reference, first_step)
    if not check(errors is not None, f"{name}: train records for steps {first_step}-{STEPS}, its evaluations and "
                                     "final weights, as the reference's"):
        return None
    for key, err in errors.items():
        check(err <= BOUNDS[key], f"{name}: {key} within {BOUNDS[key]:.0e} of PyTorch's (largest relative "
                                  f"error {err:.2e})")
    return errors


def start_weights(check, train, name, *sets):
    """The run's initial weights: a 0-step run of the same config and seed (its final weights)."""
    run_dir = train(name, 1, "train.max_steps=0", *sets)
    if run_dir is None:
        return None
    weights, _, _ = read_safetensors(os.path.join(run_dir, "final.safetensors"))
    return weights


def main():
    checks = Checks()
    check = checks.check
    launcher, binary, work, _, env = mpi_driver(checks, "zt_trajectory_")
    train_tokens, val_tokens = markov_tokens(STEPS * ROWS * T + 1000, 1), markov_tokens(EVAL_BATCHES * 4 * T + 500, 2)
    config = json.loads(json.dumps(CONFIG))
    for split, tokens in (("train", train_tokens), ("val", val_tokens)):
        path = os.path.join(work, f"{split}.bin")  # raw uint16 (nanoGPT's format)
        tokens.tofile(path)
        config["data"][f"{split}_file"] = path
    config_path = os.path.join(work, "config.json")
    with open(config_path, "w") as f:
        json.dump(config, f)
    train = ranks_trainer(check, launcher, binary, config_path, work, env)

    # GPT-2.
    start = start_weights(check, train, "gpt2_init")
    if start is not None:
        g = config["model"]
        cfg = gpt2_reference.GPT2Config(n_layer=g["n_layer"], n_head=g["n_head"], n_embd=g["n_embd"],
                                        block_size=T, vocab_size=VOCAB, padded_vocab_size=VOCAB)
        ref = reference_run(start, gpt2_reference.forward, cfg, train_tokens, val_tokens, 4)
        clipped = sum(s[3] for s in ref[0])
        check(0 < clipped < STEPS, f"the reference clips on some steps and not others ({clipped} of {STEPS})")
        one = check_run(check, "gpt2 1 rank, 2 micro-batches", train("gpt2_1rank", 1), ref)
        two_dir = train("gpt2_2ranks_stage3", 2, "zero.stage=3", "checkpoint.every_steps=8")
        check_run(check, "gpt2 2 ranks stage 3", two_dir, ref)
        if two_dir is not None:  # into a run directory of its own: the first run's records stay as they were
            ckpt = os.path.join(two_dir, "checkpoints", "step_00000008")
            check_run(check, "gpt2 resumed at step 8 on 1 rank",
                      train("gpt2_resumed", 1, extra=["--resume", ckpt]), ref, first_step=9)
        if one is not None:  # the bounds catch a plausible mistake in each rule the run follows
            for variant, what in (("decay_all", "weight decay on every parameter"), ("no_clip", "no clipping"),
                                  ("late_warmup", "a warmup one step longer")):
                wrong = reference_run(start, gpt2_reference.forward, cfg, train_tokens, val_tokens, 4, variant)
                errors = run_errors(os.path.join(work, "gpt2_1rank"), wrong)
                outside = [k for k, e in errors.items() if e > BOUNDS[k]]
                check(bool(outside), f"a reference with {what} lies outside the bounds ({', '.join(outside) or 'none'})")

    # A Llama: grouped-query heads and a tied head, 2 ranks at stage 3 with 2 micro-batches of 2 each.
    llama = ["model=" + json.dumps(LLAMA_MODEL), "train.micro_batch=2"]
    start = start_weights(check, train, "llama_init", *llama)
    if start is not None:
        m = LLAMA_MODEL
        cfg = llama_reference.LlamaConfig(n_layer=m["n_layer"], n_head=m["n_head"], n_kv_head=m["n_kv_head"],
                                          n_embd=m["n_embd"], intermediate_size=128, block_size=T, vocab_size=VOCAB,
                                          rope_theta=m["rope_theta"], norm_eps=m["norm_eps"], tie_embeddings=True)
        ref = reference_run(start, llama_reference.forward, cfg, train_tokens, val_tokens, 2)
        check_run(check, "llama 2 ranks stage 3, 2 micro-batches", train("llama_2ranks_stage3", 2, "zero.stage=3", *llama),
                  ref)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
