#!/usr/bin/env python3
"""tools/bench_multi_gpu.py without GPUs: its engines' plumbing with the GPUs faked (zerotrain on 2 CPU
ranks under mpirun at stages 0-3 and on one, all timed step to step, each block with every rank's
measured memory beside the prediction; the FSDP2 anchor under torchrun, which a torch without
fully_shard turns into a failed row naming the reason, the other rows still measured), the ratios
it can give, and with fewer than 2 GPUs one line and exit 2, saying how many are visible without
claiming a --gpus that was not given ("0 GPUs asked for, 0 visible" without a GPU).

usage: bench_multi_gpu_test.py --zerotrain PATH --mpirun "mpirun ..."
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from check_report import Checks  # noqa: E402
from repo_commit import binary_commit  # noqa: E402

SMALL = ["device=cpu", "precision.matmul=fp32", "precision.param_dtype=f32", "precision.activations=fp32",
         "model.n_layer=1", "model.n_embd=32", "model.n_head=2", "model.block_size=32", "train.seq_len=32",
         "train.num_threads=1"]
TORCH_SMALL = ["--device=cpu", "--n-layer=1", "--n-embd=32", "--n-head=2", "--seq-len=32", "--vocab=256"]


def check_too_few_gpus(checks, tool, zerotrain):
    """Fewer than 2 GPUs: the one line names what is visible, and a count asked for only when --gpus was given."""
    for flags, said in ((["--fake-gpus", "0"], "bench_multi_gpu: no GPU visible: this benchmark needs 2 or more"),
                        (["--fake-gpus", "1"], "bench_multi_gpu: 1 GPU visible: this benchmark needs 2 or more"),
                        (["--fake-gpus", "1", "--gpus", "2"],
                         "bench_multi_gpu: 2 GPUs asked for, 1 GPU visible: this benchmark needs 2 or more")):
        p = subprocess.run([sys.executable, tool, "--zerotrain", zerotrain, *flags], capture_output=True, text=True,
                           timeout=60)
        checks.check(p.returncode == 2 and p.stderr.strip() == said,
                     f"{' '.join(flags)}: exit 2, {said!r} (exit {p.returncode}: {p.stderr.strip()[:300]!r})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zerotrain", required=True)
    ap.add_argument("--mpirun", required=True)
    args = ap.parse_args()
    checks = Checks()
    tool = os.path.join(ROOT, "tools", "bench_multi_gpu.py")
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "multi.json")
        cmd = [sys.executable, tool, "--zerotrain", args.zerotrain, "--mpirun", args.mpirun, "--fake-gpus", "2",
               "--fake-device", "NVIDIA H100 80GB HBM3", "--batch", "2", "--rounds", "2", "--steps", "2",
               "--warmup", "1", "--python", "/usr/bin/python3", "--out", out,
               *[a for kv in SMALL for a in ("--zerotrain-set", kv)], *[f"--torch-arg={a}" for a in TORCH_SMALL]]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=work)
        if not checks.check(p.returncode == 0 and os.path.exists(out),
                            f"bench_multi_gpu runs end to end (exit {p.returncode}: {(p.stdout + p.stderr)[-1500:]})"):
            return checks.finish()
        with open(out) as f:
            report = json.load(f)
        rows = {r["name"]: r for r in report["rows"]}
        checks.check(report["commit"] == binary_commit(args.zerotrain) and "checkout_commit" in report,
                     f"the result names the commit the binary was built from ({report['commit']}), the checkout's "
                     f"beside it")
        zt = [f"zerotrain-s{k}-n2" for k in range(4)] + ["zerotrain-s0-n1"]
        checks.check(sorted(rows) == sorted(zt + ["fsdp2-n2"]) and report["gpus"] == 2 and report["complete"],
                     f"stages 0-3 on 2 ranks, stage 0 on one, and FSDP2 on 2 ({sorted(rows)})")
        checks.check(all(len(rows[n]["rounds"]) == 2 and "tokens_per_s" in rows[n] and
                         all(len(b["step_ms"]) == 2 and b["clock"].startswith("step to step") for b in rows[n]["rounds"])
                         for n in zt),
                     f"every zerotrain row measured in both rounds, step to step "
                     f"({ {n: rows[n].get('error', 'ok')[:200] for n in zt} })")
        mem = {n: rows[n]["rounds"][0].get("memory", {}) for n in zt}
        checks.check(all(len(mem[n].get("measured_peak_bytes") or []) == (1 if n.endswith("n1") else 2) and
                         mem[n].get("predicted_bytes") for n in zt),
                     "each zerotrain block carries every rank's measured memory and the prediction")
        checks.check(all(m["measured_peak_bytes"][0] == m["predicted_bytes"] for m in mem.values()),
                     "and on the CPU ranks measured equals predicted in every category")
        fsdp = rows["fsdp2-n2"]
        import bench_gpu_torch  # the anchor's interpreter is this one (Debian's torch, before FSDP2)
        if bench_gpu_torch.fsdp2_api() is None:
            checks.check("tokens_per_s" not in fsdp and "FSDP2" in fsdp.get("error", ""),
                         f"a torch without fully_shard: the FSDP2 row fails naming why ({fsdp.get('error', '')[:300]})")
            checks.check("stage0_over_fsdp2_tokens_per_s" not in report["ratios"] and
                         "FAILED" in p.stdout and "device memory per rank" in p.stdout,
                         "no ratio over the missing row; the table and the memory lines still print")
        else:
            checks.check("tokens_per_s" in fsdp and "stage3_over_fsdp2_tokens_per_s" in report["ratios"],
                         f"FSDP2 measured and compared ({fsdp.get('error', '')[:300]})")
        eff = report["ratios"].get("stage0_scaling_efficiency")
        checks.check(eff is not None and abs(eff - rows["zerotrain-s0-n2"]["tokens_per_s"] /
                                             rows["zerotrain-s0-n1"]["tokens_per_s"]) < 1e-12 and
                     report["ratios"].get("stage0_scaling_efficiency_same_round", {}).get("rounds") == 2,
                     f"stage 0's scaling efficiency: tokens/s per GPU on 2 over 1, with its same-round ratios ({eff})")
        # A launcher past its time, whose rank sits in a session of its own and ignores SIGTERM (as
        # torchrun starts its workers): run_group stops the whole tree, SIGKILL after 3 s.
        import bench_harness
        marker = os.path.join(work, "rank_alive")
        rank = f"trap '' TERM; sleep 30; touch {marker}"
        launcher = [sys.executable, "-c", "import subprocess, sys, time; "
                    "subprocess.Popen(['bash', '-c', sys.argv[1]], start_new_session=True); time.sleep(30)", rank]

        def left():
            time.sleep(0.2)
            return subprocess.run(["pgrep", "-f", f"touch {marker}"], capture_output=True, text=True).stdout.strip()

        began = time.monotonic()
        try:
            bench_harness.run_group(launcher, timeout=1.0)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        took, alive = time.monotonic() - began, left()
        checks.check(timed_out and took < 10 and alive == "",
                     f"a launcher past its time: TimeoutExpired, and its ranks stopped with it, those in sessions of "
                     f"their own and ignoring SIGTERM too ({timed_out}, {took:.1f} s, left: {alive!r})")
        # SIGTERM to the benchmark (gpu_session.sh's step limit): exit_on_sigterm makes it SystemExit,
        # and run_group stops the launcher's tree on the way out.
        bench = subprocess.Popen([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import bench_harness; "
                                  "bench_harness.exit_on_sigterm(); bench_harness.run_group(sys.argv[2:], timeout=60)",
                                  os.path.join(ROOT, "tools"), *launcher])
        time.sleep(1.5)
        bench.terminate()
        code = bench.wait(timeout=20)
        alive = left()
        checks.check(code == 143 and alive == "",
                     f"SIGTERM to the benchmark: exit 143, the launcher's ranks stopped first (exit {code}, left: {alive!r})")
        one = subprocess.run([sys.executable, tool, "--zerotrain", args.zerotrain, "--fake-gpus", "1",
                              "--fake-device", "NVIDIA H100 80GB HBM3"], capture_output=True, text=True, timeout=60)
        lines = one.stderr.strip().splitlines()
        checks.check(one.returncode == 2 and len(lines) == 1 and "needs 2 or more" in lines[0],
                     f"one GPU: one line and exit 2 (exit {one.returncode}: {one.stderr.strip()[:300]})")
    check_too_few_gpus(checks, tool, args.zerotrain)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
