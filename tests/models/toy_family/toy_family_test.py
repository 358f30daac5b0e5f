#!/usr/bin/env python3
"""A model family registered from tests/ alone (toy_family_driver.cpp: a bigram model with learned
positions, model.arch = "toy", with a key of its own) goes through every path a built-in family
does, with no file under engine/ knowing it (issue 31):
  * ZeRO stage 3 on 2 ranks trains it: the loss falls, and in deterministic mode stages 0-3 give
    bitwise identical losses, gradient norms and final weights;
  * every rank's measured peak per category equals the prediction from the family's footprint and
    schedule, to the byte;
  * the stage-3 checkpoint names the family and its key, and resumes on 1 rank;
  * `memory` predicts it (stage 1 halves its optimizer states), and the config refuses an unknown arch naming
    the three families, and a Llama key by name.

usage: toy_family_test.py MPIRUN [FLAGS...] -- PATH/TO/zt_toy_family_driver
"""
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from check_report import Checks  # noqa: E402
from run_dir_util import checked_run, curve, deep_merge, train_records  # noqa: E402

BASE = {
    "model": {"arch": "toy", "n_layer": 1, "n_head": 1, "n_embd": 32, "block_size": 16, "vocab_size": 65,
              "init_std": 0.05},
    "data": {"embedded_chars": 60000},
    "train": {"micro_batch": 4, "max_steps": 30, "eval_batches": 2, "num_threads": 1, "deterministic": True},
    "optim": {"lr": 1e-2, "warmup_steps": 2},
    "log": {"sample_tokens": 16, "progress": "plain"},
}
report = Checks()
check = report.check


def main():
    split = sys.argv.index("--")
    launcher, driver = sys.argv[1:split], sys.argv[split + 1]
    work = report.work_folder("zt_toy_family_")

    def write(name, over):
        path = os.path.join(work, name + ".json")
        with open(path, "w") as f:
            json.dump(deep_merge(BASE, over), f)
        return path

    def run(ranks, args):
        cmd = [driver] if ranks == 1 else launcher + ["-np", str(ranks), driver]
        return subprocess.run(cmd + args, capture_output=True, text=True, timeout=300)

    def train(ranks, over, name, extra=()):
        run_dir = os.path.join(work, name)
        p = run(ranks, ["train", "--config", write(name, over), "--run-dir", run_dir, *extra])
        return checked_run(check, name, p, run_dir)

    runs = [train(2, {"zero": {"stage": st}, "checkpoint": {"at_end": st == 3}}, f"s{st}") for st in range(4)]
    if any(r is None for r in runs):
        return report.finish()
    s3 = runs[3]
    check("toy: bigram with positions" in s3["out"], "the run prints the family's description of the model")
    losses = [l for _, l, _ in s3["curve"]]
    check(len(losses) == 30 and losses[-1] < losses[0] - 0.5,
          f"stage 3 on 2 ranks trains it: 30 steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    check(all(r["curve"] == runs[0]["curve"] and r["weights"] == runs[0]["weights"] for r in runs),
          "stages 0-3 give bitwise identical losses, gradient norms and final weights")
    check(sorted(s3["weights"]) == ["head.weight", "wpe.weight", "wte.weight"],
          f"final.safetensors holds the family's tensors ({sorted(s3['weights'])})")

    ckpt_root = os.path.join(s3["dir"], "checkpoints")
    steps = sorted(os.listdir(ckpt_root)) if os.path.isdir(ckpt_root) else []
    manifest = {}
    if check(bool(steps), "the stage-3 run saved a checkpoint"):
        with open(os.path.join(ckpt_root, steps[-1], "manifest.json")) as f:
            manifest = json.load(f)
    model = manifest.get("model", {})
    check(model.get("type") == "toy" and model.get("init_std") == 0.05,
          f"the manifest names the family and its own key ({model})")
    resumed = os.path.join(work, "resumed")
    p = run(1, ["train", "--config", os.path.join(s3["dir"], "config.json"), "--run-dir", resumed,
                "--resume", ckpt_root, "--set", "train.max_steps=34", "--set", "zero.stage=0",
                "--set", "train.micro_batch=8",
                # The saved schedule kept (config.json's decay_steps is derived: it would follow max_steps).
                "--set", "optim.decay_steps=30"])
    ok = p.returncode == 0
    if check(ok, "the 2-rank stage-3 checkpoint resumes on 1 rank at stage 0" +
             ("" if ok else f" (exit {p.returncode}: {(p.stdout + p.stderr)[-600:]})")):
        steps_after = [s for s, _, _, _ in curve(train_records(resumed))]
        check(steps_after and steps_after[0] == 31 and steps_after[-1] == 34, f"it continues at step 31 ({steps_after})")

    p = run(1, ["memory", "--config", write("memory", {}), "--ranks", "2", "--json"])
    if check(p.returncode == 0, "memory predicts a toy config" + ("" if p.returncode == 0 else f": {p.stderr}")):
        stages = json.loads(p.stdout)["stages"]
        optimizer = [s["bytes"]["optimizer_states"] for s in stages]
        check(optimizer[1] * 2 == optimizer[0], f"stage 1 halves the optimizer states on 2 ranks ({optimizer})")

    # plan ranks a toy config from the committed GPT-2 profile: finite estimates (the head's share of
    # no matrix products was inf, every estimate NaN).
    profile = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                           "docs", "results", "cpu_op_profile.json")
    p = run(1, ["plan", "--config", write("plan", {}), "--ranks", "2", "--device-memory", "1TB", "--profile", profile,
                "--json"])
    rows = json.loads(p.stdout).get("fitting", []) if p.returncode == 0 else []
    finite = [r for r in rows if isinstance(r.get("step_s"), (int, float)) and math.isfinite(r["step_s"])]
    check(p.returncode == 0 and rows and len(finite) == len(rows),
          f"plan ranks a toy config with finite step times ({len(finite)} of {len(rows)}; exit {p.returncode}: "
          f"{(p.stdout + p.stderr)[-300:]})")

    p = run(1, ["train", "--config", write("mamba", {"model": {"arch": "mamba"}})])
    check(p.returncode == 2 and "gpt2, llama, toy" in p.stderr, f"an unknown arch names the three families: {p.stderr}")
    p = run(1, ["train", "--config", write("foreign", {"model": {"n_kv_head": 1}})])
    check(p.returncode == 2 and "model.n_kv_head is a Llama key" in p.stderr, f"a Llama key is refused: {p.stderr}")
    p = run(1, ["train", "--config", write("layers", {"model": {"n_layer": 2}})])
    check(p.returncode == 2 and "the toy family has no blocks" in p.stderr,
          f"the family's own check names its key: {p.stderr}")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
