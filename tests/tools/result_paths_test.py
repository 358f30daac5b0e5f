#!/usr/bin/env python3
"""The benchmark and report tools never write into docs/results/ unless told to, and refuse an output
place they cannot write before their runs, in one line:

  * no tool's default output (its --out or --out-dir) lies under docs/results/: they write under
    runs/results/ (tools/result_paths.py), so a run of a tool cannot replace a committed result;
  * an --out under a plain file, an --out that is a folder, an --out-dir that is a file, an --out
    or --out-dir under /proc (writable by os.access() for root, which the check once trusted):
    exit 2 within seconds with one line naming the flag and the path, no traceback (before, each
    failed after minutes of runs, its results lost);
  * bench_cpu.py refuses another model family than GPT-2 and the Llama (its PyTorch side and FLOPs know those two)
    and a model size that is not a whole number; memory_report.py a --preset with --ranks;
    bench_checkpoint.py --ranks 0 (mpirun -np 0 starts a rank on every slot); bench_zero.py
    repeats or steps it cannot take a median of; memory_report.py a missing binary;
  * bench_async_checkpoint.py --device cuda without a GPU: one line, before any run; on the CPU,
    a small model's runs with a synchronous save before the end give its table and JSON (the
    synchronous saves carry no staging time, whose mean was a TypeError after both runs).

usage: result_paths_test.py PATH/TO/zerotrain
"""
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402

TOOLS = os.path.join(ROOT, "tools")
# A default that names docs/results: os.path.join(ROOT, "docs", "results", ...), REPO / "docs" /
# "results", or the text "docs/results/..." after default= or `or`.
DEFAULT_INTO_RESULTS = re.compile(r'(default=|\bor )\s*(os\.path\.join\([^)]*"docs",\s*"results"|str\(REPO / "docs" / '
                                  r'"results"|["\']docs/results)')


def check_async_checkpoint_table(check, zerotrain, work):
    """bench_async_checkpoint.py on a small model: saves at steps 3 and 6 of 7, so a synchronous save
    lands before the end and an asynchronous one is staged before it."""
    out = os.path.join(work, "out", "async.json")
    small = [arg for kv in ("model.n_layer=1", "model.n_head=2", "model.n_embd=32") for arg in ("--zerotrain-set", kv)]
    p = subprocess.run([sys.executable, os.path.join(TOOLS, "bench_async_checkpoint.py"), "--zerotrain", zerotrain,
                        "--steps", "7", "--every", "3", "--work", os.path.join(work, "runs"), "--out", out, *small],
                       capture_output=True, text=True, timeout=300)
    if not check(p.returncode == 0 and os.path.isfile(out),
                 f"bench_async_checkpoint, a small model: exit 0 and its JSON (exit {p.returncode}: {p.stderr[-500:]})"):
        return
    with open(out) as f:
        modes = json.load(f)["modes"]
    sync, asyn = modes["sync"], modes["async"]
    check([s["step"] for s in sync["saves"]] == [3, 6] and (sync["blocked_seconds_per_save"] or 0) > 0
          and sync["staging_seconds_per_save"] is None,
          f"the synchronous run: saves at 3 and 6, blocked time and no staging ({sync})")
    check(all((asyn[key] or 0) > 0 for key in ("blocked_seconds_per_save", "staging_seconds_per_save")),
          f"the asynchronous run: blocked and staging time ({asyn})")
    rows = [line.split()[0] for line in p.stdout.splitlines() if line.split()[:1] in (["sync"], ["async"])]
    check(rows == ["sync", "async"] and f"wrote {out}" in p.stdout, f"its table names both runs:\n{p.stdout}")


def main():
    zerotrain = os.path.abspath(sys.argv[1])
    checks = Checks()
    check = checks.check
    offenders = []
    for name in sorted(os.listdir(TOOLS)):
        if name.endswith(".py"):
            with open(os.path.join(TOOLS, name)) as f:
                offenders += [f"{name}:{i + 1}" for i, line in enumerate(f) if DEFAULT_INTO_RESULTS.search(line)]
    check(not offenders, f"no tool's default output lies under docs/results ({offenders or 'none'})")

    work = checks.work_folder("zt_result_paths_")
    a_file = os.path.join(work, "a_file")
    open(a_file, "w").close()
    tiny = os.path.join(ROOT, "configs", "tiny.json")
    build = os.path.dirname(os.path.abspath(zerotrain))
    cases = [
        (["bench_checkpoint.py", "--build", build, "--config", tiny, "--ranks", "1", "--out", f"{a_file}/x.json"],
         "--out"),
        (["bench_checkpointing.py", "--zerotrain", zerotrain, "--out", work], "--out"),
        (["bench_cpu.py", "--zerotrain", zerotrain, "--out", f"{a_file}/cpu.json"], "--out"),
        (["bench_cpu.py", "--zerotrain", zerotrain, "--set", "model.arch=mamba"], "model.arch"),
        (["bench_cpu.py", "--zerotrain", zerotrain, "--set", "model.n_layer=abc"], "model.n_layer"),
        (["bench_planner.py", "--zerotrain", zerotrain, "--out", f"{a_file}/p.json"], "--out"),
        (["bench_quantized_collectives.py", "--zerotrain", zerotrain, "--out", f"{a_file}/q.json"], "--out"),
        (["bench_sampling.py", "--zerotrain", zerotrain, "--out", f"{a_file}/s.json"], "--out"),
        (["bench_async_checkpoint.py", "--zerotrain", zerotrain, "--out", f"{a_file}/a.json"], "--out"),
        (["bench_cpu.py", "--zerotrain", zerotrain, "--out", "/proc/zt_cpu.json"], "--out"),
        (["bench_sampling.py", "--zerotrain", zerotrain, "--out", "/proc/zt_dir/s.json"], "--out"),
        (["memory_report.py", "--zerotrain", zerotrain, "--ranks", "1", "--out-dir", "/proc"], "--out-dir"),
        (["bench_zero.py", "--zerotrain", zerotrain, "--config", tiny, "--out-dir", a_file], "--out-dir"),
        (["memory_report.py", "--zerotrain", zerotrain, "--ranks", "1", "--out-dir", f"{a_file}/m"], "--out-dir"),
        (["memory_report.py", "--zerotrain", zerotrain, "--preset", "gpt2-124m-cpu", "--ranks", "1"], "--preset"),
        (["bench_checkpoint.py", "--build", build, "--config", tiny, "--ranks", "0"], "--ranks"),
        (["bench_zero.py", "--zerotrain", zerotrain, "--config", tiny, "--repeats", "0"], "--repeats"),
        (["bench_zero.py", "--zerotrain", zerotrain, "--config", tiny, "--steps", "2", "--warmup", "2"], "--warmup"),
        (["memory_report.py", "--zerotrain", os.path.join(work, "no_zerotrain"), "--ranks", "1"], "--zerotrain"),
    ]
    for argv, named in cases:
        try:
            p = subprocess.run([sys.executable, os.path.join(TOOLS, argv[0]), *argv[1:]], capture_output=True, text=True,
                               timeout=60, cwd=work)
        except subprocess.TimeoutExpired:
            check(False, f"{' '.join(argv)}: refused at once (still running after 60 s)")
            continue
        lines = [line for line in p.stderr.splitlines() if line.strip()]
        check(p.returncode == 2 and lines and named in lines[-1] and "Traceback" not in p.stderr,
              f"{' '.join(os.path.relpath(a, work) if a.startswith(work) else a for a in argv)}: exit 2 naming "
              f"{named} (exit {p.returncode}: {lines[-1:] if lines else p.stdout.strip()[-200:]})")
    # A GPU benchmark without a GPU: its one line, before any run (it printed a run's cut-off stderr).
    if shutil.which("nvidia-smi") is None:
        p = subprocess.run([sys.executable, os.path.join(TOOLS, "bench_async_checkpoint.py"), "--zerotrain", zerotrain,
                            "--device", "cuda", "--out", os.path.join(work, "gpu.json")], capture_output=True, text=True,
                           timeout=60)
        lines = [line for line in p.stderr.splitlines() if line.strip()]
        check(p.returncode != 0 and len(lines) == 1 and "no NVIDIA GPU" in lines[0],
              f"bench_async_checkpoint --device cuda without a GPU: one line ({lines})")
    check(sorted(os.listdir(work)) == ["a_file"], f"nothing written beside it ({sorted(os.listdir(work))})")
    # A dangling link as --out: the file it names can be made, so the check passes and leaves none.
    sys.path.insert(0, TOOLS)
    from result_paths import check_out_file
    links = checks.work_folder("zt_result_links_")
    os.symlink(os.path.join(links, "target.json"), os.path.join(links, "out.json"))
    try:
        check_out_file("result_paths_test", os.path.join(links, "out.json"))
        passed = True
    except SystemExit:
        passed = False
    check(passed and sorted(os.listdir(links)) == ["out.json"], f"a dangling link as --out is taken, nothing left "
                                                               f"({passed}, {sorted(os.listdir(links))})")
    check_async_checkpoint_table(check, zerotrain, checks.work_folder("zt_async_bench_"))
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
