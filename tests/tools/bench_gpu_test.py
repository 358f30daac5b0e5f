#!/usr/bin/env python3
"""tools/bench_gpu.py's parts that run without a GPU: its parameter count (the MFU numerator) equals
the engine's own table for GPT-2 124M, the token files it writes are ones zerotrain trains on, the
per-op summary it prints reads the op_profile.json such a run writes with log.profile_ops, and on a
machine without a GPU it stops with one line and a non-zero exit instead of a traceback; with the
engines faked, its run order and its partial reports (a failed or cut-short run keeps what was
measured)."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.dirname(HERE))
import bench_gpu  # noqa: E402
from check_report import Checks  # noqa: E402


def check_partial_reports(checks):
    """main() with the engines faked: the run order puts stage 0 and PyTorch first, a failed PyTorch
    run is a failed row rather than the end of the benchmark, and the JSON on disk after a call cut
    short (here at stage 2) holds every row measured before it."""
    real = (bench_gpu.device_facts, bench_gpu.run_zerotrain, bench_gpu.run_torch)
    order = []

    def fake_zerotrain(args, stage, data_dir, work, activations, profile=False):
        if profile:
            return {"step_ms": [], "losses": []}
        order.append(f"zerotrain {stage} {activations}")
        if stage == cut_at[0]:
            raise KeyboardInterrupt  # the device call's time limit
        return {"step_ms": [100.0 + stage] * 8, "losses": [1.0] * 8}

    def failing_torch(args):
        order.append("pytorch")
        return {"error": "exit 1: torch.compile failed"}

    cut_at = [None]
    bench_gpu.device_facts = lambda: ("Fake GPU", "0.0")
    bench_gpu.run_zerotrain, bench_gpu.run_torch = fake_zerotrain, failing_torch
    try:
        with tempfile.TemporaryDirectory() as work:
            out = os.path.join(work, "bench.json")
            bench_gpu.main(["--steps", "3", "--warmup", "1", "--out", out])
            with open(out) as f:
                report = json.load(f)
            checks.check(order == ["zerotrain 0 bf16", "pytorch", "zerotrain 1 bf16", "zerotrain 2 bf16",
                                   "zerotrain 3 bf16", "zerotrain 0 fp32"], f"stage 0 and PyTorch run first ({order})")
            engines = [r["engine"] for r in report["rows"]]
            checks.check(report["complete"] and len(engines) == 6 and "error" in report["rows"][1],
                         f"a failed PyTorch run is a failed row and the rest still run ({engines})")
            checks.check(abs(report["ratios"]["stage3_over_stage0_tokens_per_s"] - 100 / 103) < 1e-12 and
                         "stage0_over_pytorch_tokens_per_s" not in report["ratios"],
                         f"ratios come from the rows that ran ({report['ratios']})")
            order.clear()
            cut_at[0] = 2
            try:
                bench_gpu.main(["--steps", "3", "--warmup", "1", "--out", out])
            except KeyboardInterrupt:
                pass
            with open(out) as f:
                report = json.load(f)
            checks.check(not report["complete"] and [r["engine"] for r in report["rows"]] ==
                         ["zerotrain stage 0", bench_gpu.TORCH_ENGINE, "zerotrain stage 1"],
                         "a call cut short leaves the rows measured before it on disk")
    finally:
        bench_gpu.device_facts, bench_gpu.run_zerotrain, bench_gpu.run_torch = real


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zerotrain", required=True)
    args = ap.parse_args()
    checks = Checks()

    p = subprocess.run([args.zerotrain, "memory", "--config", os.path.join(ROOT, "configs", "gpt2_124m.json"),
                        "--ranks", "1", "--json"], capture_output=True, text=True)
    n_bench, flops = bench_gpu.flops_per_token()
    if checks.check(p.returncode == 0, f"zerotrain memory --json runs ({p.stderr.strip()[:200]})"):
        n_engine = json.loads(p.stdout)["params"]
        checks.check(n_bench == n_engine, f"MFU parameter count {n_bench} equals the engine's table {n_engine}")
    checks.check(flops == 6 * n_bench + 6 * 12 * 768 * 1024, "flops per token = 6 N + 6 L C T")

    with tempfile.TemporaryDirectory() as work:
        rng = np.random.default_rng(3)
        for name, n in (("train.bin", 5000), ("val.bin", 800)):
            bench_gpu.write_llmc_tokens(os.path.join(work, name), rng.integers(0, 64, n))
        run = subprocess.run([args.zerotrain, "train", "--config", os.path.join(ROOT, "configs", "tiny.json"),
                              "--run-dir", os.path.join(work, "run"), "--set", f"data.dataset={work}",
                              "--set", "train.max_steps=2", "--set", "train.eval_batches=1",
                              "--set", "log.sample_tokens=0", "--set", "log.progress=plain",
                              "--set", "log.profile_ops=true"],
                             capture_output=True, text=True, timeout=300)
        checks.check(run.returncode == 0, f"zerotrain trains on the token files bench_gpu writes ({run.stderr[-300:]})")
        profile_path = os.path.join(work, "run", "op_profile.json")
        if checks.check(os.path.exists(profile_path), "log.profile_ops writes op_profile.json"):
            with open(profile_path) as f:
                profile = json.load(f)
            lines = bench_gpu.top_ops_lines(profile, "zerotrain stage 0", n=3)
            text = "\n".join(lines)
            print(text)
            checks.check(profile["profiled_steps"] == 1, "2 steps: the first warms up, 1 is profiled")
            checks.check(len(profile["ops"]) > 3 and f"({len(profile['ops']) - 3} more ops)" in text,
                         "the summary lists the top 3 ops and sums the rest")
            checks.check(profile["ops"][0]["op"] in lines[2] and "(outside the ops)" in lines[-1],
                         "the most expensive op comes first, the time outside the ops last")

    check_partial_reports(checks)

    has_gpu = shutil.which("nvidia-smi") is not None and subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True, text=True).returncode == 0
    if not has_gpu:
        b = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bench_gpu.py"), "--zerotrain", args.zerotrain],
                           capture_output=True, text=True, timeout=120)
        lines = b.stderr.strip().splitlines()
        checks.check(b.returncode != 0 and len(lines) == 1 and "no NVIDIA GPU" in lines[0],
                     f"without a GPU: one line and a non-zero exit (exit {b.returncode}: {b.stderr.strip()[:300]})")
    else:
        print("(a GPU is present: the no-device exit is not exercised)")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
