#!/usr/bin/env python3
"""A Llama (model.arch = "llama", issue 22) through everything a GPT-2 run has, on real ranks:
  * stages 0-3 in deterministic mode give bitwise identical losses, gradient norms and final
    weights at N = 2 and N = 3 ranks (padded shards), with gradient accumulation at N = 2, with
    bf16 parameters, and with bf16 parameters and activations; in fp32 they follow the single-rank
    run within the reduction-order bound of zero_equivalence_test.py;
  * every rank's measured peak per category equals the prediction, to the byte, at every stage
    (the metrics' memory record), with and without activation checkpointing (same bits), and with
    the head in vocabulary chunks (stages 0-3 bitwise at 3 ranks, tied and untied);
  * layers in two units (train.block_units = 2, with the head in chunks and every other layer
    checkpointed): stages 0-3 bitwise at 3 ranks, the first step's loss that of whole layers and
    the rest within the bound (the gradient norm sums per unit), the prediction held;
  * a run stopped after 4 of 8 steps and resumed with --resume latest is bitwise the uninterrupted
    one (2 ranks, stage 3), a resume on 1 rank at stage 0 follows it within the bound, and
    `sample --ckpt` gives `sample --run`'s text;
  * resuming a GPT-2 checkpoint with the Llama config is a one-line error, exit 2.

usage: llama_zero_test.py MPIRUN [FLAGS...] -- PATH/TO/zerotrain
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402
from run_dir_util import checked_run, deep_merge  # noqa: E402

BASE = {
    "model": {"arch": "llama", "n_layer": 2, "n_head": 4, "n_kv_head": 2, "n_embd": 32, "intermediate_size": 80,
              "block_size": 32, "vocab_size": 64, "tie_embeddings": True},
    "data": {"embedded_chars": 60000},
    "train": {"micro_batch": 12, "max_steps": 8, "eval_batches": 2, "num_threads": 1, "deterministic": True},
    "optim": {"lr": 3e-3, "warmup_steps": 2, "decay_steps": 8, "grad_clip": 1.0},
    "log": {"sample_tokens": 0, "progress": "plain"},
}
LOSS_BOUND, WEIGHT_BOUND = 2e-5, 1e-4  # reduction order only (zero_equivalence_test.py)
report = Checks()
check = report.check


def main():
    split = sys.argv.index("--")
    launcher, binary = sys.argv[1:split], sys.argv[split + 1]
    work = report.work_folder("zt_llama_zero_")
    count = [0]

    def train(ranks, over, name, extra=()):
        count[0] += 1
        path, run_dir = os.path.join(work, f"config{count[0]}.json"), os.path.join(work, name)
        with open(path, "w") as f:
            json.dump(deep_merge(BASE, over), f)
        cmd = ([binary] if ranks == 1 else launcher + ["-np", str(ranks), binary])
        p = subprocess.run(cmd + ["train", "--config", path, "--run-dir", run_dir, *extra], capture_output=True,
                           text=True, timeout=300)
        return checked_run(check, name, p, run_dir)

    def rel(a, b):
        return max(abs(x - y) / abs(y) for x, y in zip(a, b))

    def wdiff(a, b):
        return max(max(abs(x - y) for x, y in zip(a[n], b[n])) / max(max(abs(y) for y in b[n]), 1e-30) for n in b)

    ref = train(1, {}, "reference")
    if ref is None:
        return report.finish()
    for n, accum, precision in ((2, 1, {}), (3, 1, {}), (2, 2, {}), (2, 1, {"param_dtype": "bf16"}),
                                (3, 1, {"param_dtype": "bf16", "activations": "bf16"})):
        over = {"train": {"micro_batch": 12 // n // accum, "grad_accum": accum}, "precision": precision}
        what = f"N={n}" + (f" grad_accum {accum}" if accum > 1 else "") + "".join(f" {k} bf16" for k in precision)
        runs = [train(n, deep_merge(over, {"zero": {"stage": st}}), f"n{n}_a{accum}_{len(precision)}_s{st}")
                for st in range(4)]
        if any(r is None for r in runs):
            continue
        check(all(r["curve"] == runs[0]["curve"] and r["weights"] == runs[0]["weights"] for r in runs),
              f"{what}: stages 0-3 give bitwise identical losses, gradient norms and final weights")
        if precision:  # bf16: a trajectory of its own (its stages agree bit for bit, above)
            check(len(runs[0]["curve"]) == 8 and runs[0]["curve"][-1][1] < runs[0]["curve"][0][1],
                  f"{what}: 8 steps, the loss falling ({runs[0]['curve'][0][1]:.4f} -> {runs[0]['curve'][-1][1]:.4f})")
            continue
        d = rel([l for _, l, _ in runs[0]["curve"]], [l for _, l, _ in ref["curve"]])
        w = wdiff(runs[0]["weights"], ref["weights"])
        check(len(runs[0]["curve"]) == 8 and d <= LOSS_BOUND and w <= WEIGHT_BOUND,
              f"{what}: follows the single rank (losses {d:.1e} <= {LOSS_BOUND}, weights {w:.1e} <= {WEIGHT_BOUND})")
    # The head in vocabulary chunks (each chunk of the head's table a unit, reduced in its own rounds):
    # stages 0-3 bitwise at N = 3, tied and untied, the memory prediction held by train().
    for tied in (True, False):
        over = {"model": {"vocab_size": 200, "tie_embeddings": tied}, "train": {"micro_batch": 4, "head_chunks": 2}}
        runs = [train(3, deep_merge(over, {"zero": {"stage": st}}), f"chunks_{tied}_s{st}") for st in range(4)]
        # Stage 3 keeping the units its backward reads gathered (an untied table's is not read).
        runs.append(train(3, deep_merge(over, {"zero": {"stage": 3, "reshard_after_forward": False}}),
                          f"chunks_{tied}_s3_keep"))
        if all(r is not None for r in runs):
            check(all(r["curve"] == runs[0]["curve"] and r["weights"] == runs[0]["weights"] for r in runs),
                  f"N=3 head_chunks 2, {'tied' if tied else 'untied'}: stages 0-3 (and 3 without resharding after "
                  f"forward) give bitwise identical losses, gradient norms and final weights")
    # Layers in attention and MLP units: the same kernels in the same order and the same per-element
    # reductions, so the same gradients (LlamaModel.SplitLayersGiveTheWholeLayersBits holds them bit
    # for bit); the global norm sums per unit, so it may differ in its last bits, and a clipped
    # update with it: the run follows the whole layers' within the bound. The recompute of a
    # checkpointed layer holds both halves (the schedule the prediction replays).
    split_over = {"model": {"vocab_size": 200}, "train": {"micro_batch": 4, "head_chunks": 2,
                                                          "activation_checkpointing": "every:2"}}
    whole = train(3, deep_merge(split_over, {"zero": {"stage": 3}}), "split_whole_s3")
    runs = [train(3, deep_merge(split_over, {"zero": {"stage": st}, "train": {"block_units": 2}}), f"split_s{st}")
            for st in range(4)]
    if whole and all(r is not None for r in runs):
        check(all(r["curve"] == runs[0]["curve"] and r["weights"] == runs[0]["weights"] for r in runs),
              "N=3 block_units 2 (head_chunks 2, checkpointing every:2): stages 0-3 give bitwise identical "
              "losses, gradient norms and final weights")
        d = rel([l for _, l, _ in runs[0]["curve"]], [l for _, l, _ in whole["curve"]])
        w = wdiff(runs[0]["weights"], whole["weights"])
        check(runs[0]["curve"][0][1] == whole["curve"][0][1] and d <= LOSS_BOUND and w <= WEIGHT_BOUND,
              f"N=3 block_units 2: the first loss the whole layers', then within the bound (losses {d:.1e}, "
              f"weights {w:.1e})")
    # Activation checkpointing recomputes the same forward: the same bits, its own (smaller) prediction.
    two = {"train": {"micro_batch": 6}, "zero": {"stage": 3}}
    plain = train(2, two, "n2_s3_again")
    for policy in ("all", "every:2"):
        ckpt = train(2, deep_merge(two, {"train": {"micro_batch": 6, "activation_checkpointing": policy}}),
                     f"n2_s3_ckpt_{policy.replace(':', '')}")
        if plain and ckpt:
            check(ckpt["curve"] == plain["curve"] and ckpt["weights"] == plain["weights"],
                  f"N=2 stage 3 activation_checkpointing {policy}: bitwise the run without")

    # Stop after 4 steps (a checkpoint at the end), resume with --resume latest.
    first = deep_merge(two, {"train": {"micro_batch": 6, "max_steps": 4}, "checkpoint": {"at_end": True},
                             "log": {"sample_tokens": 0}})
    stopped = train(2, first, "resumed")
    resumed = stopped and train(2, two, "resumed", ["--resume", "latest"])
    if plain and resumed:
        check(resumed["curve"] == plain["curve"] and resumed["weights"] == plain["weights"],
              "stopped after 4 steps and resumed on 2 ranks at stage 3: bitwise the uninterrupted run")
    # (metrics.jsonl then holds the first four steps of 2 ranks and the 1-rank resume's steps 5-8)
    one = stopped and train(1, deep_merge(BASE, {"zero": {"stage": 0}}), "resumed", ["--resume", "latest"])
    if plain and one:
        d = rel([l for _, l, _ in one["curve"]], [l for _, l, _ in plain["curve"]])
        w = wdiff(one["weights"], plain["weights"])
        check(d <= LOSS_BOUND and w <= WEIGHT_BOUND,
              f"saved by 2 ranks at stage 3, resumed on 1 at stage 0: follows the uninterrupted run "
              f"(losses {d:.1e}, weights {w:.1e})")
    if plain:
        sample = [binary, "sample", "--tokens", "20", "--seed", "3"]
        ckpts = os.path.join(work, "resumed", "checkpoints")
        from_ckpt = subprocess.run(sample + ["--ckpt", os.path.join(ckpts, "step_00000004")], capture_output=True,
                                   text=True, timeout=120)
        stopped_run = train(2, first, "stopped_again")
        from_run = stopped_run and subprocess.run(sample + ["--run", stopped_run["dir"]], capture_output=True, text=True,
                                                  timeout=120)
        check(from_run and from_ckpt.returncode == 0 and from_ckpt.stdout == from_run.stdout
              and len(from_ckpt.stdout) > 10,
              f"sample --ckpt (2 rank files, stage 3) gives sample --run's text ({from_ckpt.stdout.strip()!r}, "
              f"{from_ckpt.stderr.strip()[-200:]})")

    # A GPT-2 checkpoint is not this model's.
    gpt = deep_merge(BASE, {"train": {"max_steps": 2}, "checkpoint": {"at_end": True}})
    gpt["model"] = {"arch": "gpt2", "n_layer": 2, "n_head": 4, "n_embd": 32, "block_size": 32, "vocab_size": 64}
    path = os.path.join(work, "gpt.json")
    with open(path, "w") as f:
        json.dump(gpt, f)
    gpt_dir = os.path.join(work, "gpt_run")
    p = subprocess.run([binary, "train", "--config", path, "--run-dir", gpt_dir], capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 0, f"a GPT-2 run saves a checkpoint ({p.stderr.strip()[-200:]})")
    llama_path = os.path.join(work, "llama_resume.json")
    with open(llama_path, "w") as f:
        json.dump(BASE, f)
    p = subprocess.run([binary, "train", "--config", llama_path, "--run-dir", gpt_dir, "--resume", "latest"],
                       capture_output=True, text=True, timeout=120)
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 2 and len(lines) == 1 and "differs from the config's" in lines[0] and
          'model.arch: "gpt2" in the checkpoint, "llama" in the config)' in lines[0],
          f"resuming a GPT-2 checkpoint with a Llama config: one line, exit 2 ({p.stderr.strip()[-300:]})")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
