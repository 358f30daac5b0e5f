#!/usr/bin/env python3
"""ZeRO memory report: trains the same config for one step at stages 0-3 on each rank count asked
for (real processes, mpirun), and writes what each rank measured per memory category beside the
prediction (`engine/distributed/sharding/memory_model`) as a Markdown table and a PNG bar chart
(OUT_DIR/NAME.md, OUT_DIR/NAME.png) plus the raw figures as JSON (OUT_DIR/NAME.json: a key per run,
N<ranks>_stage<stage>, and "generated", how the file was made: the binary's commit, date, config,
ranks, dtype, --set values, machine; readers of the runs skip that key). The total is
the run's real peak, the categories' sum at its highest moment (the summary record's
`memory_total_peak_bytes`, rank 0's), not the sum of each category's own peak, which adds peaks
of different moments (a step's activations, the final gather's buffer) and so overstates. With
--readme, the largest rank count's table and the chart also go into that file, between the lines
`<!-- memory_report:NAME begin -->` and `<!-- memory_report:NAME end -->` (the README's tables are
the tool's, never typed). Bad input (a flag, a config or --set that zerotrain refuses, found by
`zerotrain memory` before any run, a README without those lines): one line, exit 2; a run that
fails: exit 1.

usage: /usr/bin/python3 tools/memory_report.py [--zerotrain build/zerotrain] [--config configs/tiny.json]
           [--ranks 1,2,4] [--set KEY=VALUE ...] [--dtype bf16] [--name memory_report]
           [--out-dir runs/results] [--readme README.md] [--preset gpt2-124m-cpu]

--preset gpt2-124m-cpu: GPT-2 124M's shape on 4 CPU ranks (the README's measured table): its config
with the embedded data, micro-batch 1 x 128 tokens (model states, not activations, dominate), fp32
products; 144 s on 2 cores (2026-11-27, 1a42773), 83 s on 2 shared cores (2026-12-06, c3860a9).
"""
import datetime
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from mpirun_command import MPIRUN  # noqa: E402
from repo_commit import binary_commit, head_commit  # noqa: E402
from result_paths import OneLineParser, check_out_dir, default_out, run_main  # noqa: E402
import result_paths  # noqa: E402
GENERATED = "generated"  # the JSON's key for how it was made; every other key is a run
CATEGORIES = ["parameters", "gradients", "master_weights", "optimizer_states", "activations", "comm_buffers",
              "workspace"]


PRESETS = {
    "gpt2-124m-cpu": {
        "config": os.path.join(ROOT, "configs", "gpt2_124m.json"), "ranks": "4", "name": "memory_gpt2_124m_4ranks",
        "sets": ["device=cpu", "precision.matmul=fp32", "data.dataset=embedded", "train.micro_batch=1",
                 "train.seq_len=128", "train.global_batch_tokens=512"]},
}


def refuse(message):
    """Bad input (a flag, the config, the README): one line, exit 2, as zerotrain's own."""
    result_paths.refuse("memory_report", message)


def run_sets(args):
    """The --set flags of every run (one step, the weights' dtype, no samples), then the user's."""
    sets = ["train.max_steps=1", f"precision.param_dtype={args.dtype}", "log.sample_tokens=0", "train.eval_batches=1",
            "train.num_threads=1", "log.progress=plain", *args.sets]
    return [flag for kv in sets for flag in ("--set", kv)]


def check_config(args, rank_counts):
    """The config and --set flags as the runs give them, refused in zerotrain's own line before any run:
    `zerotrain memory` reads them as `train` does, in milliseconds, and exits 2 on what it refuses."""
    for ranks in rank_counts:
        cmd = [args.zerotrain, "memory", "--config", args.config, "--ranks", str(ranks), "--brief", *run_sets(args)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if p.returncode == 2:
            said = (p.stderr.strip().splitlines() or ["no message"])[-1].removeprefix("zerotrain: error: ")
            on = f"{os.path.basename(args.config)} on {ranks} rank{'s' * (ranks > 1)}"
            refuse(f"zerotrain refuses the run's config ({on}): {said}")


def run(args, ranks, stage, work):
    run_dir = os.path.join(work, f"n{ranks}_s{stage}")
    cmd = [args.zerotrain] if ranks == 1 else MPIRUN + ["-np", str(ranks), args.zerotrain]
    cmd += ["train", "--config", args.config, "--run-dir", run_dir, "--set", f"zero.stage={stage}", *run_sets(args)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit(f"memory_report: {' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
    metrics = os.path.join(run_dir, "metrics.jsonl")
    with open(metrics) as f:
        records = [json.loads(l) for l in f if l.strip()]
    rec = next((r for r in records if r.get("type") == "memory"), None)  # the first step's peaks, per rank
    summary = next((r for r in reversed(records) if r.get("type") == "summary"), None)
    if rec is None or summary is None:
        sys.exit(f"memory_report: {metrics}: no {'memory' if rec is None else 'summary'} record (the run ended "
                 "before its first step's, or its end's)")
    if "memory_total_peak_bytes" not in summary:
        sys.exit(f"memory_report: {metrics}: the summary has no memory_total_peak_bytes (a binary older than "
                 "the total peak's logging: rebuild it, tools/build.sh)")
    rec["memory_total_peak_bytes"] = summary["memory_total_peak_bytes"]
    return rec


def mib(b):
    return f"{b / 2**20:.2f}"


def largest(rec, categories):
    """The largest rank's bytes summed over `categories` (each category's own peak: for all of
    them, the sum of category peaks, no one moment's total)."""
    return max(sum(r[c] for c in categories) for r in rec["measured_peak_bytes"])


def total_peak(rec):
    """Rank 0's real total peak over the run: the categories' sum at its highest moment."""
    return rec["memory_total_peak_bytes"]


def commit():
    return head_commit(short=True) or "unknown"


def measured_commit(args):
    """The code the runs measured: the binary's commit, as it reports it (the checkout's HEAD may
    have moved on since the build), else the checkout's."""
    return binary_commit(args.zerotrain) or commit()


def full_table(args, results):
    """Every rank count and stage, every category measured beside predicted."""
    lines = [f"# ZeRO memory per rank: measured vs predicted ({os.path.basename(args.config)}, {args.dtype}, "
             f"one training step)", "",
             f"Generated by `{args.command}` on {datetime.date.today()}, commit {measured_commit(args)}"
             + (f", with {', '.join(args.sets)}" if args.sets else "") + ". "
             "MiB per rank; *measured* is the largest peak over the ranks; *pred* is "
             "`engine/distributed/sharding/memory_model`'s prediction (docs/zero_memory.md). *total peak* is rank 0's "
             "categories' sum at its highest moment over the one-step run (its evaluation and final save included; the "
             "summary record's `memory_total_peak_bytes`); *sum of category peaks* adds each category's own peak, "
             "moments apart, so it is no total the run held.", "",
             "| N | stage | " + " | ".join(f"{c} meas / pred" for c in CATEGORIES)
             + " | model states meas | total peak (rank 0) | sum of category peaks | max rel. gap |",
             "|---" * (len(CATEGORIES) + 6) + "|"]
    for (n, st), rec in results.items():
        cells, gap = [], 0.0
        for c in CATEGORIES:
            m = max(r[c] for r in rec["measured_peak_bytes"])
            p = rec["predicted_bytes"][c]
            cells.append(f"{mib(m)} / {mib(p)}")
            if p:
                gap = max(gap, abs(m - p) / p)
        lines.append(f"| {n} | {st} | " + " | ".join(cells) + f" | {mib(largest(rec, CATEGORIES[:4]))} | "
                     f"{mib(total_peak(rec))} | {mib(largest(rec, CATEGORIES))} | {gap:.2%} |")
    return lines


def readme_section(args, results, png_name):
    """The largest rank count's stages at a glance: model states, the rest, the real total peak
    against stage 0's, the sum of category peaks (named as that), and whether every category was
    measured as predicted."""
    n = max(k[0] for k in results)
    rows = [(st, results[(n, st)]) for st in range(4)]
    base = total_peak(rows[0][1])
    lines = [f"`{os.path.basename(args.config)}` on {n} CPU ranks, {args.dtype} weights"
             + (" with fp32 master weights" if args.dtype == "bf16" else "") + ", one training step"
             + (f" ({', '.join(args.sets)})" if args.sets else "")
             + f"; generated by `tools/memory_report.py` on {datetime.date.today()}, commit {measured_commit(args)}. "
             "MiB: each category's peak on the largest rank; *total peak* is rank 0's categories' sum at its "
             "highest moment over the run (the summary's `memory_total_peak_bytes`); the *sum of category peaks* adds "
             "peaks that need not coincide, so it is no total the run held:", "",
             "| stage | model states | activations, buffers | total peak | total peak vs stage 0 "
             "| sum of category peaks | every category as predicted |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for st, rec in rows:
        states, peaks_sum, total = largest(rec, CATEGORIES[:4]), largest(rec, CATEGORIES), total_peak(rec)
        exact = all(max(r[c] for r in rec["measured_peak_bytes"]) == rec["predicted_bytes"][c] for c in CATEGORIES)
        lines.append(f"| {st} | {mib(states)} | {mib(peaks_sum - states)} | {mib(total)} | {total / base:.0%} | "
                     f"{mib(peaks_sum)} | {'yes, to the byte' if exact else 'no (see ' + args.name + '.md)'} |")
    rel = os.path.relpath(os.path.join(args.out_dir, png_name), os.path.dirname(os.path.abspath(args.readme)))
    lines += ["", f"![memory by category and stage]({rel})"]
    return lines


def readme_text(path, name):
    """The file's text and its section's begin and end lines; exits (one line) where they are missing."""
    begin, end = f"<!-- memory_report:{name} begin -->", f"<!-- memory_report:{name} end -->"
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        refuse(f"--readme {path}: {e.strerror}")
    if begin not in text or end not in text or text.index(begin) > text.index(end):
        refuse(f"--readme {path} has no '{begin}' ... '{end}' lines to write between")
    return text, begin, end


def update_readme(path, name, lines):
    text, begin, end = readme_text(path, name)
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(path + ".tmp", "w") as f:
        f.write(head + begin + "\n" + "\n".join(lines) + "\n" + end + tail)
    os.replace(path + ".tmp", path)


def generated(args, rank_counts):
    """How the JSON was made, under GENERATED: the code measured is the binary's commit (as it reports
    it, "+dirty" included); the checkout's is kept beside it."""
    return {"tool": "tools/memory_report.py", "command": args.command, "date": datetime.date.today().isoformat(),
            "commit": binary_commit(args.zerotrain) or "unknown", "checkout_commit": commit(),
            "config": os.path.relpath(os.path.abspath(args.config), ROOT), "ranks": rank_counts, "dtype": args.dtype,
            "sets": args.sets, "machine": {"hostname": platform.node(), "cpu": platform.processor() or
                                           platform.machine(), "cores": os.cpu_count()}}


def chart(args, results, png_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys = list(results.keys())
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(keys) + 3), 5))
    xs = range(len(keys))
    bottom = [0.0] * len(keys)
    for c in CATEGORIES:
        vals = [max(r[c] for r in results[k]["measured_peak_bytes"]) / 2**20 for k in keys]
        ax.bar(xs, vals, bottom=bottom, label=c)
        bottom = [b + v for b, v in zip(bottom, vals)]
    # The stack's top is the sum of category peaks; the run's real total peak is marked apart.
    ax.scatter(xs, [sum(results[k]["predicted_bytes"][c] for c in CATEGORIES) / 2**20 for k in keys], marker="_",
               s=400, color="black", label="predicted sum of category peaks", zorder=3)
    ax.scatter(xs, [total_peak(results[k]) / 2**20 for k in keys], marker="x", s=60, color="red",
               label="measured total peak (rank 0, one moment)", zorder=4)
    ax.set_xticks(list(xs), [f"N={n}\nstage {st}" for n, st in keys], fontsize=8)
    ax.set_ylabel("MiB per rank (largest rank)")
    ax.set_title(f"ZeRO memory per rank by category, each category's measured peak (bars) vs predicted\n"
                 f"({os.path.basename(args.config)}, {args.dtype})", fontsize=10)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)


def main(argv=None):
    ap = OneLineParser("memory_report", description=__doc__.split("\n\n")[0])
    ap.add_argument("--zerotrain", default=os.path.join(ROOT, "build", "zerotrain"),
                    help="the zerotrain binary that trains and measures (default: %(default)s)")
    ap.add_argument("--preset", choices=sorted(PRESETS), help="a named config, rank count and settings")
    ap.add_argument("--config", default=None, help="run config (default configs/tiny.json)")
    ap.add_argument("--ranks", default=None, help="rank counts, comma-separated (default 1,2,4)")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="KEY=VALUE for every run (repeatable)")
    ap.add_argument("--dtype", default="bf16", choices=["f32", "bf16"],
                    help="the runs' weight dtype, precision.param_dtype; bf16 keeps fp32 master weights "
                    "(default: %(default)s)")
    ap.add_argument("--name", default=None, help="output file names (default memory_report)")
    ap.add_argument("--out-dir", default=default_out(""),
                    help="where NAME.md, NAME.json and NAME.png go (default: %(default)s)")
    ap.add_argument("--readme", default=None, help="a Markdown file with this name's begin/end lines to fill")
    args = ap.parse_args(argv)
    # The command as given, for the Markdown to say how to make it again.
    args.command = shlex.join(["tools/memory_report.py"] + (sys.argv[1:] if argv is None else list(argv)))
    if args.preset and (args.config or args.ranks or args.name):
        # The preset names its files and README section for its own config and ranks.
        ap.error(f"--preset {args.preset} sets the config, ranks and name itself: give --config, --ranks and --name "
                 "without it")
    preset = PRESETS.get(args.preset, {})
    args.config = args.config or preset.get("config") or os.path.join(ROOT, "configs", "tiny.json")
    args.name = args.name or preset.get("name") or "memory_report"
    if os.sep in args.name or args.name in ("", ".", ".."):  # its files go in --out-dir, checked below
        refuse(f"--name {args.name!r}: a file name without a folder (NAME.md, .json and .png go in --out-dir)")
    args.sets = preset.get("sets", []) + args.sets
    try:
        given = args.ranks if args.ranks is not None else preset.get("ranks") or "1,2,4"
        rank_counts = [int(r) for r in given.split(",")]
    except ValueError:
        rank_counts = []
    if not rank_counts or min(rank_counts) < 1:
        refuse(f"--ranks takes positive rank counts like 1,2,4 (got {args.ranks!r})")
    if not (os.path.isfile(args.zerotrain) and os.access(args.zerotrain, os.X_OK)):
        refuse(f"--zerotrain {args.zerotrain}: not an executable file (build it: tools/build.sh)")
    if not os.path.isfile(args.config):
        refuse(f"--config {args.config}: " + ("a folder, not a config file" if os.path.isdir(args.config)
                                              else "no such file"))
    check_config(args, rank_counts)  # before minutes of runs, not after; so are the next two
    check_out_dir("memory_report", args.out_dir)
    if args.readme:
        readme_text(args.readme, args.name)
    work = tempfile.mkdtemp(prefix="zt_memreport_")
    results = {}
    try:
        for n in rank_counts:
            for st in range(4):
                rec = run(args, n, st, work)
                results[(n, st)] = rec
                print(f"N={n} stage {st}: measured model states {mib(largest(rec, CATEGORIES[:4]))} MiB on the "
                      f"largest rank, total peak {mib(total_peak(rec))} MiB on rank 0", flush=True)
    finally:  # the runs' directories hold each run's final weights (GPT-2 124M: 0.5 GB a run)
        shutil.rmtree(work, ignore_errors=True)

    os.makedirs(args.out_dir, exist_ok=True)
    md_path = os.path.join(args.out_dir, f"{args.name}.md")
    with open(md_path, "w") as f:
        f.write("\n".join(full_table(args, results)) + "\n")
    json_path = os.path.join(args.out_dir, f"{args.name}.json")
    with open(json_path, "w") as f:
        runs = {f"N{n}_stage{st}": rec for (n, st), rec in results.items()}
        json.dump({GENERATED: generated(args, rank_counts), **runs}, f, indent=1)
    png_path = os.path.join(args.out_dir, f"{args.name}.png")
    chart(args, results, png_path)
    if args.readme:
        update_readme(args.readme, args.name, readme_section(args, results, f"{args.name}.png"))
    print(f"memory_report: wrote {md_path}, {json_path}, {png_path}"
          + (f", and its table into {args.readme}" if args.readme else ""))


if __name__ == "__main__":
    sys.exit(run_main("memory_report", main))
