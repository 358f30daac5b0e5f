#!/usr/bin/env python3
"""ZeRO stage benchmark on CPU ranks: trains the same config at stages 0-3 on 2 and 4 ranks
(processes under mpirun, one thread each) and prints ms/step per stage, its ratio to stage 0
(target: stage 3 within 1.25x of stage 0 at 2 ranks), and the elements each rank sent per step
beside the ZeRO paper's volumes (2 Psi for stages 0-2, 3 Psi for stage 3, as ring collectives
move them: the measured count divided by (N-1)/N). Each configuration runs twice, with the
overlapped schedule (zero.overlap_comm = true, the default) and with every collective waited at
once (false), interleaved, and reports both and the time each rank spent blocked waiting for
communication (comm_wait_ms: what computation did not hide). The repeats are rounds, each running
every configuration once, and a ratio is the median of each round's (side by side in time). Writes
OUT_DIR/zero_bench.{json,md} (--out-dir, default runs/results; --out-dir docs/results updates the
committed ones).

With --deterministic it measures instead what train.deterministic costs (docs/zero_memory.md, "The
same bits at any rank count"): one global batch of 4 micro-batches at N = 1, 2 and 4, stages 0 and
3 (and 1-2 at N = 2), each run with the default reductions and in deterministic mode, interleaved:
ms/step, the ratio, bytes sent per step and the predicted gradient and comm-buffer peaks of each,
and whether the deterministic runs' final weights are bitwise equal at every N. Writes
OUT_DIR/any_rank_count_cpu.{json,md}.

These machines have 2 cores: at 4 ranks the processes share them, so 4-rank times measure the
oversubscribed machine, not scaling.

usage: /usr/bin/python3 tools/bench_zero.py [--zerotrain build/zerotrain] [--config configs/tiny.json]
                                            [--steps 12] [--warmup 2] [--deterministic]
"""
import atexit
import datetime
import hashlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from mpirun_command import MPIRUN  # noqa: E402
from repo_commit import binary_commit, head_commit  # noqa: E402
from result_paths import OneLineParser, check_out_dir, check_program, default_out, run_main  # noqa: E402


def resolved_model(binary, config):
    """The config as zerotrain resolves it on one rank (memory --json): its parameter count and its
    micro-batch and sequence length, defaults and derived values included."""
    try:
        p = subprocess.run([binary, "memory", "--config", config, "--ranks", "1", "--json"], capture_output=True,
                           text=True)
    except OSError as e:
        sys.exit(f"bench_zero: --zerotrain {binary}: {e.strerror}")
    if p.returncode != 0:
        sys.exit(f"bench_zero: {p.stderr.strip()}")
    return json.loads(p.stdout)


def run(args, ranks, stage, overlap, work, extra=()):
    run_dir = os.path.join(work, f"n{ranks}_s{stage}_{'overlap' if overlap else 'sync'}_{len(os.listdir(work))}")
    cmd = MPIRUN + ["-np", str(ranks), args.zerotrain, "train", "--config", args.config, "--run-dir", run_dir,
                    "--set", f"zero.stage={stage}", "--set", f"zero.overlap_comm={'true' if overlap else 'false'}",
                    *[a for kv in extra for a in ("--set", kv)],
                    "--set", f"train.max_steps={args.steps}", "--set",
                    "train.num_threads=1", "--set", "log.sample_tokens=0", "--set", "train.eval_batches=1",
                    "--set", "log.progress=plain", "--set", "log.every_steps=1000"]
    what = f"{ranks} rank(s), stage {stage} {'overlapped' if overlap else 'synchronous'}"
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        sys.exit(f"bench_zero: {what}: no end within 900 s (its run directory: {run_dir})")
    if p.returncode != 0:  # the engine's own line (mpirun's banner after it says nothing more)
        lines = [line for line in p.stderr.splitlines() if line.strip()]
        said = next((line for line in lines if line.startswith("zerotrain: error")), lines[-1] if lines else "")
        sys.exit(f"bench_zero: {what}: exit {p.returncode}: {said.strip()}")
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        records = [json.loads(l) for l in f]
    steps = [r for r in records if r.get("type") == "train"]
    memory = next(r for r in records if r.get("type") == "memory")
    timed = steps[args.warmup:]
    with open(os.path.join(run_dir, "final.safetensors"), "rb") as f:
        header = int.from_bytes(f.read(8), "little")
        f.seek(8 + header)
        weights = hashlib.sha256(f.read()).hexdigest()  # the tensors, not the header
    return {"ms_per_step": statistics.median(s["step_ms"] for s in timed),
            "step_ms": [s["step_ms"] for s in steps],
            "comm_wait_ms": statistics.median(s["comm_wait_ms"] for s in timed),
            "elements_sent_per_step": statistics.median(s["comm_elements_sent"] for s in timed),
            "bytes_sent_per_step": statistics.median(s["comm_bytes_sent"] for s in timed),
            "predicted_gradients": memory["predicted_bytes"]["gradients"],
            "predicted_comm_buffers": memory["predicted_bytes"]["comm_buffers"],
            "final_loss": steps[-1]["loss"], "weights_hash": weights}


def per_round_ratios(ms_by_stage):
    """[stage][round] ms/step -> [stage][round] that round's ms over stage 0's in the same round."""
    return [[ms / base for ms, base in zip(stage, ms_by_stage[0])] for stage in ms_by_stage]


def median_run(runs):
    """The run whose ms/step is nearest the median of the repeats (drops the ones a neighbour disturbed)."""
    return min(runs, key=lambda x: abs(x["ms_per_step"] - statistics.median(y["ms_per_step"] for y in runs)))


def write_result(args, name, lines, doc):
    """Prints the table and writes OUT_DIR/NAME.md and NAME.json (doc, dated)."""
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, f"{name}.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out_dir, f"{name}.json"), "w") as f:
        json.dump({"date": datetime.datetime.now().isoformat(timespec="seconds"), **doc}, f, indent=1)


def deterministic_cost(args, resolved):
    """What train.deterministic costs against the default reductions, and its bits across N."""
    psi = resolved["params"]
    work = tempfile.mkdtemp(prefix="zt_zerobench_det_")
    atexit.register(shutil.rmtree, work, True)  # every run's final weights (GPT-2 124M: 0.5 GB a run)
    # 4 micro-batches a step, of the config's micro-batch and length as zerotrain resolves them (its
    # defaults: micro_batch 4, seq_len the model's context; this tool's own guesses named another batch).
    tokens = 4 * resolved["micro_batch"] * resolved["seq_len"]
    batch = (f"train.global_batch_tokens={tokens}",)
    results = {}
    for n, stages in ((1, (0, 3)), (2, (0, 1, 2, 3)), (4, (0, 3))):
        for st in stages:
            pairs = [(run(args, n, st, True, work, batch + ("train.deterministic=false",)),
                      run(args, n, st, True, work, batch + ("train.deterministic=true",)))
                     for _ in range(args.repeats)]
            default, det = (median_run(runs) for runs in zip(*pairs))
            results[f"N{n}_stage{st}"] = {"ranks": n, "stage": st, "default": default, "deterministic": det,
                                          "cost": det["ms_per_step"] / default["ms_per_step"]}
    same = len({r["deterministic"]["weights_hash"] for r in results.values()}) == 1
    for r in results.values():
        for k in ("default", "deterministic"):
            r[k].pop("weights_hash")
    commit = head_commit(env=False) or "unknown"
    lines = [f"# What train.deterministic costs: the same bits at any rank count ({os.path.basename(args.config)}, "
             f"Psi = {psi:,})", "",
             f"`tools/bench_zero.py --deterministic`, {datetime.date.today()}, commit {commit[:10]}; a global batch of "
             f"{tokens} tokens (4 micro-batches: grad_accum 4/N), median of steps {args.warmup + 1}-{args.steps}, the "
             f"median run of {args.repeats}, default and deterministic runs interleaved; one compute thread per rank "
             "on a 2-core machine (4 ranks oversubscribe it: read the bytes there, not the speed). Gradients and "
             "comm buffers: the predicted per-rank peaks (equal to the measured ones).", "",
             "| ranks | stage | default ms/step | deterministic ms/step | cost | bytes sent/step (default -> det.) | "
             "gradients peak | comm buffers peak |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results.values():
        d, x = r["default"], r["deterministic"]
        lines.append(f"| {r['ranks']} | {r['stage']} | {d['ms_per_step']:.1f} | {x['ms_per_step']:.1f} | "
                     f"{r['cost']:.2f}x | {d['bytes_sent_per_step']:,.0f} -> {x['bytes_sent_per_step']:,.0f} | "
                     f"{d['predicted_gradients'] / 1024:,.0f} -> {x['predicted_gradients'] / 1024:,.0f} KiB | "
                     f"{d['predicted_comm_buffers'] / 1024:,.0f} -> {x['predicted_comm_buffers'] / 1024:,.0f} KiB |")
    lines += ["", f"Deterministic runs' final weights bitwise equal at every rank count and stage above: "
                  f"{'yes' if same else 'NO'} (final loss {next(iter(results.values()))['deterministic']['final_loss']})."]
    write_result(args, "any_rank_count_cpu", lines,
                 {"commit": commit, "config": args.config, "psi": psi, "global_batch_tokens": tokens,
                  "steps": args.steps, "warmup": args.warmup, "results": results,
                  "bitwise_equal_across_ranks_and_stages": same})


def main():
    # SIGTERM as an exit, so that atexit's cleanups run (its work folder holds every run's final
    # weights, 0.5 GB a run of GPT-2 124M).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = OneLineParser("bench_zero", description=__doc__.split("\n\n")[0])
    ap.add_argument("--zerotrain", default=os.path.join(ROOT, "build", "zerotrain"))
    ap.add_argument("--config", default=os.path.join(ROOT, "configs", "tiny.json"))
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="rounds, each running every configuration once (the median run's figures, the median of each round's "
                         "ratio; default 3)")
    ap.add_argument("--out-dir", default=default_out(""))
    ap.add_argument("--deterministic", action="store_true",
                    help="measure instead what train.deterministic costs: one global batch of 4 micro-batches at "
                    "1, 2 and 4 ranks, stages 0 and 3 (and 1-2 at 2 ranks), each with the default and the "
                    "deterministic reductions, and whether the deterministic runs' final weights are bitwise "
                    "equal at every rank count; writes OUT_DIR/any_rank_count_cpu.{json,md}")
    args = ap.parse_args()
    if args.steps < 1 or args.repeats < 1 or not 0 <= args.warmup < args.steps:
        ap.error(f"need --steps >= 1, --repeats >= 1 and 0 <= --warmup < --steps (got --steps {args.steps} "
                 f"--warmup {args.warmup} --repeats {args.repeats})")
    check_program("bench_zero", args.zerotrain)
    if not os.path.isfile(args.config):
        ap.error(f"--config {args.config}: no such file")
    check_out_dir("bench_zero", args.out_dir)
    resolved = resolved_model(args.zerotrain, args.config)
    psi = resolved["params"]
    if args.deterministic:
        return deterministic_cost(args, resolved)
    work = tempfile.mkdtemp(prefix="zt_zerobench_")
    atexit.register(shutil.rmtree, work, True)  # every run's final weights
    # Round by round, every configuration once a round (stage 0 to 3, synchronous then overlapped),
    # so a ratio's two runs are neighbours in time: the ratios are each round's, their median kept
    # (the median runs of whole blocks of repeats divided runs minutes apart on a drifting machine).
    pairs = {(n, st): [] for n in (2, 4) for st in range(4)}
    for _ in range(args.repeats):
        for n, st in pairs:
            pairs[(n, st)].append((run(args, n, st, False, work), run(args, n, st, True, work)))
    results = {}
    for (n, st), runs in pairs.items():
        sync, r = (median_run(list(side)) for side in zip(*runs))
        results[f"N{n}_stage{st}"] = r
        r["ranks"], r["stage"] = n, st
        r["sync"] = sync
        r["volume_psi"] = r["elements_sent_per_step"] / psi / ((n - 1) / n)
        r["paper_volume_psi"] = 3.0 if st == 3 else 2.0
        r["overlap_speedup"] = statistics.median(s["ms_per_step"] / o["ms_per_step"] for s, o in runs)
    for n in (2, 4):
        overlapped = [[o["ms_per_step"] for _, o in pairs[(n, st)]] for st in range(4)]
        for st, ratios in enumerate(per_round_ratios(overlapped)):
            results[f"N{n}_stage{st}"]["ratio_to_stage0_rounds"] = ratios
            results[f"N{n}_stage{st}"]["ratio_to_stage0"] = statistics.median(ratios)
    commit = binary_commit(args.zerotrain) or head_commit(env=False) or "unknown"
    target = results["N2_stage3"]["ratio_to_stage0"] <= 1.25
    lines = [f"# ZeRO stages on CPU ranks ({os.path.basename(args.config)}, Psi = {psi:,} parameters)", "",
             f"`tools/bench_zero.py`, {datetime.date.today()}, commit {commit[:10]}; median of steps "
             f"{args.warmup + 1}-{args.steps}, the median run of {args.repeats} rounds, each running every row once "
             f"(vs stage 0: the median of each round's ratio); one compute thread per rank on {os.cpu_count()} cores. "
             "'overlapped' is the default schedule (collectives progressed by the "
             "communication thread while the rank computes), 'synchronous' waits each collective at once; "
             "'blocked' is the time per step a rank spent waiting for communication. At 4 ranks eight "
             "threads share two cores and identical runs differ by up to 1.8x in ms/step: read the volumes and "
             "the blocked time there, not the speed.", "",
             "| ranks | stage | overlapped ms/step | vs stage 0 | blocked | synchronous ms/step | blocked | "
             "sent per rank per step | volume (/ (N-1)/N) | paper |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for key, r in results.items():
        lines.append(f"| {r['ranks']} | {r['stage']} | {r['ms_per_step']:.1f} | {r['ratio_to_stage0']:.2f}x | "
                     f"{r['comm_wait_ms']:.1f} ms | {r['sync']['ms_per_step']:.1f} | {r['sync']['comm_wait_ms']:.1f} ms | "
                     f"{r['elements_sent_per_step']:,.0f} elements | {r['volume_psi']:.2f} Psi | "
                     f"{r['paper_volume_psi']:.0f} Psi |")
    lines += ["", f"Target: stage 3 within 1.25x of stage 0 at 2 ranks: "
                  f"{results['N2_stage3']['ratio_to_stage0']:.2f}x, {'PASS' if target else 'FAIL'}."]
    write_result(args, "zero_bench", lines,
                 {"commit": commit, "config": args.config, "psi": psi, "steps": args.steps, "warmup": args.warmup,
                  "repeats": args.repeats, "machine": platform.node(), "cores": os.cpu_count(), "results": results,
                  "target_stage3_within_1_25x_at_2_ranks": target})


if __name__ == "__main__":
    sys.exit(run_main("bench_zero", main))
