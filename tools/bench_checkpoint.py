#!/usr/bin/env python3
"""Sharded checkpoint timings for a config (default GPT-2 124M) at N ranks: save, load on the same
layout, load resharded onto N/2 ranks at another stage, full verification, HF export (time and
peak memory). Uses the checkpoint test driver (real ZeroParamStore + ShardedAdamW, one synthetic
optimizer step, no forward/backward) until the trainer saves checkpoints itself.

usage: tools/bench_checkpoint.py [--build build] [--config configs/gpt2_124m.json] [--ranks 4]
                                 [--out runs/results/checkpoint_bench.json]
"""
import datetime
import json
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import sys  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "tools"))
from mpirun_command import MPIRUN  # noqa: E402
from repo_commit import head_commit  # noqa: E402
from result_paths import OneLineParser, check_out_file, default_out, run_main, temporary_work  # noqa: E402


def per_rank(text, pattern):
    return [float(m) for m in re.findall(pattern, text)]


def main():
    p = OneLineParser("bench_checkpoint", description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"),
                   help="the build folder holding zerotrain and tests/zt_checkpoint_resume_driver (default: %(default)s)")
    p.add_argument("--config", default=os.path.join(ROOT, "configs", "gpt2_124m.json"),
                   help="the model config whose state is saved and loaded (default: %(default)s)")
    p.add_argument("--ranks", type=int, default=4,
                   help="ranks that save; the resharded load runs on half as many (default: %(default)s)")
    p.add_argument("--stage", type=int, default=3, help="the ZeRO stage the checkpoint is saved at, 0-3 "
                   "(default: %(default)s)")
    p.add_argument("--out", default=default_out("checkpoint_bench.json"), help="the result JSON (default: %(default)s)")
    a = p.parse_args()
    if a.ranks < 1:
        p.error(f"--ranks {a.ranks}: at least 1 (mpirun -np 0 would start a rank on every slot)")
    if not 0 <= a.stage <= 3:
        p.error(f"--stage {a.stage}: a ZeRO stage, 0-3")
    if not os.path.isfile(a.config):
        p.error(f"--config {a.config}: no such file")
    check_out_file("bench_checkpoint", a.out)
    driver = os.path.join(a.build, "tests", "zt_checkpoint_resume_driver")
    zerotrain = os.path.join(a.build, "zerotrain")
    for binary in (driver, zerotrain):
        if not os.access(binary, os.X_OK):
            p.error(f"--build {a.build}: no {os.path.relpath(binary, a.build)} there (build every target first)")
    work = temporary_work("zt_ckpt_bench_")
    folder = os.path.join(work, "checkpoints")

    def run(np_, stage, start, stop):
        # On the CPU: the GPU configs' bf16 products and activations are CUDA settings.
        cmd = MPIRUN + ["-np", str(np_), driver, "run", folder, "--config", a.config, "--set", "device=cpu",
                        "--set", "precision.matmul=fp32", "--set", "precision.activations=fp32",
                        "--stage", str(stage), "--from", str(start), "--to", str(stop), "--dtype", "bf16"]
        r = subprocess.run(cmd, capture_output=True, text=True, check=True)
        return r.stdout

    saved = run(a.ranks, a.stage, 0, 1)
    same = run(a.ranks, a.stage, 1, 1)
    half = max(1, a.ranks // 2)
    other_stage = 1 if a.stage != 1 else 3
    resharded = run(half, other_stage, 1, 1)
    t0 = datetime.datetime.now()
    subprocess.run([zerotrain, "ckpt", "verify", folder], check=True, capture_output=True)
    verify_s = (datetime.datetime.now() - t0).total_seconds()
    r = subprocess.run(["/usr/bin/time", "-f", "%e %M", zerotrain, "ckpt", "export", folder, "--format", "hf",
                        "--out", os.path.join(work, "hf")], check=True, capture_output=True, text=True)
    export_s, export_rss_kb = r.stderr.strip().splitlines()[-1].split()
    with open(os.path.join(work, "hf", "model.safetensors"), "rb") as f:
        f.seek(0, 2)
        export_bytes = f.tell()
    commit = head_commit(short=True, env=False) or "unknown"
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    result = {
        "date": datetime.date.today().isoformat(), "commit": commit, "config": os.path.relpath(a.config, ROOT),
        "machine": f"{os.cpu_count()} cores, {cpu}; local disk; page cache warm for the loads",
        "what": "save_checkpoint / load_optimizer_state through ZeroParamStore + ShardedAdamW (bf16 params, fp32 "
                "master/m/v), tests/checkpoint/optimizer_resume_driver.cpp",
        "save": {"ranks": a.ranks, "stage": a.stage, "seconds_per_rank": per_rank(saved, r"in ([\d.]+) s, \d+ bytes"),
                 "bytes_per_rank": [int(x) for x in per_rank(saved, r"s, (\d+) bytes")],
                 "total_bytes": int(per_rank(saved, r"all ranks (\d+)")[0])},
        "load_same_layout": {"ranks": a.ranks, "stage": a.stage,
                             "seconds_per_rank": per_rank(same, r"at stage \d+ in ([\d.]+) s, read"),
                             "bytes_read_per_rank": [int(x) for x in per_rank(same, r"read (\d+) bytes")]},
        "load_resharded": {"from_ranks": a.ranks, "ranks": half, "stage": other_stage,
                           "seconds_per_rank": per_rank(resharded, r"at stage \d+ in ([\d.]+) s, read"),
                           "bytes_read_per_rank": [int(x) for x in per_rank(resharded, r"read (\d+) bytes")]},
        "verify_seconds": verify_s,
        "export_hf": {"seconds": float(export_s), "peak_rss_bytes": int(export_rss_kb) * 1024,
                      "model_safetensors_bytes": export_bytes},
    }
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    sys.exit(run_main("bench_checkpoint", main))
