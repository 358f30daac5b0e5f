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

Runs, against one reference trajectory per model, precision and dropout (the global batch is the
same 8 windows a step however it is split):
  * GPT-2, 1 rank, 2 micro-batches of 4 a step (ZeRO stage 0);
  * the same from its step-0 checkpoint exported as an llm.c file and as a Hugging Face folder
    (`ckpt export`, then train.init_from);
  * GPT-2, 2 ranks at stage 3, one micro-batch of 4 each, checkpointing at step 8;
  * that checkpoint resumed on 1 rank (2 micro-batches a step) for steps 9-16;
  * GPT-2, 4 ranks, hybrid sharding (stage 3 within groups of 2, replicated across them);
  * GPT-2 with bf16 parameters (fp32 master weights), 1 rank and 2 ranks at stage 3, against the
    reference's model of mixed precision (looser bounds: BF16_BOUNDS);
  * GPT-2 with dropout 0.1 at nanoGPT's four sites, 1 rank and 2 ranks at stage 3, against a
    reference drawing the masks from the engine's contract ([Note: dropout masks]: Philox4x32-10
    keyed by seed, site and global sample; tests/parity/dropout_reference.py);
  * a Llama (grouped-query, tied head), 2 ranks at stage 3, 2 micro-batches of 2 each;
  * a Llama 3.1-style one (multi-query, untied head, rope_theta 500000, llama3 rope scaling), 1 rank
    at stage 1 with its collectives kept (zero.solo_path false), 4 micro-batches of 2.
The schedule is exercised where it bends (3 warmup steps, cosine to min_lr at step 12, the floor
after) and clipping acts on some steps and not others (checked on the reference). The bounds
(BOUNDS) are shown to catch a plausible mistake in each rule: the same reference with weight decay
on every parameter or on none, with no clipping, or with the schedule's warmup one step late lands outside
them, a mixed-precision reference whose master weights are kept in bf16 outside BF16_BOUNDS, and a
dropout reference whose masks repeat every step outside dropout_bounds.

With `--device cuda` after the binary the same runs train on the GPU (several ranks sharing it
through comm.backend = "mpi"; no hybrid run, which those collectives cannot split), against
CUDA_BOUNDS; without a device that exits 77 (a ctest skip).

usage: trainer_trajectory_test.py MPIRUN [MPIRUN FLAGS...] -- PATH/TO/zerotrain [--device cuda]
"""
import json
import math
import os
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import dropout_reference  # noqa: E402
import gpt2_reference  # noqa: E402
import llama_reference  # noqa: E402
from check_report import Checks  # noqa: E402
from cuda_presence import require_cuda_device  # noqa: E402
from run_dir_util import mpi_driver, ranks_trainer, train_records  # noqa: E402
from safetensors_io import read_safetensors  # noqa: E402

T = 32               # tokens a window
ROWS = 8             # windows a step (the global batch)
STEPS = 16
EVAL_EVERY = 8
EVAL_WINDOWS = 16    # validation windows an evaluation reads: eval_batches x micro_batch
VOCAB = 65
OPTIM = {"lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 3, "decay": "cosine", "decay_steps": 12,
         "grad_clip": 1.5, "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8}
CONFIG = {
    "model": {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": T, "vocab_size": VOCAB},
    "data": {"order": "sequential"},  # the token files are added in main()
    "train": {"micro_batch": 4, "seq_len": T, "global_batch_tokens": ROWS * T, "max_steps": STEPS,
              "eval_every": EVAL_EVERY, "eval_batches": EVAL_WINDOWS // 4, "num_threads": 1, "seed": 4321},
    "optim": OPTIM,
    "log": {"sample_tokens": 0, "progress": "plain", "every_steps": 100},
}
LLAMA_MODEL = {"arch": "llama", "n_layer": 2, "n_head": 4, "n_kv_head": 2, "n_embd": 64, "block_size": T,
               "vocab_size": VOCAB, "intermediate_size": 128, "tie_embeddings": True, "rope_theta": 10000.0,
               "norm_eps": 1e-5}
# Llama 3.1's rope scaling (factor 8), its original context shortened to 64 so that at head size 16
# and rope_theta 500000 (wavelengths 6.3, 32, 167, ...) the three bands all hold a frequency: kept
# (under 64 / 4), blended (between) and divided by the factor (over 64 / 1).
LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 64}
# fp32 engine against a float64 reference. Measured on the 2-core CI machine: lr 5.3e-8 (its fp32
# rounding), losses and validation losses at most 9.3e-8, gradient norms 2.2e-7, weights 7.0e-6
# (GPT-2's key bias aside, below). The bounds leave 14-45x for other CPUs' BLAS kernels and orders
# of summation (19x on the lr, whose error is one fp32 rounding wherever it runs), are 10x tighter
# than torch_parity.py's single-batch trajectories (1e-4), and the schedule's, clipping's and
# decay's mistakes below land outside them by 8x to 1000x.
BOUNDS = {"lr": 1e-6, "loss": 1e-5, "grad_norm": 1e-5, "val_loss": 1e-5, "weights": 1e-4}
# bf16 parameters against the reference's model of them (torch_parity.py's): one bf16 rounding of
# each gradient, where the engine rounds a tied table's two contributions, and on 2 ranks each
# rank's share before the fp32 reduction, once more. Measured: losses and validation losses at most
# 2.7e-5, gradient norms 1.4e-3; weights 6.9e-3 of a tensor's norm, in the biases, which start at
# zero and whose AdamW steps (about +-lr) follow the sign of gradients those roundings move. The
# loss bound (11x the measured) is what catches bf16 master weights (8x over it).
BF16_BOUNDS = {"lr": 1e-6, "loss": 3e-4, "grad_norm": 1e-2, "val_loss": 3e-4, "weights": 2e-2}
# On a GPU (--device cuda; never run yet): exact FP32 products (precision.matmul = "fp32"), but other
# kernels' orders of summation and exponentials (the cross-entropy's ex2.approx): torch_parity.py's
# fp32 trajectory bound, 1e-4, and ten times it for the weights. bf16 parameters keep BF16_BOUNDS.
CUDA_BOUNDS = {"lr": 1e-6, "loss": 1e-4, "grad_norm": 1e-4, "val_loss": 1e-4, "weights": 1e-3}


def dropout_bounds(bounds):
    """With dropout the trajectories drift apart faster after the first steps (step 1's gradient
    norm agrees to 1.2e-9, the later ones to 3.8e-6; weights 6.9e-5, in layer 1's ln_1 bias):
    gradient norms and weights get 1e-4 and 1e-3 (26x and 14x the measured), the losses keep
    theirs. Masks that repeat every step land outside by 600x on the loss."""
    return dict(bounds, grad_norm=max(bounds["grad_norm"], 1e-4), weights=max(bounds["weights"], 1e-3))


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


def reference_run(start, forward, cfg, train_tokens, val_tokens, variant="", bf16=False, dropout=0.0):
    """The float64 trajectory: per step (lr, loss, pre-clip norm, clipped?), {step: val_loss} and the
    final weights. `variant` changes one rule on purpose (the bounds must catch it). bf16: the
    engine's mixed precision as torch_parity.py's reference models it: fp32 master weights that
    AdamW updates in fp32, each step's forward and backward (float64) on their bf16 rounding, and
    the gradient rounded to bf16. dropout: GPT-2's training forwards (gpt2_reference.forward's
    dropout_scale) drop at that probability with dropout_reference's masks, row b of step it being global sample it * ROWS + b (evaluations do
    not drop)."""
    master_dtype = torch.float32 if bf16 else torch.float64
    master = {n: torch.tensor(w, dtype=master_dtype, requires_grad=not bf16) for n, w in start.items()}

    def working():
        if not bf16:
            return master
        return {n: gpt2_reference.bf16_round(m.detach()).double().requires_grad_() for n, m in master.items()}

    decays = {"decay_all": lambda p: True, "no_decay": lambda p: False}.get(
        variant, lambda p: gpt2_reference.has_weight_decay(p.shape))
    groups = [{"params": [p for p in master.values() if decays(p)], "weight_decay": OPTIM["weight_decay"]},
              {"params": [p for p in master.values() if not decays(p)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=OPTIM["lr"], betas=(OPTIM["beta1"], OPTIM["beta2"]), eps=OPTIM["eps"])
    warmup = OPTIM["warmup_steps"] + (1 if variant == "late_warmup" else 0)
    steps, evals = [], {}
    for it in range(STEPS):
        lr = nanogpt_lr(it, OPTIM["lr"], OPTIM["min_lr"], warmup, OPTIM["decay_steps"])
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = windows(train_tokens, it * ROWS, ROWS)
        params = working()
        drop = ()  # GPT-2's dropout_scale where the run drops
        if dropout > 0.0:
            first = 0 if variant == "masks_per_row" else it * ROWS  # the wrong rule: the same masks every step
            drop = (dropout_reference.scales(dropout, CONFIG["train"]["seed"], first),)
        _, loss = forward(params, x, y, cfg, *drop)
        opt.zero_grad()
        loss.backward()
        if bf16:
            for n, m in master.items():
                m.grad = gpt2_reference.bf16_round(params[n].grad)
        clip = math.inf if variant == "no_clip" else OPTIM["grad_clip"]
        norm = float(torch.nn.utils.clip_grad_norm_(list(master.values()), clip))
        opt.step()
        if variant == "bf16_master":  # the master weights kept in bf16
            with torch.no_grad():
                for m in master.values():
                    m.copy_(gpt2_reference.bf16_round(m))
        steps.append((lr, loss.item(), norm, norm > OPTIM["grad_clip"]))
        if (it + 1) % EVAL_EVERY == 0 or it + 1 == STEPS:
            with torch.no_grad():  # the mean of eval_batches equal batches' means: the windows' mean
                evals[it + 1] = forward(working(), *windows(val_tokens, 0, EVAL_WINDOWS), cfg)[1].item()
    return steps, evals, {n: m.detach().double().numpy() for n, m in master.items()}


def relative(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def key_bias_free(name, w):
    """w without GPT-2's key bias (the middle third of c_attn.bias). Its gradient is zero in exact
    arithmetic (q . b_k shifts a whole row of scores, which the softmax ignores), so what either side
    computes is rounding noise, which AdamW divides by its own root-mean-square plus eps (1e-8):
    fp32's noise is large enough beside eps to step the engine's key bias by a fraction of lr in
    the noise's directions, where float64's, some 1e9 times smaller, leaves the reference's in place.
    Measured: c_attn.bias 3.5-4.3e-4 of its norm off after 16 steps, all of it in the key third;
    without that third, 6e-6."""
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


def check_run(check, name, run_dir, reference, bounds, first_step=1):
    if run_dir is None:
        return None
    errors = run_errors(run_dir, reference, first_step)
    if not check(errors is not None, f"{name}: train records for steps {first_step}-{STEPS}, its evaluations and "
                                     "final weights, as the reference's"):
        return None
    for key, err in errors.items():
        check(err <= bounds[key], f"{name}: {key} within {bounds[key]:.0e} of PyTorch's (largest relative "
                                  f"error {err:.2e})")
    return errors


def check_caught(check, what, run_dir, wrong, bounds):
    """Checks that the run lies outside `bounds` of a reference that follows a wrong rule."""
    errors = run_errors(run_dir, wrong) or {}
    outside = ", ".join(f"{k} {e:.1e} > {bounds[k]:.0e}" for k, e in errors.items() if e > bounds[k])
    check(bool(outside), f"{what} lies outside the bounds ({outside or 'none'})")


def llama_config(m):
    """The reference's config of a Llama model section (every key the test sets)."""
    return llama_reference.LlamaConfig(n_layer=m["n_layer"], n_head=m["n_head"], n_kv_head=m["n_kv_head"],
                                       n_embd=m["n_embd"], intermediate_size=m["intermediate_size"], block_size=T,
                                       vocab_size=m["vocab_size"], rope_theta=m["rope_theta"], norm_eps=m["norm_eps"],
                                       tie_embeddings=m["tie_embeddings"],
                                       rope_scaling=tuple(sorted((m.get("rope_scaling") or {}).items())))


def start_weights(check, train, name, *sets):
    """The run's initial weights: a 0-step run of the same config and seed (its final weights)."""
    run_dir = train(name, 1, "train.max_steps=0", "checkpoint.at_end=true", *sets)  # step 0 saved
    if run_dir is None:
        return None
    weights, _, _ = read_safetensors(os.path.join(run_dir, "final.safetensors"))
    return weights


def main():
    after_binary = sys.argv[sys.argv.index("--") + 2:]
    if after_binary not in ([], ["--device", "cpu"], ["--device", "cuda"]):
        print(f"{__doc__.strip().splitlines()[-1]} (got {' '.join(after_binary)} after the binary)")
        return 2
    device = after_binary[1] if after_binary else "cpu"
    if device == "cuda":
        missing = require_cuda_device(sys.argv[sys.argv.index("--") + 1], "the whole-run trajectories on a GPU")
        if missing is not None:
            return missing
    bounds, bf16_bounds = (BOUNDS, BF16_BOUNDS) if device == "cpu" else (CUDA_BOUNDS, BF16_BOUNDS)
    checks = Checks()
    check = checks.check
    launcher, binary, work, _, env = mpi_driver(checks, "zt_trajectory_")
    train_tokens, val_tokens = markov_tokens(STEPS * ROWS * T + 1000, 1), markov_tokens(EVAL_WINDOWS * T + 500, 2)
    config = json.loads(json.dumps(CONFIG))
    if device == "cuda":  # several ranks share the one GPU through the staged MPI collectives
        config.update(device="cuda", comm={"backend": "mpi"})
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
        ref = reference_run(start, gpt2_reference.forward, cfg, train_tokens, val_tokens)
        clipped = sum(s[3] for s in ref[0])
        check(0 < clipped < STEPS, f"the reference clips on some steps and not others ({clipped} of {STEPS})")
        one = check_run(check, "gpt2 1 rank, 2 micro-batches", train("gpt2_1rank", 1), ref, bounds=bounds)
        # Step 0 exported and trained from (train.init_from) under another seed, whose initial
        # weights the file must replace: the same trajectory, so the export and the import lose
        # nothing of fp32 weights (with sequential windows and no dropout the seed draws nothing else).
        for fmt, out in (("llmc", os.path.join(work, "gpt2_init.bin")), ("hf", os.path.join(work, "gpt2_init_hf"))):
            p = subprocess.run([binary, "ckpt", "export", os.path.join(work, "gpt2_init", "checkpoints"), "--format",
                                fmt, "--out", out], capture_output=True, text=True, timeout=120)
            if check(p.returncode == 0, f"step 0 exported as {fmt}" + ("" if p.returncode == 0 else f": {p.stderr}")):
                check_run(check, f"gpt2 from its {fmt} export (train.init_from)",
                          train(f"gpt2_from_{fmt}", 1, f"train.init_from={out}", "train.seed=999"), ref,
                          bounds=bounds)
        two_dir = train("gpt2_2ranks_stage3", 2, "zero.stage=3", "checkpoint.every_steps=8")
        check_run(check, "gpt2 2 ranks stage 3", two_dir, ref, bounds=bounds)
        if device == "cpu":  # the staged collectives of ranks sharing a GPU cannot split into groups
            check_run(check, "gpt2 4 ranks, hybrid stage 3 in groups of 2",
                      train("gpt2_4ranks_hybrid", 4, "zero.stage=3", "zero.shard_group_size=2", "train.micro_batch=2",
                            "train.eval_batches=8"), ref, bounds=bounds)
        if two_dir is not None:  # into a run directory of its own: the first run's records stay as they were
            ckpt = os.path.join(two_dir, "checkpoints", "step_00000008")
            check_run(check, "gpt2 resumed at step 8 on 1 rank",
                      train("gpt2_resumed", 1, extra=["--resume", ckpt]), ref, first_step=9, bounds=bounds)
        if one is not None:  # the bounds catch a plausible mistake in each rule the run follows
            for variant, what in (("decay_all", "weight decay on every parameter"), ("no_decay", "no weight decay"),
                                  ("no_clip", "no clipping"), ("late_warmup", "a warmup one step longer")):
                wrong = reference_run(start, gpt2_reference.forward, cfg, train_tokens, val_tokens, variant)
                check_caught(check, f"a reference with {what}", os.path.join(work, "gpt2_1rank"), wrong, bounds)

        # Mixed precision: bf16 parameters and gradients, fp32 master weights and AdamW.
        ref16 = reference_run(start, gpt2_reference.forward, cfg, train_tokens, val_tokens, bf16=True)
        check_run(check, "gpt2 bf16 1 rank", train("gpt2_bf16_1rank", 1, "precision.param_dtype=bf16",
                                                   "train.micro_batch=8", "train.eval_batches=2"), ref16,
                  bounds=bf16_bounds)
        check_run(check, "gpt2 bf16 2 ranks stage 3", train("gpt2_bf16_2ranks_stage3", 2, "precision.param_dtype=bf16",
                                                            "zero.stage=3"), ref16, bounds=bf16_bounds)
        if os.path.isdir(os.path.join(work, "gpt2_bf16_1rank")):
            wrong = reference_run(start, gpt2_reference.forward, cfg, train_tokens, val_tokens, "bf16_master",
                                  bf16=True)
            check_caught(check, "a bf16 reference with bf16 master weights", os.path.join(work, "gpt2_bf16_1rank"),
                         wrong, bf16_bounds)

        # Dropout 0.1 at nanoGPT's four sites, its masks from the contract's Philox keying by global
        # sample (dropout_reference.py, whose Philox gives Random123's known answers): 1 rank with 2
        # micro-batches and 2 ranks at stage 3 take each sample's mask from its index in the run.
        check(dropout_reference.philox_known_answer(), "the reference's Philox4x32-10 gives Random123's known answers")
        refd = reference_run(start, gpt2_reference.forward, cfg, train_tokens, val_tokens, dropout=0.1)
        drop_dir = train("gpt2_dropout_1rank", 1, "model.dropout=0.1")
        check_run(check, "gpt2 dropout 0.1, 1 rank, 2 micro-batches", drop_dir, refd, bounds=dropout_bounds(bounds))
        check_run(check, "gpt2 dropout 0.1, 2 ranks stage 3",
                  train("gpt2_dropout_2ranks_stage3", 2, "model.dropout=0.1", "zero.stage=3"), refd,
                  bounds=dropout_bounds(bounds))
        if drop_dir is not None:
            wrong = reference_run(start, gpt2_reference.forward, cfg, train_tokens, val_tokens, "masks_per_row",
                                  dropout=0.1)
            check_caught(check, "a dropout reference whose masks repeat every step", drop_dir, wrong,
                         dropout_bounds(bounds))

    def llama_case(what, name, model, ranks, *sets):
        """A Llama of `model` trained on `ranks` ranks from its own step-0 weights, 2 sequences a
        micro-batch, against the reference."""
        common = ["model=" + json.dumps(model), "train.micro_batch=2", "train.eval_batches=8"]
        start = start_weights(check, train, name + "_init", *common)
        if start is not None:
            ref = reference_run(start, llama_reference.forward, llama_config(model), train_tokens, val_tokens)
            check_run(check, what, train(name, ranks, *sets, *common), ref, bounds=bounds)

    # A Llama: grouped-query heads and a tied head, 2 ranks at stage 3 with 2 micro-batches of 2 each.
    llama_case("llama 2 ranks stage 3, 2 micro-batches", "llama_2ranks_stage3", LLAMA_MODEL, 2, "zero.stage=3")
    # A Llama 3.1-style one: multi-query attention, an untied head, rope_theta 500000 and llama3
    # rope scaling, RMSNorm eps 1e-6; 1 rank at stage 1 with 4 micro-batches of 2 (the optimizer
    # sharded over one rank's collectives kept: zero.solo_path false).
    model3 = dict(LLAMA_MODEL, n_kv_head=1, tie_embeddings=False, rope_theta=500000.0, norm_eps=1e-6,
                  rope_scaling=LLAMA3_SCALING)
    llama_case("llama3-style 1 rank stage 1, 4 micro-batches", "llama3_1rank_stage1", model3, 1, "zero.stage=1",
               "zero.solo_path=false")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
