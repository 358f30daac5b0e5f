#!/usr/bin/env python3
"""Quantized collectives on the CPU (issue 33): nanoGPT's shakespeare-char model
(configs/shakespeare_char.json, 10.7M parameters, dropout 0.2) trained on 4 ranks in 2 groups of 2
(hybrid sharding, ZeRO stage 3) with exact collectives and with quantized ones side by side, from
the same seed: the validation losses at each evaluation, the bytes each rank sends per step inside
its group and across the groups (measured; the test checks they equal the prediction), and the
step time. The variants:
  exact       fp32 reductions, parameters gathered in their dtype
  qwZ         zero.gather_dtype = int8
  qgZ         zero.cross_group_grad_dtype = int8
  qwZ + qgZ   both
The batch is cut to what a 2-core machine trains in a few seconds a step (--micro-batch sequences
of 256 per rank) and the schedule to --steps (cosine to --steps); everything else is the config's.
Prints a table and writes --out (JSON) and the same table beside it as .md.

usage: tools/bench_quantized_collectives.py [--zerotrain build/zerotrain] [--steps 200]
           [--micro-batch 2] [--eval-every 50] [--variants exact,qwZ+qgZ]
           [--out runs/results/quantized_collectives_cpu.json]
"""
import atexit
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from mpirun_command import MPIRUN  # noqa: E402
from repo_commit import binary_commit, head_commit  # noqa: E402
from result_paths import OneLineParser, check_out_file, check_program, default_out, run_main  # noqa: E402

VARIANTS = {
    "exact": [],
    "qwZ": ["zero.gather_dtype=int8"],
    "qgZ": ["zero.cross_group_grad_dtype=int8"],
    "qwZ+qgZ": ["zero.gather_dtype=int8", "zero.cross_group_grad_dtype=int8"],
}


def main():
    p = OneLineParser("bench_quantized_collectives", description=__doc__.split("\n\n")[0])
    p.add_argument("--zerotrain", default=os.path.join(ROOT, "build", "zerotrain"),
                   help="the zerotrain binary that prepares the data and trains (default: %(default)s)")
    p.add_argument("--text", default=os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt"),
                   help="the text `zerotrain prepare` turns into the character data set (default: %(default)s)")
    p.add_argument("--steps", type=int, default=200,
                   help="training steps per variant, 2 or more; the cosine schedule ends there (default: %(default)s)")
    p.add_argument("--micro-batch", type=int, default=2,
                   help="sequences of 256 tokens per rank per step (default: %(default)s)")
    p.add_argument("--eval-every", type=int, default=50,
                   help="steps between validation losses (default: %(default)s)")
    p.add_argument("--eval-batches", type=int, default=20,
                   help="batches per validation loss (default: %(default)s)")
    p.add_argument("--variants", default="exact,qwZ+qgZ",
                   help=f"comma-separated, of {', '.join(VARIANTS)} (default: %(default)s)")
    p.add_argument("--out", default=default_out("quantized_collectives_cpu.json"),
                   help="the result JSON; the table goes beside it as .md (default: %(default)s)")
    a = p.parse_args()
    unknown = [name for name in a.variants.split(",") if name not in VARIANTS]
    if unknown:
        p.error(f"--variants {a.variants}: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    if a.steps < 2 or a.micro_batch < 1 or a.eval_every < 1 or a.eval_batches < 1:  # median of steps after the first
        p.error(f"need --steps >= 2 and --micro-batch, --eval-every, --eval-batches >= 1 (got --steps {a.steps} "
                f"--micro-batch {a.micro_batch} --eval-every {a.eval_every} --eval-batches {a.eval_batches})")
    check_program("bench_quantized_collectives", a.zerotrain)
    check_out_file("bench_quantized_collectives", a.out)
    check_out_file("bench_quantized_collectives", os.path.splitext(a.out)[0] + ".md")
    if not os.path.isfile(a.text):
        p.error(f"--text {a.text}: no such file")
    work = tempfile.mkdtemp(prefix="zt_quantized_bench_")
    atexit.register(shutil.rmtree, work, True)  # the data set and every run's final weights, on every exit
    data = os.path.join(work, "shakespeare_char")
    prep = subprocess.run([a.zerotrain, "prepare", "--text", a.text, "--out", data], capture_output=True, text=True)
    if prep.returncode != 0:
        sys.exit(f"bench_quantized_collectives: zerotrain prepare failed (exit {prep.returncode}): "
                 f"{(prep.stdout + prep.stderr)[-1200:]}")
    base = ["zero.stage=3", "zero.shard_group_size=2", "train.deterministic=true", f"data.dataset={data}",
            f"train.micro_batch={a.micro_batch}", f"train.max_steps={a.steps}", f"optim.decay_steps={a.steps}",
            f"optim.warmup_steps={max(1, a.steps // 20)}",
            f"train.eval_every={a.eval_every}", f"train.eval_batches={a.eval_batches}", "train.num_threads=1",
            "log.sample_every=0", "log.progress=plain", "log.every_steps=1"]
    result = {"benchmark": "quantized collectives: validation loss and bytes per step, exact vs quantized",
              "config": "configs/shakespeare_char.json", "ranks": 4, "shard_group_size": 2, "stage": 3,
              "micro_batch_per_rank": a.micro_batch, "seq_len": 256, "steps": a.steps,
              "eval_every": a.eval_every, "eval_batches": a.eval_batches,
              "commit": binary_commit(a.zerotrain) or head_commit() or "unknown", "machine": platform.node(),
              "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "variants": {}}
    for name in a.variants.split(","):
        run_dir = os.path.join(work, name)
        cmd = MPIRUN + ["-np", "4", a.zerotrain, "train", "--config", os.path.join(ROOT, "configs", "shakespeare_char.json"),
                        "--run-dir", run_dir]
        for kv in base + VARIANTS[name]:
            cmd += ["--set", kv]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=7200)
        if r.returncode != 0:
            sys.exit(f"bench_quantized_collectives: {name} failed (exit {r.returncode}): {(r.stdout + r.stderr)[-1200:]}")
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            records = [json.loads(line) for line in f if line.strip()]
        steps = [x for x in records if x["type"] == "train"]
        evals = [(x["step"], x["val_loss"]) for x in records if x["type"] == "eval"]
        result["variants"][name] = {
            "sets": VARIANTS[name], "val_loss": evals, "final_train_loss": steps[-1]["loss"],
            "bytes_in_group_per_step": steps[-1]["comm_bytes_in_group"],
            "bytes_across_groups_per_step": steps[-1]["comm_bytes_across_groups"],
            "median_step_ms": statistics.median(x["step_ms"] for x in steps[1:])}
        print(f"{name}: done", flush=True)
    exact = result["variants"].get("exact")
    lines = [f"# Quantized collectives on the CPU ({result['commit'][:10]}, {result['cpu']}, {result['cores']} cores)",
             "", f"shakespeare-char (10.7M), 4 ranks in 2 groups of 2, ZeRO stage 3, deterministic, "
             f"micro_batch {a.micro_batch} x 256 per rank, {a.steps} steps.", "",
             "| variant | val loss at each eval (step: loss) | in group / step | across / step | step ms |",
             "|---|---|---|---|---|"]
    for name, v in result["variants"].items():
        ratio = ""
        if exact and name != "exact":
            ratio = (f" ({v['bytes_in_group_per_step'] / exact['bytes_in_group_per_step']:.2f}x / "
                     f"{v['bytes_across_groups_per_step'] / exact['bytes_across_groups_per_step']:.2f}x)")
        losses = ", ".join(f"{s}: {l:.4f}" for s, l in v["val_loss"])
        lines.append(f"| {name} | {losses} | {v['bytes_in_group_per_step']:,} B | "
                     f"{v['bytes_across_groups_per_step']:,} B{ratio} | {v['median_step_ms']:.0f} |")
    table = "\n".join(lines) + "\n"
    print(table)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=2)
    with open(os.path.splitext(a.out)[0] + ".md", "w") as f:
        f.write(table)


if __name__ == "__main__":
    sys.exit(run_main("bench_quantized_collectives", main))
