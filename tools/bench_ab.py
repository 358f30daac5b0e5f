#!/usr/bin/env python3
"""Two zerotrain binaries side by side (A: a baseline build, B: the change) on the same short runs,
interleaved A B, B A, A B ... (each repeat starts with the other: neither always runs on a rested
machine), so that a change's effect on speed, on the per-op profile and on memory is measured in one
invocation on one machine. Each case is a training run (its own --set overrides, optionally under
mpirun); for each binary the table gives the median over repeats of the run's median ms/step after
the warm-up, B's ratio to A with the range of each repeat's own B/A (their spread is the noise: an
A/A run of one binary read 0.46 and 1.33), the op calls per step of the ops named with --ops
(log.profile_ops) and rank 0's comm_buffers peak, and whether the two binaries' losses are bitwise
equal; a warning where other processes took CPU while it ran. Writes OUT.json (every run's ms/step)
and OUT.md.

usage: /usr/bin/python3 tools/bench_ab.py --a BASELINE/zerotrain --b build/zerotrain --out docs/results/NAME
           [--config configs/tiny.json] [--steps 12] [--warmup 2] [--repeats 3] [--ops fill_zero,accumulate_into]
           --case "NAME:RANKS:key=value,key=value" [--case ...]
"""
import atexit
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mpirun_command import MPIRUN  # noqa: E402
from repo_commit import binary_commit, head_commit  # noqa: E402
from bench_cpu_report import cpu_competition, cpu_counters, load_warning  # noqa: E402
from result_paths import OneLineParser, check_out_file, check_program  # noqa: E402


def parse_case(text):
    """NAME:RANKS:key=value,...; a malformed one is argparse's one-line error (a ValueError)."""
    name, ranks, sets = text.split(":", 2)
    if int(ranks) < 1:
        raise ValueError(f"ranks {ranks}")
    return {"name": name, "ranks": int(ranks), "sets": [s for s in sets.split(",") if s]}


def run(binary, case, args, work):
    run_dir = tempfile.mkdtemp(dir=work)
    cmd = (MPIRUN + ["-np", str(case["ranks"])] if case["ranks"] > 1 else []) + [
        binary, "train", "--config", args.config, "--run-dir", run_dir]
    sets = [f"train.max_steps={args.steps}", "train.eval_every=0", "log.sample_tokens=0", "log.progress=plain",
            "log.profile_ops=true"] + case["sets"]
    for s in sets:
        cmd += ["--set", s]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as e:
        sys.exit(f"bench_ab: {' '.join(cmd)} did not run: {e}")
    if p.returncode != 0:
        sys.exit(f"bench_ab: {' '.join(cmd)} failed (exit {p.returncode}): {p.stderr.strip()[-300:]}")
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        steps = [json.loads(line) for line in f if '"type":"train"' in line.replace(" ", "")]
    with open(os.path.join(run_dir, "op_profile.json")) as f:
        ops = {o["op"]: o["calls_per_step"] for o in json.load(f)["ops"]}
    return {"ms": statistics.median(s["step_ms"] for s in steps[args.warmup:]),
            "losses": [s["loss"] for s in steps],
            "comm_buffers": steps[-1]["memory_peak_bytes"]["comm_buffers"],
            "calls": {op: ops.get(op, 0) for op in args.ops}}


def parse_args():
    """The flags, every one checked before any run: bad input is one line, exit 2."""
    ap = OneLineParser("bench_ab", description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", required=True, help="the baseline zerotrain binary (required)")
    ap.add_argument("--b", default=os.path.join(ROOT, "build", "zerotrain"),
                    help="the changed zerotrain binary (default: %(default)s)")
    ap.add_argument("--out", required=True, help="the result's path without .json/.md (required): writes OUT.json "
                    "and OUT.md")
    ap.add_argument("--config", default=os.path.join(ROOT, "configs", "tiny.json"),
                    help="the run config every case starts from (default: %(default)s)")
    ap.add_argument("--steps", type=int, default=12, help="training steps per run (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=2,
                    help="leading steps left out of each run's median ms/step (default: %(default)s)")
    ap.add_argument("--repeats", type=int, default=3,
                    help="runs of each binary per case, A and B interleaved; the table gives their median "
                    "(default: %(default)s)")
    ap.add_argument("--ops", type=lambda s: s.split(","), default=["fill_zero", "accumulate_into"],
                    help="ops whose calls per step the table compares, comma-separated "
                    "(default: fill_zero,accumulate_into)")
    ap.add_argument("--case", action="append", type=parse_case, required=True,
                    help="NAME:RANKS:key=value,key=value: one training run's --set overrides, under mpirun when "
                    "RANKS > 1 (repeatable, at least one; no default)")
    args = ap.parse_args()
    if args.steps < 1 or args.repeats < 1 or not 0 <= args.warmup < args.steps:
        ap.error(f"need --steps >= 1, --repeats >= 1 and 0 <= --warmup < --steps (got --steps {args.steps} "
                 f"--warmup {args.warmup} --repeats {args.repeats})")
    for side in ("a", "b"):
        check_program("bench_ab", getattr(args, side), f"--{side}")
    if not os.path.isfile(args.config):
        ap.error(f"--config {args.config}: no such file")
    for suffix in (".json", ".md"):
        check_out_file("bench_ab", args.out + suffix)
    return args


def main():
    args = parse_args()
    work = tempfile.mkdtemp(prefix="zt_bench_ab_")
    atexit.register(shutil.rmtree, work, True)  # every run's final weights; the table and JSON are the result
    rows = []
    started = cpu_counters()
    order = [("a", "b") if i % 2 == 0 else ("b", "a") for i in range(args.repeats)]
    for case in args.case:
        got = {"a": [], "b": []}
        for sides in order:
            for side in sides:
                got[side].append(run(getattr(args, side), case, args, work))
        row = {"case": case["name"], "ranks": case["ranks"], "sets": case["sets"],
               "losses_bitwise_equal": all(x["losses"] == got["a"][0]["losses"] for x in got["a"] + got["b"])}
        for side in ("a", "b"):
            row[side] = {"ms_per_step": statistics.median(r["ms"] for r in got[side]),
                         "runs_ms_per_step": [r["ms"] for r in got[side]],
                         "comm_buffers_bytes": got[side][0]["comm_buffers"], "calls_per_step": got[side][0]["calls"]}
        row["b_over_a_ms"] = row["b"]["ms_per_step"] / row["a"]["ms_per_step"]
        row["b_over_a_ms_by_repeat"] = [b["ms"] / a["ms"] for a, b in zip(got["a"], got["b"])]
        rows.append(row)
    competition = cpu_competition(started)
    loaded = load_warning(competition)
    warning = "warning: " + loaded if loaded else ""
    commit = head_commit(short=True) or "unknown"
    # The commit each binary was built from, as it reports it ("+dirty": built with uncommitted changes);
    # the checkout's HEAD (`commit`) need not be either.
    a_commit, b_commit = (binary_commit(getattr(args, side)) or "unknown" for side in ("a", "b"))
    result = {"date": datetime.date.today().isoformat(), "checkout_commit": commit, "a": args.a, "b": args.b,
              "a_commit": a_commit, "b_commit": b_commit,
              "config": os.path.relpath(args.config, ROOT), "steps": args.steps, "warmup": args.warmup,
              "repeats": args.repeats, "order_by_repeat": [list(sides) for sides in order],
              "machine": f"{os.cpu_count()} cores", "cpu_competition": competition, "rows": rows}
    ops = " | ".join(f"{op} A/B" for op in args.ops)
    lines = [f"| case | ranks | A ms/step | B ms/step | B/A | B/A by repeat | {ops} | comm_buffers A/B | losses equal |",
             "|---|---:|---:|---:|---:|---:|" + "---|" * len(args.ops) + "---|---|"]
    for r in rows:
        calls = " | ".join(f"{r['a']['calls_per_step'][op]:g} / {r['b']['calls_per_step'][op]:g}" for op in args.ops)
        by_repeat = r["b_over_a_ms_by_repeat"]
        spread = f"{min(by_repeat):.3f}-{max(by_repeat):.3f}" if len(by_repeat) > 1 else "one repeat"
        lines.append(f"| {r['case']} | {r['ranks']} | {r['a']['ms_per_step']:.1f} | {r['b']['ms_per_step']:.1f} | "
                     f"{r['b_over_a_ms']:.3f} | {spread} | {calls} | {r['a']['comm_buffers_bytes']} / "
                     f"{r['b']['comm_buffers_bytes']} | {'yes' if r['losses_bitwise_equal'] else 'NO'} |")
    table = "\n".join(lines) + (f"\n\n{warning}" if warning else "")
    print(table)
    with open(args.out + ".json", "w") as f:
        json.dump(result, f, indent=1)
    with open(args.out + ".md", "w") as f:
        f.write(f"# A/B: {os.path.basename(args.out)}\n\n{result['date']}, checkout at {commit}, {result['machine']}; "
                f"A = {args.a} (built from {a_commit}), B = {args.b} (built from {b_commit}); {result['config']}, "
                f"{args.steps} steps, median ms/step after "
                f"{args.warmup}, median of {args.repeats} interleaved runs, each repeat starting with the other "
                f"binary (`tools/bench_ab.py`).\n\n{table}\n")


if __name__ == "__main__":
    main()
