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
  * every tool that runs zerotrain refuses a missing --zerotrain in one line, exit 2 (some gave a
    traceback or exit 1), and bench_checkpointing.py --steps 1 or --rounds 0 and bench_planner.py
    --steps 1 (a median of nothing: a traceback after minutes of runs); bench_checkpointing.py
    leaves no temporary folder behind when it fails (42 MB of runs);
  * bench_checkpoint, bench_checkpointing, bench_async_checkpoint, bench_quantized_collectives and
    bench_planner's --help describe the tool and give every flag a meaning and its default;
  * bench_planner.py's table names its estimate column for what it holds: the step time, which
    overlaps communication with computation, then its compute and comm parts (not their sum);
  * bench_async_checkpoint.py --device cuda without a GPU: one line, before any run; on the CPU,
    a small model's runs with a synchronous save before the end give its table and JSON (the
    synchronous saves carry no staging time, whose mean was a TypeError after both runs).

  * Ctrl-C in a tool ends it with one line and exit 130, its temporary work folder removed
    (run_main, temporary_work); a zerotrain command that fails, with that command's error line;
    memory_report.py's --name with a folder is refused before the runs; bitwise_matrix.sh refuses
    an OUTDIR that is not an earlier matrix's, and a wrong binary, before removing anything.

usage: result_paths_test.py PATH/TO/zerotrain
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402
from tool_run_util import flag_help  # noqa: E402

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


HELPED = {  # tool: its flags, each of which --help must explain with its default
    "bench_checkpoint.py": ("--build", "--config", "--ranks", "--stage", "--out"),
    "bench_checkpointing.py": ("--zerotrain", "--steps", "--rounds", "--out"),
    "bench_async_checkpoint.py": ("--zerotrain", "--device", "--steps", "--every", "--work", "--out"),
    "bench_quantized_collectives.py": ("--zerotrain", "--text", "--steps", "--micro-batch", "--eval-every",
                                       "--eval-batches", "--variants", "--out"),
    "bench_planner.py": ("--zerotrain", "--budget", "--steps", "--link-gbps", "--link-latency-us", "--out"),
}


def check_help(check):
    for tool, flags in HELPED.items():
        with open(os.path.join(TOOLS, tool)) as f:
            first = f.read().split('"""')[1].splitlines()[0]
        p = subprocess.run([sys.executable, os.path.join(TOOLS, tool), "--help"], capture_output=True, text=True,
                           timeout=60)
        text = " ".join(p.stdout.split())
        bare = [flag for flag in flags if "default" not in flag_help(p.stdout, flag)]
        check(p.returncode == 0 and " ".join(first.split()) in text and not bare,
              f"{tool} --help: its docstring's first line and each flag's meaning and default (bare: {bare})")


def check_planner_table(check):
    """The estimate is the step time (comm overlapped with compute), not compute + comm."""
    sys.path.insert(0, TOOLS)
    import bench_planner
    row = {"model": "gpt2", "ranks": 2, "sets": ["zero.stage=1"], "estimate_step_ms": 120.0,
           "estimate_compute_ms": 100.0, "estimate_comm_ms": 50.0, "measured_step_ms": 125.0, "error": -0.04}
    table = bench_planner.table({"commit": "abc", "cpu": "x86_64", "cores": 2, "budget": "600MB", "link_gbps": 5.0,
                                 "link_latency_us": 20.0, "rows": [row]})
    check("| estimate: step (compute, comm) |" in table and "| 120 ms (100, 50.0) |" in table
          and "compute + comm" not in table, f"bench_planner's estimate column says what it holds:\n{table}")


def check_zero_ratios_by_round(check):
    """bench_zero's ratio to stage 0 is each round's (the two runs neighbours in time), not one of
    medians taken minutes apart: a machine twice as slow in round 2 moves neither ratio."""
    sys.path.insert(0, TOOLS)
    import bench_zero
    ratios = bench_zero.per_round_ratios([[100.0, 200.0], [110.0, 220.0]])
    check(ratios == [[1.0, 1.0], [1.1, 1.1]], f"bench_zero: each round's ratio to its own stage 0 ({ratios})")


def check_checkpointing_cleans_up(check, work):
    """bench_checkpointing.py with a zerotrain that fails its first run: its one line, exit 1, and no
    zt_ckpt_policy_bench_* folder left in TMPDIR (it held 42 MB of runs)."""
    failing = os.path.join(work, "zerotrain")
    with open(failing, "w") as f:
        f.write("#!/bin/sh\necho 'train: error: a planted failure' >&2\nexit 1\n")
    os.chmod(failing, 0o755)
    tmp = os.path.join(work, "tmp")
    os.mkdir(tmp)
    p = subprocess.run([sys.executable, os.path.join(TOOLS, "bench_checkpointing.py"), "--zerotrain", failing,
                        "--out", os.path.join(work, "c.json")], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, TMPDIR=tmp))
    left = glob.glob(os.path.join(tmp, "zt_ckpt_policy_bench_*"))
    check(p.returncode == 1 and "planted failure" in p.stderr and not left,
          f"bench_checkpointing, a failing run: exit 1 and no temporary folder left (exit {p.returncode}, {left})")


def check_zero_bench_failure(check, work):
    """bench_zero.py with a zerotrain whose runs fail: the engine's line with the run's ranks and stage,
    exit 1 (it printed the whole mpirun command and the stderr tail), and no zt_zerobench_* folder
    left in TMPDIR; SIGTERM, as a time limit sends it, leaves none either (atexit ran only on an exit)."""
    failing = os.path.join(work, "zerotrain")
    with open(failing, "w") as f:
        f.write("#!/bin/sh\n"
                "if [ \"$1\" = memory ]; then echo '{\"params\": 1000, \"micro_batch\": 2, \"seq_len\": 8}'; exit 0; fi\n"
                "if [ -n \"$ZT_HANG\" ]; then sleep 20; fi\n"
                "echo 'zerotrain: error: a planted failure' >&2\nexit 2\n")
    os.chmod(failing, 0o755)
    tmp = os.path.join(work, "tmp")
    os.mkdir(tmp)
    argv = [sys.executable, os.path.join(TOOLS, "bench_zero.py"), "--zerotrain", failing, "--out-dir",
            os.path.join(work, "out")]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=dict(os.environ, TMPDIR=tmp))
    lines = p.stderr.strip().splitlines()
    left = glob.glob(os.path.join(tmp, "zt_zerobench_*"))
    check(p.returncode == 1 and len(lines) == 1 and "stage 0" in lines[0] and "planted failure" in lines[0]
          and not left, f"bench_zero, a failing run: its line, exit 1, no folder left ({p.returncode}: {lines}, {left})")
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, TMPDIR=tmp, ZT_HANG="1"))
    deadline = time.monotonic() + 60
    while not glob.glob(os.path.join(tmp, "zt_zerobench_*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.terminate()
    proc.wait(timeout=120)
    left = glob.glob(os.path.join(tmp, "zt_zerobench_*"))
    check(proc.returncode == 143 and not left, f"bench_zero stopped by SIGTERM: no folder left ({proc.returncode}, {left})")


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
        (["bench_checkpointing.py", "--steps", "1"], "--steps"),
        (["bench_checkpointing.py", "--rounds", "0"], "--rounds"),
        (["bench_planner.py", "--zerotrain", zerotrain, "--steps", "1"], "--steps"),
        (["bench_quantized_collectives.py", "--zerotrain", zerotrain, "--variants", "exact,qXY"], "--variants"),
    ] + [([tool, "--zerotrain", os.path.join(work, "no_zerotrain")], "--zerotrain")
         for tool in ("bench_checkpointing.py", "bench_quantized_collectives.py", "bench_planner.py", "bench_zero.py",
                      "bench_cpu.py", "bench_sampling.py", "bench_async_checkpoint.py")]
    for argv, named in cases:
        try:
            p = subprocess.run([sys.executable, os.path.join(TOOLS, argv[0]), *argv[1:]], capture_output=True, text=True,
                               timeout=60, cwd=work)
        except subprocess.TimeoutExpired:
            check(False, f"{' '.join(argv)}: refused at once (still running after 60 s)")
            continue
        lines = [line for line in p.stderr.splitlines() if line.strip()]
        check(p.returncode == 2 and len(lines) == 1 and named in lines[-1] and "Traceback" not in p.stderr,
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
    # An --out in folders not made yet: they can be, and the check removes them again (the tool
    # makes them when it writes its result).
    check_out_file("result_paths_test", os.path.join(links, "new", "deeper", "out.json"))
    check(sorted(os.listdir(links)) == ["out.json"], f"the folders made to probe --out are removed again "
                                                     f"({sorted(os.listdir(links))})")
    check_async_checkpoint_table(check, zerotrain, checks.work_folder("zt_async_bench_"))
    check_help(check)
    check_planner_table(check)
    check_zero_ratios_by_round(check)
    check_checkpointing_cleans_up(check, checks.work_folder("zt_ckpt_policy_cleanup_"))
    check_zero_bench_failure(check, checks.work_folder("zt_zero_bench_failure_"))
    # Ctrl-C in a tool: one line, exit 130, its temporary work folder removed (a 3.3 GB one stayed in
    # /tmp with a traceback); a zerotrain command that fails: its own error line, not a
    # CalledProcessError's traceback; memory_report's --name is a plain file name, refused up front.
    probe = (
        "import os, subprocess, sys; sys.path.insert(0, sys.argv[1]); import result_paths as r\n"
        "work = r.temporary_work('zt_probe_'); print(work, flush=True)\n"
        "def interrupted(): raise KeyboardInterrupt\n"
        "def failed(): subprocess.run(['sh', '-c', 'echo zerotrain: error: the reason >&2; echo ---- >&2; exit 2'],"
        " check=True, capture_output=True, text=True)\n"
        "sys.exit(r.run_main('probe', interrupted if sys.argv[2] == 'int' else failed))\n")
    for kind, code, said in (("int", 130, "probe: stopped by SIGINT (no result written)"),
                             ("fail", 1, "probe: sh -c ... failed (exit 2): zerotrain: error: the reason")):
        p = subprocess.run([sys.executable, "-c", probe, os.path.join(ROOT, "tools"), kind], capture_output=True,
                           text=True, timeout=60)
        left = p.stdout.strip()
        check(p.returncode == code and p.stderr.strip() == said and left and not os.path.exists(left),
              f"run_main, {kind}: exit {code}, one line, the work folder removed ({p.returncode}, {p.stderr!r}, "
              f"{left} {'left' if left and os.path.exists(left) else 'gone'})")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "memory_report.py"), "--zerotrain", zerotrain,
                        "--name", "a/b", "--out-dir", os.path.join(work, "named")], capture_output=True, text=True,
                       timeout=60)
    check(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "--name 'a/b'" in p.stderr,
          f"memory_report --name with a folder: refused before the runs ({p.stderr.strip()})")
    # bitwise_matrix.sh removes only an earlier matrix's folder: a folder of anything else, or a wrong
    # binary, is refused in one line before anything is touched (its first line was rm -rf OUTDIR).
    precious = os.path.join(work, "precious")
    os.makedirs(precious)
    with open(os.path.join(precious, "notes.txt"), "w") as f:
        f.write("mine\n")
    matrix = os.path.join(ROOT, "tools", "bitwise_matrix.sh")
    for args, words in (([zerotrain, precious], "is not an earlier matrix's output"),
                        ([os.path.join(work, "no_binary"), precious], "not an executable zerotrain binary"),
                        ([], "usage: tools/bitwise_matrix.sh"),
                        ([zerotrain, ""], "usage: tools/bitwise_matrix.sh")):
        p = subprocess.run(["bash", matrix, *args], capture_output=True, text=True, timeout=60)
        check(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and words in p.stderr and
              os.path.exists(os.path.join(precious, "notes.txt")),
              f"bitwise_matrix.sh {' '.join(os.path.basename(a) for a in args)}: refused, the folder kept "
              f"({p.stderr.strip()})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
