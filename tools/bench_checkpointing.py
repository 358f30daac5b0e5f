#!/usr/bin/env python3
"""Activation checkpointing on the CPU: step time and activation memory of none / selective / all
(and every:2) side by side, for GPT-2 and Llama (issue 33). Each policy trains the same run with
`zerotrain train`; the policies take turns round by round (--rounds), so all see the same machine,
and each round's time is the median step after the first (--steps per run). Memory comes from the
run's first-step record: the activation and workspace peaks predicted and measured (they must be
equal), and their sum. Prints a table and writes --out (JSON).

The default shapes are the largest a 2-core machine trains in a few seconds a step, with T and the
width large enough that a block's activations, not the head's, dominate: GPT-2 6 x 384 (6 heads) and
a Llama 6 x 384 (6 heads, 2 key/value heads, SwiGLU 1024), B 8, T 256, fp32, on all cores.

usage: tools/bench_checkpointing.py [--zerotrain build/zerotrain] [--steps 6] [--rounds 3]
                                    [--out runs/results/checkpointing_bench_cpu.json]
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
from repo_commit import binary_commit, head_commit  # noqa: E402
from result_paths import OneLineParser, check_out_file, check_program, default_out  # noqa: E402

POLICIES = ["none", "selective", "every:2", "all"]
MODELS = {
    "GPT-2 6x384": {"arch": "gpt2", "n_layer": 6, "n_head": 6, "n_embd": 384, "block_size": 256, "vocab_size": 64},
    "Llama 6x384": {"arch": "llama", "n_layer": 6, "n_head": 6, "n_kv_head": 2, "n_embd": 384, "block_size": 256,
                    "vocab_size": 64, "intermediate_size": 1024},
}


def config(model, steps):
    return {"device": "cpu", "model": model, "data": {"dataset": "embedded"},
            "train": {"micro_batch": 8, "seq_len": 256, "max_steps": steps, "eval_every": 0, "eval_batches": 1,
                      "num_threads": os.cpu_count() or 1},
            "log": {"sample_tokens": 0, "progress": "plain", "every_steps": 1}}


def run(zerotrain, path, run_dir, policy):
    shutil.rmtree(run_dir, ignore_errors=True)
    p = subprocess.run([zerotrain, "train", "--config", path, "--run-dir", run_dir,
                        "--set", f"train.activation_checkpointing={policy}"], capture_output=True, text=True,
                       timeout=1800)
    if p.returncode != 0:
        sys.exit(f"bench_checkpointing: {policy} failed (exit {p.returncode}): {(p.stdout + p.stderr)[-1200:]}")
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    steps = [r["step_ms"] for r in records if r["type"] == "train" and r["step"] > 1]
    memory = next(r for r in records if r["type"] == "memory")
    return statistics.median(steps), memory


def main():
    p = OneLineParser("bench_checkpointing", description=__doc__.split("\n\n")[0])
    p.add_argument("--zerotrain", default=os.path.join(ROOT, "build", "zerotrain"),
                   help="the zerotrain binary that trains (default: %(default)s)")
    p.add_argument("--steps", type=int, default=6,
                   help="training steps per run, 2 or more: a run's time is the median step after the first "
                   "(default: %(default)s)")
    p.add_argument("--rounds", type=int, default=3,
                   help="rounds, each running every policy once; a policy's time is the median of its rounds' "
                   "(default: %(default)s)")
    p.add_argument("--out", default=default_out("checkpointing_bench_cpu.json"),
                   help="the result JSON (default: %(default)s)")
    a = p.parse_args()
    if a.steps < 2 or a.rounds < 1:  # a median of no steps after the first, of no rounds
        p.error(f"need --steps >= 2 and --rounds >= 1 (got --steps {a.steps} --rounds {a.rounds})")
    check_program("bench_checkpointing", a.zerotrain)
    check_out_file("bench_checkpointing", a.out)
    work = tempfile.mkdtemp(prefix="zt_ckpt_policy_bench_")
    atexit.register(shutil.rmtree, work, True)  # the runs' folders (42 MB), on every exit: a failed run's too
    result = {"benchmark": "activation checkpointing policies on the CPU: step time and activation memory",
              "commit": binary_commit(a.zerotrain) or head_commit() or "unknown", "machine": platform.node(),
              "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
              "rounds": a.rounds, "steps_per_run": a.steps, "models": {}}
    for name, model in MODELS.items():
        path = os.path.join(work, "config.json")
        cfg = config(model, a.steps)
        with open(path, "w") as f:
            json.dump(cfg, f)
        times = {policy: [] for policy in POLICIES}
        memory = {}
        for _ in range(a.rounds):
            for policy in POLICIES:
                ms, memory[policy] = run(a.zerotrain, path, os.path.join(work, "run"), policy)
                times[policy].append(ms)
        rows = {}
        for policy in POLICIES:
            m = memory[policy]
            predicted, measured = m["predicted_bytes"], m["measured_peak_bytes"][0]
            rows[policy] = {
                "step_ms_median_of_rounds": statistics.median(times[policy]),
                "step_ms_per_round": times[policy],
                "activations_predicted": predicted["activations"], "activations_measured": measured["activations"],
                "workspace_predicted": predicted["workspace"], "workspace_measured": measured["workspace"],
                "activations_plus_workspace": measured["activations"] + measured["workspace"],
            }
        result["models"][name] = {"config": cfg, "policies": rows}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"activation checkpointing on {os.cpu_count()} cores, B 8, T 256, fp32; median of {a.rounds} rounds; "
          f"commit {result['commit'][:12]}")
    print(f"{'model':<12} {'policy':<10} {'ms/step':>8} {'vs none':>8} {'activations':>12} {'vs none':>8} "
          f"{'workspace':>10} {'act+work':>10} {'measured=predicted':>19}")
    for name, m in result["models"].items():
        base = m["policies"]["none"]
        for policy, r in m["policies"].items():
            exact = (r["activations_measured"] == r["activations_predicted"] and
                     r["workspace_measured"] == r["workspace_predicted"])
            print(f"{name:<12} {policy:<10} {r['step_ms_median_of_rounds']:>8.0f} "
                  f"{r['step_ms_median_of_rounds'] / base['step_ms_median_of_rounds']:>8.3f} "
                  f"{r['activations_measured'] / 2**20:>10.1f}Mi "
                  f"{r['activations_measured'] / base['activations_measured']:>8.3f} "
                  f"{r['workspace_measured'] / 2**20:>8.1f}Mi {r['activations_plus_workspace'] / 2**20:>8.1f}Mi "
                  f"{'yes' if exact else 'NO':>19}")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
