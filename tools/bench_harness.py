"""The harness both GPU benchmarks share (tools/bench_gpu.py, tools/bench_llama_gpu.py): engines run
in interleaved rounds (every engine once a round, the row's figure the median over rounds of each
round's median step), each started just before its first block, the GPU's state beside every block,
a time limit that ends on whole rounds and bounds every engine's start and block (a compile that
outlasts it is a failed row, not a killed benchmark); the shared random llm.c token files; the results table and
the per-op profile summary. An engine has start(ctx), run(ctx, warmup, steps, profile=False) ->
{"step_ms": [...], "losses": [...]}, stop(), a name and a label.
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_state import GpuSampler, gpu_state  # noqa: E402
from result_paths import whole_number_at_least  # noqa: E402

# MFU's denominator: dense bf16 tensor-core FLOP/s by card, from NVIDIA's data sheets (their
# "with sparsity" figures halved), matched against nvidia-smi's name in this order: the PCIe and NVL
# cards run at lower clocks and power than the SXM ones of the same chip.
PEAK_BF16_FLOPS_BY_NAME = (("H100 PCIe", 756e12), ("H800 PCIe", 756e12), ("H100 NVL", 835e12), ("H200 NVL", 835e12), ("GH200", 989e12),
                           ("H100", 989e12), ("H200", 989e12), ("H800", 989e12), ("A100", 312e12))


def peak_bf16_flops(device_name, override_tflops=None):
    """(FLOP/s, where the figure comes from) for MFU: --peak-tflops where given, else the card's
    data-sheet figure by its name; (None, why) for a card not in the table (no MFU is claimed)."""
    if override_tflops is not None:
        return override_tflops * 1e12, "--peak-tflops"
    for key, flops in PEAK_BF16_FLOPS_BY_NAME:
        if key.lower() in device_name.lower():
            return flops, f"data sheet, dense bf16 ({key})"
    return None, f"no dense bf16 peak known for {device_name!r} (give --peak-tflops)"


LLMC_MAGIC, LLMC_VERSION = 20240520, 1


class EngineError(Exception):
    pass


def write_llmc_tokens(path, tokens, magic=LLMC_MAGIC, version=LLMC_VERSION, dtype=np.uint16):
    """An llm.c token file: GPT-2's kind by default (uint16), Llama 3's with its magic and uint32."""
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = magic, version, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype(dtype).tobytes())


def device_facts():
    smi = shutil.which("nvidia-smi")
    p = smi and subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                               capture_output=True, text=True)
    if not p or p.returncode != 0 or not p.stdout.strip():
        sys.exit(f"{os.path.splitext(os.path.basename(sys.argv[0]))[0]}: no NVIDIA GPU here (nvidia-smi found none); "
                 "this benchmark needs one")
    name, driver = [s.strip() for s in p.stdout.strip().splitlines()[0].split(",")]
    return name, driver


def process_tree(root):
    """root's pid and every descendant's, from /proc (a launcher's ranks, whatever session they are in)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def stop_tree(proc):
    """Stops proc and everything it started: every process group in its tree (taken before any signal,
    as the dead launcher's children move to init; torchrun starts each worker in a session of its
    own), SIGTERM, then SIGKILL 3 s later; within gpu_session.sh's 10 s between its own two."""
    groups = set()
    for pid in process_tree(proc.pid):
        try:
            groups.add(os.getpgid(pid))
        except ProcessLookupError:
            pass
    groups.discard(os.getpgrp())  # never this process's own
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for group in groups:
            try:
                os.killpg(group, sig)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=3)
            if sig == signal.SIGKILL:
                break
        except subprocess.TimeoutExpired:
            continue


def run_group(cmd, timeout, cwd=None):
    """subprocess.run(cmd, capture_output=True, text=True) in a process group of its own: past
    `timeout`, or on any exception here (SIGTERM from gpu_session.sh's limit, made SystemExit by
    exit_on_sigterm), everything it started is stopped (stop_tree), so a launcher's ranks (mpirun's,
    torchrun's) do not outlive it holding a GPU; then the exception goes on (TimeoutExpired past
    the time)."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException:
            stop_tree(proc)
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def add_run_arguments(ap, steps=15, warmup=3):
    """The options every GPU benchmark takes: rounds, steps, time limit, output, MFU's peak, and the
    hidden ones its CPU test drives it with (zerotrain's --set values, the PyTorch worker's flags, a
    device name)."""
    ap.add_argument("--rounds", type=whole_number_at_least(1), default=3)
    ap.add_argument("--steps", type=whole_number_at_least(1), default=steps)
    ap.add_argument("--warmup", type=whole_number_at_least(0), default=warmup)
    ap.add_argument("--time-limit", type=float, default=None,
                    help="seconds: start another round only where the last one fits (a whole table in a budget)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--peak-tflops", type=float, default=None,
                    help="MFU's denominator, dense bf16 TFLOP/s, for a card the table does not name")
    ap.add_argument("--zerotrain-set", dest="zerotrain_sets", action="append", default=[], help=argparse.SUPPRESS)
    ap.add_argument("--torch-arg", dest="torch_args", action="append", default=[], help=argparse.SUPPRESS)
    ap.add_argument("--fake-device", default=None, help=argparse.SUPPRESS)


def exit_on_sigterm():
    """SIGTERM (gpu_session.sh's per-step limit) as SystemExit(143), so that the cleanups on the way
    out run: run_group's stop of a launcher's ranks, the PyTorch workers' stop."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def visible_gpu_count():
    """The GPUs CUDA shows this process: nvidia-smi's list (which ignores CUDA_VISIBLE_DEVICES), cut
    to CUDA_VISIBLE_DEVICES' entries where it is set; 0 without nvidia-smi."""
    smi = shutil.which("nvidia-smi")
    p = smi and subprocess.run([smi, "-L"], capture_output=True, text=True)
    count = sum(line.startswith("GPU ") for line in p.stdout.splitlines()) if p and p.returncode == 0 else 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        count = min(count, len([d for d in visible.split(",") if d.strip()]))
    return count


def top_ops_lines(profile, engine, n=12):
    """An op_profile.json's n most expensive ops, the rest summed, and the time outside the ops."""
    lines = [f"where the time goes in {engine} ({profile['profiled_steps']} profiled steps after "
             f"{profile.get('warmup_steps_excluded', 0)} warm-up; {profile.get('timing', '')}; "
             f"{profile['step_ms_per_step']:.1f} ms/step):",
             f"  {'op':32s} {'calls/step':>10s} {'ms/step':>9s} {'share':>7s}"]
    for op in profile["ops"][:n]:
        lines.append(f"  {op['op']:32s} {op['calls_per_step']:10.1f} {op['ms_per_step']:9.3f} {100 * op['share']:6.1f}%")
    rest = profile["ops"][n:]
    if rest:
        label = f"({len(rest)} more ops)"
        lines.append(f"  {label:32s} {'':10s} {sum(o['ms_per_step'] for o in rest):9.3f} "
                     f"{100 * sum(o['share'] for o in rest):6.1f}%")
    lines.append(f"  {'(outside the ops)':32s} {'':10s} {profile['outside_ops_ms_per_step']:9.3f} "
                 f"{100 * profile['outside_ops_share']:6.1f}%")
    comm = profile.get("communication")
    if comm:
        lines.append(f"  communication in flight: {comm['busy_ms_per_step']:.3f} ms/step, "
                     f"{comm['overlapped_ms_per_step']:.3f} overlapped with compute, "
                     f"{comm['exposed_ms_per_step']:.3f} exposed")
    choices = profile.get("kernel_choices")
    if choices:
        lines.append(f"  kernels chosen by timing: {choices.get('gemm_configurations', 0)} product configurations "
                     f"searched ({choices.get('timed_slice_searches', 0)} on a slice); bias gradients in the "
                     f"epilogue for {choices.get('bias_grad_configurations_epilogue_faster', 0)} of "
                     f"{choices.get('bias_grad_configurations_timed', 0)} timed configurations")
        searches = choices.get("gemm_searches", [])
        if searches:
            lines.append(f"  product searches: {len(searches)}, "
                         f"{choices.get('gemm_searches_kept_other_than_first', 0)} kept another than the heuristic's "
                         f"first; one call of each {choices.get('gemm_searches_first_ms', 0.0):.3f} ms with the "
                         f"first, {choices.get('gemm_searches_kept_ms', 0.0):.3f} with the kept")
        for c in choices.get("norm_backward_choices", []):
            lines.append(f"  {c['norm']} backward [{c['rows']}, {c['cols']}] {c['activations']}: {c['kernel']}")
    device = profile.get("device_memory")
    if device:
        gib = 1024 ** 3
        lines.append(f"  device memory: {device['allocator_reserved_bytes'] / gib:.2f} GiB held by zerotrain's "
                     f"allocator (peak {device['allocator_peak_reserved_bytes'] / gib:.2f}), "
                     f"{device['outside_allocator_bytes'] / gib:.2f} GiB outside it (context, libraries, NCCL), "
                     f"{device['free_bytes'] / gib:.2f} GiB free of {device['total_bytes'] / gib:.2f}")
    return lines


def summarise(row, tokens_per_step, flops_tok, peak_flops):
    """The row's figure: the median over rounds of each round's median step (its MFU None where the
    card's peak is unknown); beside it the same from the engine's own clock, where it has one."""
    medians = [r["median_ms"] for r in row["rounds"] if "median_ms" in r]
    if not medians:
        return
    ms = statistics.median(medians)
    tok_s = tokens_per_step / (ms / 1e3)
    row.update(ms_per_step=ms, tokens_per_s=tok_s, mfu=tok_s * flops_tok / peak_flops if peak_flops else None,
               rounds_measured=len(medians))
    own = [r["own_median_ms"] for r in row["rounds"] if "own_median_ms" in r]
    if own:
        row["own_clock_ms_per_step"] = statistics.median(own)


def same_round_ratio(numerator, denominator):
    """tokens/s of `numerator`'s row over `denominator`'s, round by round (each the ratio of two blocks
    run back to back), over the rounds both measured: median, min, max and how many. The rows'
    medians can come from different rounds; a jittery engine's verdict could turn on which."""
    theirs = {r["round"]: r["median_ms"] for r in denominator["rounds"] if "median_ms" in r}
    ratios = sorted(theirs[r["round"]] / r["median_ms"] for r in numerator["rounds"]
                    if "median_ms" in r and r["round"] in theirs)
    if not ratios:
        return None
    return {"median": statistics.median(ratios), "min": ratios[0], "max": ratios[-1], "rounds": len(ratios)}


def print_ratio(key, value, target=None):
    """One ratio line: a number, a same-round summary, or another fact (a row's name, reasons)."""
    suffix = f" (target {target})" if target is not None else ""
    if isinstance(value, float):
        print(f"{key}: {value:.3f}{suffix}")
    elif isinstance(value, dict) and "median" in value:
        print(f"{key}: {value['median']:.3f} (from {value['min']:.3f} to {value['max']:.3f} over "
              f"{value['rounds']} round{'s' if value['rounds'] != 1 else ''})")
    else:
        print(f"{key}: {value}")


def print_rows(rows, width=56):
    """One line per engine: ms/step, tokens/s and MFU, or why it failed."""
    print(f"{'engine':{width}s} {'ms/step':>9s} {'tokens/s':>10s} {'MFU':>6s}")
    for r in rows:
        if "tokens_per_s" not in r:
            print(f"{r['label']:{width}s} {'FAILED':>9s}  {r.get('error', '')[:80]}")
            continue
        mfu = f"{100 * r['mfu']:5.1f}%" if r.get("mfu") is not None else f"{'n/a':>6s}"
        print(f"{r['label']:{width}s} {r['ms_per_step']:9.1f} {r['tokens_per_s']:10.0f} {mfu}")


def start(engine, row, ctx):
    """Starts an engine (a PyTorch worker compiles here); False, with the row's error, if it fails."""
    t0 = time.perf_counter()
    try:
        engine.start(ctx)
    except EngineError as e:
        row["error"] = f"start: {e}"
        print(f"{engine.label}: FAILED to start: {str(e)[-300:]}", file=sys.stderr, flush=True)
        return False
    row["start_s"] = time.perf_counter() - t0
    if getattr(engine, "facts", None):
        row["facts"] = engine.facts
        cache = engine.facts.get("compile_cache")
        if cache:  # whether its compile was served by an earlier lease's cache (tools/torch_compile_cache.py)
            print(f"{engine.label}: started in {row['start_s']:.0f} s; compile cache: AOTAutograd "
                  f"{cache['aotautograd_hit']} hits, {cache['aotautograd_miss']} misses; FX graph "
                  f"{cache['fxgraph_hit']} hits, {cache['fxgraph_miss']} misses", flush=True)
    return True


def profile_rows(pairs, ctx, began, steps, save):
    """The per-op profiles of (engine, row) pairs, one separate profiled run each of `steps` timed
    steps into row["op_profile"] (row["op_profile_error"] where it fails), for rows measured in
    round 1; none where round 1 took more than three quarters of ctx.args.time_limit (from `began`).
    `save` after each."""
    limit = ctx.args.time_limit
    if limit is not None and time.monotonic() - began > 0.75 * limit:
        print("no per-op profile runs: round 1 left too little of the time limit", flush=True)
        return
    for engine, row in pairs:
        if "tokens_per_s" not in row:
            continue
        try:
            row["op_profile"] = engine.run(ctx, ctx.args.warmup, steps, profile=True).get("op_profile")
        except (EngineError, subprocess.TimeoutExpired) as e:
            row["op_profile_error"] = str(e)[-1000:]
        save()


def interleave(chosen, rows, ctx, tokens_per_step, flops_tok, save, after_first_round=None):
    """Runs ctx.args.rounds rounds of every engine in turn (each round starting one engine later than
    the one before), each block's GPU state and seconds beside it, each
    engine started just before its first block (so one that compiles for minutes delays only the
    engines after it); `save` after every block. With ctx.args.time_limit (seconds), a round starts
    only when the one before it would fit in the time left, so a session's budget ends on a whole
    table rather than a killed round, and ctx.deadline bounds every start and block inside it (an
    engine that would pass it is stopped and its row says so). `after_first_round` runs once round 1 is in (the per-op
    profiles: a budget cut short later still has them). Returns the rounds run."""
    args = ctx.args
    started = [False] * len(chosen)
    begin = time.monotonic()
    limit = getattr(args, "time_limit", None)
    ctx.deadline = None if limit is None else begin + limit
    rounds_run = 0
    round_blocks_s = []  # each whole round's blocks, in seconds: the next round's cost
    try:
        for rnd in range(args.rounds):
            if rnd > 0 and limit is not None:
                # The blocks alone: the engines' starts (a compile of minutes) and the profile runs
                # came once, and counting them in cut a 200 s Llama call to one round of 35 s.
                next_round = max(round_blocks_s)
                if time.monotonic() - begin + next_round > limit:
                    print(f"stopping after {rnd} of {args.rounds} rounds: another ({next_round:.0f} s) would pass "
                          f"the {limit:.0f} s time limit", flush=True)
                    break
            round_blocks_s.append(0.0)
            # Each round starts one engine later than the one before, so no engine always runs on a
            # rested GPU or always after the hottest one (the order is each row's rounds' "position").
            order = [(i + rnd) % len(chosen) for i in range(len(chosen))]
            for position, i in enumerate(order):
                engine, row = chosen[i], rows[i]
                if "error" in row and not row["rounds"]:
                    continue
                if ctx.seconds_left(1) <= 0:
                    print(f"stopping in round {rnd + 1}: the {limit:.0f} s time limit has passed", flush=True)
                    for r in rows:
                        if not r["rounds"]:
                            r.setdefault("error", "not reached within the time limit")
                    return rnd  # the round before is the last whole one
                if not started[i]:
                    started[i] = True
                    if not start(engine, row, ctx):
                        save()
                        continue
                entry = {"round": rnd, "position": position, "gpu_state_before": gpu_state()}
                block_began = time.monotonic()
                sampler = GpuSampler()
                try:
                    with sampler:
                        r = engine.run(ctx, args.warmup, args.steps)
                    entry.update(step_ms=r["step_ms"], median_ms=statistics.median(r["step_ms"]),
                                 final_loss=r["losses"][-1] if r.get("losses") else None)
                    if getattr(engine, "clock", None):  # how the block's steps were timed
                        entry["clock"] = row["clock"] = engine.clock
                    if r.get("own_step_ms"):  # the engine's own clock, beside the step-to-step one
                        entry.update(own_step_ms=r["own_step_ms"], own_median_ms=statistics.median(r["own_step_ms"]))
                    if r.get("attention"):  # the kernels the engine says it ran
                        entry["attention"] = r["attention"]
                    if r.get("memory"):  # each rank's device memory, where the engine reports it
                        entry["memory"] = r["memory"]
                    if r.get("facts"):  # a one-shot engine's facts come with its blocks
                        row["facts"] = r["facts"]
                except (EngineError, subprocess.TimeoutExpired) as e:
                    entry["error"] = str(e)[-2000:]
                    row.setdefault("error", f"round {rnd}: {str(e)[-2000:]}")
                entry["block_s"] = time.monotonic() - block_began
                entry["gpu_during"] = sampler.summary
                round_blocks_s[-1] += entry["block_s"]
                entry["gpu_state_after"] = gpu_state()
                row["rounds"].append(entry)
                summarise(row, tokens_per_step, flops_tok, ctx.peak_flops)
                print(f"round {rnd + 1}/{args.rounds} {engine.label}: " +
                      (f"{entry['median_ms']:.1f} ms/step" if "median_ms" in entry else "FAILED"), flush=True)
                save()
            rounds_run = rnd + 1
            if rnd == 0 and after_first_round is not None:
                after_first_round()
    finally:
        for engine in chosen:
            engine.stop()
    return rounds_run


class Context:
    def __init__(self, args, work, data_dir, peak_flops=None):
        self.args, self.work, self.data_dir = args, work, data_dir
        self.deadline = None  # time.monotonic() by which every engine must be done (interleave sets it)
        self.peak_flops = peak_flops  # MFU's denominator (peak_bf16_flops), None where unknown

    def seconds_left(self, cap):
        """How long an engine may take now: `cap`, or less where the time limit comes sooner."""
        return cap if self.deadline is None else min(cap, self.deadline - time.monotonic())

    @staticmethod
    def make(args, work, vocab, peak_flops, magic=LLMC_MAGIC, version=LLMC_VERSION, dtype=np.uint16):
        """In `work`: random train and val token files of `vocab` (the engines' shared data) and a
        folder for the runs."""
        data_dir, runs = os.path.join(work, "data"), os.path.join(work, "runs")
        os.makedirs(data_dir)
        os.makedirs(runs)
        rng = np.random.default_rng(0)
        for name, n in (("train.bin", 4_000_000), ("val.bin", 200_000)):
            write_llmc_tokens(os.path.join(data_dir, name), rng.integers(0, vocab, n), magic, version, dtype)
        return Context(args, runs, data_dir, peak_flops)
