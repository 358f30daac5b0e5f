"""Smoke test of tools/bench_ab.py: the same real zerotrain as A and B on a tiny 1-rank run gives
a row whose op counts and comm_buffers agree, whose losses are bitwise equal and whose B/A is the
ratio of the two medians, beside each repeat's own B/A (the repeats start with A and B in turn); the
JSON and markdown files are written; each binary's commit is the one it
reports (`zerotrain version`, "+dirty" included), not its folder's checkout's HEAD. Bad input stops the
tool before any run with exit 2 and one line naming the flag: a missing binary, an --out that cannot be
written (it failed with a traceback after all the runs), --warmup >= --steps and --repeats 0 (a
median of nothing after the runs). --help gives every flag a meaning and its default.
Usage: bench_ab_smoke_test.py --zerotrain build/zerotrain
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from check_report import close_work_folders  # noqa: E402
from tool_run_util import flag_help  # noqa: E402

BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench_ab.py"
CASE = ("tiny:1:model.n_layer=1,model.n_head=2,model.n_embd=32,model.block_size=16,train.seq_len=16,"
        "train.micro_batch=2,train.num_threads=1,zero.stage=3,zero.solo_path=false")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zerotrain", required=True)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="zt_bench_ab_test_")
    out = Path(work) / "ab"
    base = [sys.executable, str(BENCH), "--a", args.zerotrain, "--b", args.zerotrain, "--steps", "4", "--warmup",
            "1", "--repeats", "2", "--case", CASE]
    p = subprocess.run(base + ["--out", str(out)], capture_output=True, text=True, timeout=300)
    failures = []
    if p.returncode != 0:
        failures.append(f"bench_ab exit {p.returncode}: {p.stderr.strip()[-300:]}")
    else:
        result = json.loads(out.with_suffix(".json").read_text())
        row = result["rows"][0]
        if not row["losses_bitwise_equal"]:
            failures.append("the same binary's losses differ")
        if row["a"]["calls_per_step"] != row["b"]["calls_per_step"] or row["a"]["calls_per_step"]["fill_zero"] <= 0:
            failures.append(f"op calls: {row['a']['calls_per_step']} vs {row['b']['calls_per_step']}")
        if row["a"]["comm_buffers_bytes"] != row["b"]["comm_buffers_bytes"]:
            failures.append("comm_buffers differ for the same binary")
        if abs(row["b_over_a_ms"] - row["b"]["ms_per_step"] / row["a"]["ms_per_step"]) > 1e-12:
            failures.append("B/A is not the ratio of the medians")
        # Each repeat starts with the other binary; every run's time kept, each repeat's own B/A beside.
        runs = {side: row[side]["runs_ms_per_step"] for side in ("a", "b")}
        if result["order_by_repeat"] != [["a", "b"], ["b", "a"]] or any(len(v) != 2 for v in runs.values()):
            failures.append(f"order {result['order_by_repeat']}, runs {runs}")
        elif row["b_over_a_ms_by_repeat"] != [b / a for a, b in zip(runs["a"], runs["b"])]:
            failures.append(f"B/A by repeat {row['b_over_a_ms_by_repeat']} from the runs {runs}")
        low, high = min(row["b_over_a_ms_by_repeat"]), max(row["b_over_a_ms_by_repeat"])
        if f"| {low:.3f}-{high:.3f} |" not in out.with_suffix(".md").read_text() or "other_processes_cores" not in \
                result.get("cpu_competition", {}):
            failures.append("the table lacks the range of the repeats' B/A, or the JSON the CPU competition")
        if "| tiny | 1 |" not in out.with_suffix(".md").read_text():
            failures.append("the markdown table has no row for the case")
        reported = re.search(r"\(commit (\S+)\)", subprocess.run([args.zerotrain, "version"], capture_output=True,
                                                                 text=True).stdout.splitlines()[0]).group(1)
        md = out.with_suffix(".md").read_text()
        if result["a_commit"] != reported or result["b_commit"] != reported or f"built from {reported})" not in md:
            failures.append(f"each binary's commit is the one it reports, {reported}: JSON {result['a_commit']}, "
                            f"{result['b_commit']}; markdown {md[:400]!r}")
    a_file = Path(work) / "a_file"
    a_file.write_text("")
    refused = [(["--a", "/nonexistent/zerotrain"], "--a"), (["--out", str(a_file / "ab")], "--out"),
               (["--steps", "2", "--warmup", "2"], "--warmup"), (["--repeats", "0"], "--repeats")]
    for flags, named in refused:
        argv = base + ["--out", str(out) + "_bad"]
        for flag, value in zip(flags[::2], flags[1::2]):  # each flag is in argv: its value replaced
            argv[argv.index(flag) + 1] = value
        bad = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        lines = bad.stderr.strip().splitlines()
        if bad.returncode != 2 or len(lines) != 1 or "bench_ab:" not in lines[0] or named not in lines[0]:
            failures.append(f"{' '.join(flags)}: exit 2 in one line naming {named} (exit {bad.returncode}, stderr "
                            f"{bad.stderr.strip()[-300:]!r})")
    left = sorted(n for n in os.listdir(work) if n.startswith("ab_bad"))
    if left:
        failures.append(f"refused runs wrote {left}")
    helped = subprocess.run([sys.executable, str(BENCH), "--help"], capture_output=True, text=True, timeout=60)
    bare = [flag for flag in ("--a", "--b", "--out", "--config", "--steps", "--warmup", "--repeats", "--ops", "--case")
            if not re.search(r"default|required", flag_help(helped.stdout, flag))]
    if helped.returncode != 0 or bare or "Two zerotrain binaries side by side" not in helped.stdout:
        failures.append(f"--help: a description and each flag's meaning and default (bare: {bare})")
    for f in failures:
        print("FAIL", f)
    print("bench_ab smoke test:", "failed" if failures else "passed")
    close_work_folders([work], passed=not failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
