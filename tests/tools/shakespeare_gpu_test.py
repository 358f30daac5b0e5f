#!/usr/bin/env python3
"""tools/shakespeare_gpu.py end to end on the CPU (its --device cpu escape), 6 steps at batch 2:
without a GPU the tool stops with one line and a non-zero exit; both engines run in one invocation
and the results file holds both validation curves, the median step times and the time ratio;
the PyTorch trainer's hyperparameters, read back from its model and optimizer, and zerotrain's
resolved config are configs/shakespeare_char.json's (with the test's overrides), their learning
rates agree step by step, and weight decay covers exactly the 2-D tensors; a run stopped part-way
(the time limit's path) exits 3, merges nothing, and the same command continues it to the
uninterrupted run's validation loss; an invocation with one engine merges into the file instead
of overwriting it. Exit 77 (ctest: skipped, shown) when the corpus is absent.

usage: shakespeare_gpu_test.py --zerotrain build/zerotrain
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402

TOOL = os.path.join(ROOT, "tools", "shakespeare_gpu.py")
CORPUS = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt")
STEPS, BATCH, EVAL_BATCHES, EVAL_EVERY = 6, 2, 2, 2
EVAL_STEPS = [2, 4, 6]


def run_tool(zerotrain, *flags):
    # One thread for each engine (zerotrain's train.num_threads, PyTorch's OMP_NUM_THREADS): under
    # ctest -j2 a thread for each core beside another test's took twice as long.
    cmd = [sys.executable, TOOL, "--zerotrain", zerotrain, "--python", sys.executable, "--device", "cpu",
           "--steps", str(STEPS), "--batch", str(BATCH), "--eval-batches", str(EVAL_BATCHES),
           "--eval-every", str(EVAL_EVERY), "--set", "train.num_threads=1", *flags]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=280, env=dict(os.environ, OMP_NUM_THREADS="1"))
    print(f"$ shakespeare_gpu.py ... {' '.join(flags)}  -> exit {p.returncode}")
    if p.returncode not in (0, 3):
        print(p.stdout[-2000:], p.stderr[-2000:])
    return p


def load(path):
    with open(path) as f:
        return json.load(f)


def expected_hyperparameters():
    """configs/shakespeare_char.json as the test's overrides change it (warm-up: min(100, steps / 2))."""
    c = load(os.path.join(ROOT, "configs", "shakespeare_char.json"))
    model = dict(c["model"])
    train = {"micro_batch": BATCH, "seq_len": model["block_size"], "grad_accum": c["train"]["grad_accum"],
             "max_steps": STEPS, "eval_every": EVAL_EVERY, "eval_batches": EVAL_BATCHES, "seed": c["train"]["seed"]}
    optim = dict(c["optim"], decay_steps=STEPS, warmup_steps=min(c["optim"]["warmup_steps"], STEPS // 2))
    return {"model": model, "train": train, "optim": optim}


def same(a, b):
    return a == b or (isinstance(a, float) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-6))


def check_hyperparameters(checks, engine, got, expected):
    bad = [f"{s}.{k}: {got.get(s, {}).get(k)!r} != {v!r}" for s in expected for k, v in expected[s].items()
           if not same(got.get(s, {}).get(k), v)]
    checks.check(not bad, f"{engine}'s hyperparameters are the config's ({'; '.join(bad) or 'all equal'})")


def check_two_engine_run(checks, r):
    engines = r.get("engines", {})
    checks.check(set(engines) == {"zerotrain", "torch"}, f"one invocation ran both engines: {sorted(engines)}")
    for name, e in engines.items():
        steps = [v[0] for v in e["val_loss"]]
        finite = all(math.isfinite(v[1]) and 0 < v[1] < 10 for v in e["val_loss"])
        checks.check(steps == EVAL_STEPS and finite, f"{name}: validation curve at {steps}: {e['val_loss']}")
        vals = [v for _, v in e["val_loss"]]
        checks.check(e["final_val_loss"] == vals[-1] and e["best_val_loss"] == min(vals)
                     and e["meets_target"] == (e["final_val_loss"] <= r["target_val_loss"]),
                     f"{name}: best/final val loss and target check follow from the curve")
        checks.check(e["wall_s"] > 0 and e["median_step_ms"] > 0 and e["segments"] == 1,
                     f"{name}: wall {e['wall_s']:.1f} s, median {e['median_step_ms']:.1f} ms/step, 1 segment")
        checks.check([p[0] for p in e["train_curve_step_loss_lr"]] == list(range(1, STEPS + 1)),
                     f"{name}: train curve at every step")
    c = r.get("comparison") or {}
    if checks.check(c.get("same_configuration") is True, f"both engines ran the same configuration: {c}"):
        ratio = engines["zerotrain"]["wall_s"] / engines["torch"]["wall_s"]
        checks.check(math.isclose(c["wall_s_zerotrain_over_torch"], ratio), f"time ratio {ratio:.3f} recorded")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zerotrain", required=True)
    args = ap.parse_args()
    if not os.path.exists(CORPUS):
        print(f"SKIP: {CORPUS} not found (the shared corpus sits beside the repository)")
        return 77
    checks = Checks()

    has_gpu = shutil.which("nvidia-smi") is not None and subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True, text=True).returncode == 0
    if not has_gpu:
        p = subprocess.run([sys.executable, TOOL, "--zerotrain", args.zerotrain], capture_output=True, text=True,
                           timeout=60)
        lines = p.stderr.strip().splitlines()
        checks.check(p.returncode != 0 and len(lines) == 1 and "no NVIDIA GPU" in lines[0],
                     f"without a GPU: one line and a non-zero exit (exit {p.returncode}: {p.stderr.strip()[:300]})")
    else:
        print("(a GPU is present: the no-device exit is not exercised)")

    with tempfile.TemporaryDirectory(prefix="zt_shakespeare_gpu_") as work:
        # Both engines in one invocation.
        out_a = os.path.join(work, "both.json")
        p = run_tool(args.zerotrain, "--work", os.path.join(work, "a"), "--out", out_a)
        if not checks.check(p.returncode == 0 and os.path.exists(out_a), "both engines: exit 0, results written"):
            return checks.finish()
        checks.check("zerotrain / torch: wall time" in p.stdout, "the table shows the time ratio")
        a = load(out_a)
        check_two_engine_run(checks, a)
        z, t = a["engines"]["zerotrain"], a["engines"]["torch"]
        expected = expected_hyperparameters()
        check_hyperparameters(checks, "PyTorch", t["hyperparameters"], expected)
        check_hyperparameters(checks, "zerotrain", z["hyperparameters"], expected)
        checks.check(t["hyperparameters"]["optim"]["no_decay_weight_decay"] == 0.0,
                     "PyTorch: biases and LayerNorm get no weight decay")
        m = expected["model"]
        C, L, V, T = m["n_embd"], m["n_layer"], m["vocab_size"], m["block_size"]
        two_d = V * C + T * C + L * (3 * C * C + C * C + 4 * C * C + 4 * C * C)
        one_d = L * (3 * C + C + 4 * C + C + 4 * C) + 2 * C
        checks.check((t["decayed_numel"], t["not_decayed_numel"]) == (two_d, one_d),
                     f"PyTorch decays the 2-D tensors only: {t['decayed_numel']} / {t['not_decayed_numel']} "
                     f"elements decayed / not, expected {two_d} / {one_d}")
        lr_z = [p[2] for p in z["train_curve_step_loss_lr"]]
        lr_t = [p[2] for p in t["train_curve_step_loss_lr"]]
        checks.check(len(lr_z) == len(lr_t) and all(math.isclose(x, y, rel_tol=1e-6) for x, y in zip(lr_z, lr_t)),
                     f"learning rate step by step, zerotrain {lr_z} vs PyTorch {lr_t}")

        # A run stopped part-way and continued, one engine per invocation, merged into one file.
        out_b, work_b = os.path.join(work, "merged.json"), os.path.join(work, "b")
        for engine in ("zerotrain", "torch"):
            p = run_tool(args.zerotrain, "--engines", engine, "--work", work_b, "--out", out_b, "--stop-at-step", "3")
            before = load(out_b)["engines"] if os.path.exists(out_b) else {}
            told = f"run again with --engines {engine} and the same other flags" in p.stderr
            checks.check(p.returncode == 3 and engine not in before and told,
                         f"{engine} stopped after step 3: exit {p.returncode}, nothing merged, told to run it again")
            p = run_tool(args.zerotrain, "--engines", engine, "--work", work_b, "--out", out_b)
            if not checks.check(p.returncode == 0, f"{engine}: the same command continues the run to the end"):
                return checks.finish()
            e = load(out_b)["engines"][engine]
            steps = [v[0] for v in e["val_loss"]]
            checks.check(e["segments"] == 2 and len(e["segment_wall_s"]) == 2 and
                         math.isclose(e["wall_s"], sum(e["segment_wall_s"])),
                         f"{engine}: wall time {e['wall_s']:.1f} s is the sum of its 2 segments")
            checks.check([p[0] for p in e["train_curve_step_loss_lr"]] == list(range(1, STEPS + 1))
                         and set(steps) <= set(EVAL_STEPS) and steps[-1] == STEPS,
                         f"{engine}: every step once, evaluations at {steps}")
            whole = a["engines"][engine]["final_val_loss"]
            checks.check(math.isclose(e["final_val_loss"], whole, rel_tol=1e-5),
                         f"{engine}: the continued run's final val loss {e['final_val_loss']:.6f} "
                         f"= the uninterrupted run's {whole:.6f}")
            if engine == "torch":
                merged = load(out_b)
                checks.check(set(merged["engines"]) == {"zerotrain", "torch"} and
                             merged["engines"]["zerotrain"] == before.get("zerotrain"),
                             "the PyTorch-only invocation merged into the file, zerotrain's entry unchanged")
                checks.check((merged.get("comparison") or {}).get("same_configuration") is True,
                             "the merged file compares the two engines")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
