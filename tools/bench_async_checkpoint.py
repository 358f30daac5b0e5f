#!/usr/bin/env python3
"""How long a training step is blocked per checkpoint save, synchronous against checkpoint.async,
on GPT-2 124M (issue 33; goal: asynchronous blocked time at most a tenth of the synchronous save's).
One invocation trains the same run twice with `zerotrain train`, saving every --every steps, first
with synchronous saves and then asynchronous ones, and reads metrics.jsonl:

  * blocked per save: the training thread's time in the save (synchronous: all of it;
    asynchronous: staging the state into host memory, and the commit at a later step boundary,
    with any wait for the background write). Saves the end of the run had to wait for are listed
    apart: every run waits for its last save before it exits, either way;
  * the steps' time: the median step without a save in flight, and the steps during which a
    background write ran (the writer's share of the machine: on a CPU run it takes cores from the
    steps, even at the lowest priority, for its checksums and the page cache's copies);
  * the run's wall time from the first step to the end.

The CPU default is a step of micro_batch 1 x 64 tokens in fp32 on all cores; --device cuda takes
configs/gpt2_124m.json (B 16, T 1024, bf16). The interval between saves must exceed a background
write: where the steps use every core (the CPU run), the writer, at the lowest priority, gets only
their idle time, and a save that comes before the previous one is written waits for it (which
counts as blocked). Prints a table and writes --out (JSON).

usage: tools/bench_async_checkpoint.py [--zerotrain build/zerotrain] [--device cpu] [--steps 125]
                                       [--every 40] [--out runs/results/async_checkpoint_bench_cpu.json]
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from repo_commit import binary_commit, head_commit  # noqa: E402
from result_paths import OneLineParser, check_out_dir, check_out_file, default_out, run_main, temporary_work  # noqa: E402

GPT2_124M = {"arch": "gpt2", "n_layer": 12, "n_head": 12, "n_embd": 768, "block_size": 1024, "vocab_size": 50257}


def run_config(device, steps, every):
    if device == "cuda":
        with open(os.path.join(ROOT, "configs", "gpt2_124m.json")) as f:
            config = json.load(f)
        config["data"] = {"dataset": "embedded"}
        config["train"].pop("global_batch_tokens", None)  # one micro-batch a step
        config["train"].update({"max_steps": steps, "eval_every": 0})
    else:
        config = {"device": "cpu", "model": dict(GPT2_124M), "data": {"dataset": "embedded"},
                  "train": {"micro_batch": 1, "seq_len": 64, "max_steps": steps, "eval_every": 0,
                            "num_threads": os.cpu_count() or 1}}
    config["train"]["eval_batches"] = 1
    config["checkpoint"] = {"every_steps": every, "keep_last": 1}
    config["log"] = {"sample_tokens": 0, "progress": "plain", "every_steps": 1}
    return config


def read_records(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def mean_over_saves(saves, key):
    """The mean of `key` over the saves that carry it (a synchronous save has no staging), or None."""
    values = [s[key] for s in saves if s[key] is not None]
    return statistics.mean(values) if values else None


def summarize(records):
    """Per save: its blocked and total seconds and whether the end of the run waited for it; the
    steps' times with and without a background write in flight."""
    last_train = max(i for i, r in enumerate(records) if r["type"] == "train")
    saves, writing, step_ms, staged = [], False, {"idle": [], "writing": []}, {}
    for i, r in enumerate(records):
        if r["type"] == "checkpoint_started":
            writing = True
            staged[r["step"]] = r.get("blocked_seconds")  # a synchronous save's has none
        elif r["type"] == "checkpoint":
            writing = False
            saves.append({"step": r["step"], "seconds": r["seconds"], "blocked_seconds": r["blocked_seconds"],
                          "staging_seconds": staged.get(r["step"]),
                          "waited_for_by_the_end": i > last_train and r.get("async", False)})
        elif r["type"] == "train" and r["step"] > 1:  # step 1 warms up
            step_ms["writing" if writing else "idle"].append(r["step_ms"])
    steady = [s for s in saves if not s["waited_for_by_the_end"]]
    return {
        "saves": saves,
        "blocked_seconds_per_save": mean_over_saves(steady, "blocked_seconds"),
        "save_seconds": mean_over_saves(steady, "seconds"),
        "staging_seconds_per_save": mean_over_saves(steady, "staging_seconds"),
        "step_ms_median_no_write": statistics.median(step_ms["idle"]) if step_ms["idle"] else None,
        "step_ms_median_during_write": statistics.median(step_ms["writing"]) if step_ms["writing"] else None,
        "steps_during_writes": len(step_ms["writing"]),
    }


def main():
    p = OneLineParser("bench_async_checkpoint", description=__doc__.split("\n\n")[0])
    p.add_argument("--zerotrain", default=os.path.join(ROOT, "build", "zerotrain"),
                   help="the zerotrain binary that trains and saves (default: %(default)s)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="where the runs train: cpu (a small step) or cuda (configs/gpt2_124m.json) (default: %(default)s)")
    p.add_argument("--steps", type=int, default=125, help="training steps per run (default: %(default)s)")
    p.add_argument("--every", type=int, default=40,
                   help="steps between checkpoint saves, 1 to --steps (default: %(default)s)")
    p.add_argument("--work", default=None, help="folder for the runs (default: a temporary one, removed)")
    p.add_argument("--out", default=None,
                   help="the result JSON (default: runs/results/async_checkpoint_bench_DEVICE.json)")
    # Its test's small model: every run's zerotrain --set values (GPT-2 124M's two runs take minutes).
    p.add_argument("--zerotrain-set", dest="zerotrain_sets", action="append", default=[], help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.steps < 1 or not 1 <= a.every <= a.steps:
        p.error(f"--every {a.every} --steps {a.steps}: a save needs 1 <= --every <= --steps")
    if not (os.path.isfile(a.zerotrain) and os.access(a.zerotrain, os.X_OK)):
        p.error(f"--zerotrain {a.zerotrain}: not an executable file (build it: tools/build.sh)")
    out = a.out or default_out(f"async_checkpoint_bench_{a.device}.json")
    check_out_file("bench_async_checkpoint", out)
    if a.work:
        check_out_dir("bench_async_checkpoint", a.work, "--work")
    if a.device == "cuda":
        from bench_harness import device_facts
        device_facts()  # one line and exit 1 without a GPU, before any run
    work = a.work or temporary_work("zt_async_bench_")
    os.makedirs(work, exist_ok=True)
    config = run_config(a.device, a.steps, a.every)
    path = os.path.join(work, "config.json")
    with open(path, "w") as f:
        json.dump(config, f)
    model = "GPT-2 124M" + (f" with --set {', '.join(a.zerotrain_sets)}" if a.zerotrain_sets else "")
    result = {"benchmark": "blocked time per checkpoint save, synchronous vs checkpoint.async",
              "commit": binary_commit(a.zerotrain) or head_commit() or "unknown", "device": a.device, "machine": platform.node(),
              "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
              "model": model, "config": config, "modes": {}}
    for mode in ("sync", "async"):
        run_dir = os.path.join(work, mode)
        shutil.rmtree(run_dir, ignore_errors=True)
        cmd = [a.zerotrain, "train", "--config", path, "--run-dir", run_dir,
               "--set", f"checkpoint.async={'true' if mode == 'async' else 'false'}"]
        cmd += [arg for kv in a.zerotrain_sets for arg in ("--set", kv)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        if proc.returncode != 0:
            sys.exit(f"bench_async_checkpoint: the {mode} run failed (exit {proc.returncode}): "
                     f"{(proc.stdout + proc.stderr)[-1500:]}")
        records = read_records(run_dir)
        summary = summarize(records)
        summary["rank_file_bytes"] = next(r["rank_bytes"] for r in records if r["type"] == "checkpoint")
        summary["device_description"] = next((line.split(": ", 1)[1] for line in proc.stdout.splitlines()
                                               if line.startswith("device: ")), a.device)
        train = [r for r in records if r["type"] == "train"]
        summary["wall_seconds_of_steps_and_saves"] = sum(r["step_ms"] for r in train) / 1e3 + sum(
            s["blocked_seconds"] for s in summary["saves"])
        result["modes"][mode] = summary
    sync, asyn = result["modes"]["sync"], result["modes"]["async"]
    if sync["blocked_seconds_per_save"] and asyn["blocked_seconds_per_save"] is not None:
        result["blocked_ratio_async_over_sync"] = asyn["blocked_seconds_per_save"] / sync["blocked_seconds_per_save"]
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")

    def fmt(v, spec):
        return "-" if v is None else format(v, spec)
    print(f"{model} on {sync['device_description']}, a save every {a.every} steps of {a.steps}, "
          f"{sync['rank_file_bytes'] / 1e9:.2f} GB a save; commit {result['commit'][:12]}")
    print(f"{'mode':<6} {'saves':>5} {'blocked/save s':>15} {'staging s':>10} {'save s':>8} {'step ms':>8} "
          f"{'step ms (writing)':>18} {'end waited s':>13} {'steps+saves s':>14}")
    for mode, s in result["modes"].items():
        end_wait = sum(x["blocked_seconds"] for x in s["saves"] if x["waited_for_by_the_end"])
        print(f"{mode:<6} {len(s['saves']):>5} {fmt(s['blocked_seconds_per_save'], '.3f'):>15} "
              f"{fmt(s['staging_seconds_per_save'], '.3f'):>10} {fmt(s['save_seconds'], '.2f'):>8} {fmt(s['step_ms_median_no_write'], '.0f'):>8} "
              f"{fmt(s['step_ms_median_during_write'], '.0f'):>18} {end_wait:>13.2f} "
              f"{s['wall_seconds_of_steps_and_saves']:>14.1f}")
    if "blocked_ratio_async_over_sync" in result:
        print(f"blocked per save, async / sync: {result['blocked_ratio_async_over_sync']:.3f} (goal <= 0.1)")
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(run_main("bench_async_checkpoint", main))
