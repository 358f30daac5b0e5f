#!/usr/bin/env python3
"""GPU throughput against the strongest anchors, in one invocation: GPT-2 124M (12 layers, 12 heads,
768 wide, vocab 50257 padded to 50304, T = 1024, B = 16, bf16) trained on one GPU by

  zerotrain                  stage 0, and stages 1-3 with their collectives on (zero.solo_path =
                             false: one-rank NCCL gathers, frees and reduce-scatters as on N ranks);
  pytorch                    torch.compile with its default settings, bf16 autocast, fused AdamW
                             (tools/bench_gpu_torch.py);
  pytorch-max-autotune-cudnn torch.compile(mode="max-autotune") with scaled_dot_product_attention
                             pinned to cuDNN's attention;
  llmc                       llm.c's train_gpt2cu (-e d12: GPT-2 124M from scratch; built into the
                             GPU pack by tools/gpu_pack.sh from ../shared/third_party/llm.c);

all on the same random token file (speed does not depend on the tokens). The engines run
interleaved, A B C A B C ... for --rounds rounds (each round: every engine's --warmup untimed and
--steps timed steps), so drift of clocks and temperature falls on all alike; an engine's figure is
the median over rounds of each round's median step. The PyTorch anchors are long-lived workers that
compile once (minutes under max-autotune) before the first round. GPU clocks, power and
temperature (nvidia-smi) are recorded before and after every block.

The JSON (--out, default runs/results/gpu_bench_<device>.json) is rewritten after the start-up and
every round ("complete": false until the end), so a call cut short keeps what was measured. It
carries every row's tokens/s and MFU, and the ratios the targets are stated in:
stage0_over_best_pytorch_tokens_per_s (>= 1.15), stage0_over_llmc_tokens_per_s (>= 1.0),
stage3_collectives_over_stage0_tokens_per_s (>= 0.95), MFU >= 50%.

Where the time goes: after the rounds, separate stage-0 and stage-3 runs with log.profile_ops (CUDA
events around every op; their op_profile.json goes into those rows); --no-profile skips them.

MFU = tokens/s x (6 N + 6 L C T) / peak, N the parameter count (wpe included, the tied head counted
once), peak the card's dense bf16 FLOP/s by its name (989 TFLOP/s for the H100 and H200 SXM, 756
for the H100 PCIe, 835 for the NVL cards: bench_harness.peak_bf16_flops; --peak-tflops for another),
the same formula for every engine.

Every engine is timed step to step, from one step's end to the next's, so nothing between steps
goes uncounted: zerotrain by metrics.jsonl's elapsed_s, the PyTorch workers by the host's clock
after each step's loss read, llm.c by its step lines' arrival (line-buffered by stdbuf). Each
block also keeps the engine's own figure (own_step_ms: zerotrain's step_ms, llm.c's CUDA events),
each row its median (own_clock_ms_per_step), and its clock.

usage: python3 tools/bench_gpu.py [--zerotrain build/zerotrain] [--llmc PATH/train_gpt2cu]
           [--engines NAME ...] [--rounds 3] [--steps 15] [--warmup 3] [--batch 16] [--out FILE]
           [--python python3] [--no-profile] [--peak-tflops T]
engines: zerotrain-s0 zerotrain-s1 zerotrain-s2 zerotrain-s3 zerotrain-s0-fp32-activations
         zerotrain-s0-flash zerotrain-s0-separate-gelu pytorch pytorch-max-autotune-cudnn llmc
"""
import argparse
import datetime
import functools
import json
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from gpu_state import gpu_state  # noqa: E402
from repo_commit import binary_commit, head_commit  # noqa: E402
from result_paths import check_out_file, default_out  # noqa: E402
from bench_harness import (Context, EngineError, add_run_arguments, device_facts, exit_on_sigterm,  # noqa: E402
                           interleave, peak_bf16_flops, print_ratio, print_rows, process_tree, profile_rows,
                           run_group, same_round_ratio, top_ops_lines)

PROFILED_STEPS = 5  # timed steps of the separate per-op profile runs (after the warm-up steps)
N_LAYER, N_HEAD, N_EMBD, T, VOCAB, VOCAB_PADDED = 12, 12, 768, 1024, 50257, 50304
# Stage 0 and the cheap anchors first, max-autotune (minutes of compilation before its first block)
# last: a call cut short keeps the headline ratios.
DEFAULT_ENGINES = ["zerotrain-s0", "pytorch", "llmc", "zerotrain-s3", "zerotrain-s1", "zerotrain-s2",
                   "pytorch-max-autotune-cudnn"]
TARGETS = {"stage0_over_best_pytorch_tokens_per_s": 1.15, "stage0_over_llmc_tokens_per_s": 1.0,
           "stage3_collectives_over_stage0_tokens_per_s": 0.95, "mfu": 0.5}


def flops_per_token():
    n = VOCAB_PADDED * N_EMBD + T * N_EMBD + N_LAYER * (12 * N_EMBD * N_EMBD + 13 * N_EMBD) + 2 * N_EMBD
    return n, 6 * n + 6 * N_LAYER * N_EMBD * T


class Zerotrain:
    """zerotrain on configs/gpt2_124m.json (bf16 parameters, activations and matmuls)."""

    clock = "step to step: metrics.jsonl's elapsed_s, record to record"

    def __init__(self, name, stage, activations="bf16", attention="auto", gelu_epilogue=None,
                 config="configs/gpt2_124m.json", seq_len=T, ranks=1):
        self.name, self.stage, self.activations = name, stage, activations
        self.attention, self.gelu_epilogue = attention, gelu_epilogue
        self.config, self.seq_len = config, seq_len
        # Several ranks (tools/bench_multi_gpu.py): one GPU each under ctx.args.mpirun, NCCL between
        # them, the micro-batch per GPU as on one.
        self.ranks = ranks
        self.collectives = stage > 0  # stages 1-3 keep their collectives at one rank
        parts = [f"zerotrain stage {stage}" + (f", {ranks} GPUs" if ranks > 1 else "")]
        if self.collectives:
            parts.append("collectives on")
        if activations != "bf16":
            parts.append(f"{activations} activations")
        if attention != "auto":
            parts.append(f"{attention} attention")
        if gelu_epilogue is False:
            parts.append("separate GELU")
        self.label = ", ".join(parts)

    def start(self, ctx):
        pass

    def stop(self):
        pass

    def global_batch_tokens(self, ctx):
        """One micro-batch a rank: B x T x ranks, with B and T as the harness's test may set them."""
        sets = ctx.args.zerotrain_sets
        return (int(sets.get("train.micro_batch", ctx.args.batch)) * int(sets.get("train.seq_len", self.seq_len)) *
                self.ranks)

    def command(self, ctx, run_dir, steps, profile=False):
        sets = {"device": "cuda", "zero.stage": self.stage, "precision.param_dtype": "bf16",
                "data.train_file": os.path.join(ctx.data_dir, "train.bin"),
                "data.val_file": os.path.join(ctx.data_dir, "val.bin"),
                "precision.matmul": "bf16", "precision.activations": self.activations,
                "precision.attention": self.attention,
                "train.micro_batch": ctx.args.batch, "train.seq_len": self.seq_len, "train.grad_accum": 1,
                "train.global_batch_tokens": self.global_batch_tokens(ctx), "train.max_steps": steps,
                "train.eval_every": 0, "train.eval_batches": 1, "train.activation_checkpointing": "none",
                "log.sample_tokens": 0, "log.every_steps": 1000, "log.progress": "plain",
                "checkpoint.at_end": "false", "log.final_weights": "false",
                "log.profile_ops": "true" if profile else "false",
                **ctx.args.zerotrain_sets}
        if self.collectives:
            sets["zero.solo_path"] = "false"
        if self.gelu_epilogue is not None:
            sets["precision.gelu_epilogue"] = "true" if self.gelu_epilogue else "false"
        launcher = shlex.split(ctx.args.mpirun) + ["-np", str(self.ranks)] if self.ranks > 1 else []
        cmd = launcher + [ctx.args.zerotrain, "train", "--config", os.path.join(ROOT, self.config), "--run-dir", run_dir]
        for k, v in sets.items():
            cmd += ["--set", f"{k}={v}"]
        return cmd

    def run(self, ctx, warmup, steps, profile=False):
        run_dir = os.path.join(ctx.work, f"{self.name}_{len(os.listdir(ctx.work))}")
        p = run_group(self.command(ctx, run_dir, warmup + steps, profile), timeout=max(ctx.seconds_left(1800), 0.1))
        if p.returncode != 0:
            raise EngineError(f"exit {p.returncode}: {p.stderr[-2000:]}")
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            logged = [json.loads(l) for l in f]
        records = [r for r in logged if r.get("type") == "train"]
        if len(records) != warmup + steps:  # a skipped step would move the warm-up's cut
            raise EngineError(f"{len(records)} step records for {warmup} warm-up and {steps} timed steps: "
                              f"{p.stdout[-1000:]}")
        # Step to step: each timed step from the record before it to its own (metrics.jsonl's
        # elapsed_s), so the host's work between steps counts as the other engines' clocks count it;
        # the engine's own step_ms (from the step's start) stays beside it.
        if any("elapsed_s" not in r for r in records):
            raise EngineError(f"{ctx.args.zerotrain} writes no elapsed_s in its step records: a build older than "
                              "this benchmark")
        ends = [0.0] + [r["elapsed_s"] for r in records]
        result = {"step_ms": [(ends[i + 1] - ends[i]) * 1e3 for i in range(warmup, len(records))],
                  "own_step_ms": [r["step_ms"] for r in records][warmup:], "losses": [r["loss"] for r in records]}
        memory = next((r for r in logged if r.get("type") == "memory"), None)  # every rank's peaks, the prediction
        if memory:
            result["memory"] = {"measured_peak_bytes": memory.get("measured_peak_bytes"),
                                "predicted_bytes": memory.get("predicted_bytes")}
        # The attention each block ran ("auto" falls back to the flash kernels, about 2x slower,
        # where cuDNN does not serve): the train header's line, kept with the block.
        attention = [l for l in p.stdout.splitlines() if l.startswith("attention: ")]
        if attention:
            result["attention"] = attention[0][len("attention: "):]
        profile_path = os.path.join(run_dir, "op_profile.json")
        if profile and os.path.exists(profile_path):
            with open(profile_path) as f:
                result["op_profile"] = json.load(f)
        return result


class Torch:
    """A long-lived tools/bench_gpu_torch.py worker: compiled once, then blocks of steps on request."""

    clock = "step to step: the host's clock, from one step's end (the loss read, a device sync) to the next's"

    def __init__(self, name, compile_mode, sdpa, script="bench_gpu_torch.py", label=None):
        self.name, self.compile_mode, self.sdpa, self.script = name, compile_mode, sdpa, script
        self.label = label or (f"pytorch (compile {compile_mode}, bf16 autocast, fused AdamW"
                               + (", SDPA on cuDNN)" if sdpa == "cudnn" else ")"))
        self.proc = None
        self.facts = {}

    def start(self, ctx):
        cmd = [ctx.args.python, os.path.join(ROOT, "tools", self.script), "--serve", "--batch",
               str(ctx.args.batch), "--compile", self.compile_mode, "--sdpa", self.sdpa, *ctx.args.torch_args]
        # stderr into a file, not a pipe: a compile's logs (max-autotune prints its tuning tables)
        # would fill a pipe no one reads while waiting for the reply, and stall the worker.
        self.log_path = os.path.join(ctx.work, f"{self.name}_worker.log")
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                                         bufsize=1)
        self.facts = self._reply(ctx)
        if not self.facts.get("ready"):
            raise EngineError(f"the worker did not start: {self.facts}")

    def _reply(self, ctx):
        # The first reply waits for the compile (minutes under max-autotune): never past the time limit.
        wait = ctx.seconds_left(3600)
        if not select.select([self.proc.stdout], [], [], max(wait, 0))[0]:
            self.proc.kill()
            self.proc.wait()
            raise EngineError(f"no reply within the time limit ({max(wait, 0):.0f} s left), stopped: "
                              f"{self._log_tail(500)}")
        line = self.proc.stdout.readline()
        if not line:  # the worker closed its output: it is exiting
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            raise EngineError(f"the worker exited ({self.proc.poll()}): {self._log_tail()}")
        return json.loads(line)

    def _log_tail(self, n=2000):
        with open(self.log_path, errors="replace") as f:
            return f.read()[-n:]

    def run(self, ctx, warmup, steps, profile=False):
        if self.proc is None or self.proc.poll() is not None:
            raise EngineError("the worker is not running")
        self.proc.stdin.write(f"run {warmup} {steps}\n")
        self.proc.stdin.flush()
        reply = self._reply(ctx)
        if "error" in reply:
            raise EngineError(reply["error"])
        return reply

    def stop(self):
        # Its rounds are measured by now: a worker slow to tear down (a CUDA context, Inductor's compile
        # workers) is killed after a few seconds, so the stops fit the slack before the phase's limit.
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                # With what it started (Inductor's compile workers), and reaped before the next engine
                # starts: its CUDA context goes with it.
                for pid in process_tree(self.proc.pid):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                self.proc.wait()


@functools.lru_cache(maxsize=None)
def working_stdbuf():
    """stdbuf's path where it runs a program here (it preloads a library an image may lack), else None."""
    stdbuf = shutil.which("stdbuf")
    try:
        ok = stdbuf and subprocess.run([stdbuf, "-oL", "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return stdbuf if ok else None


class Llmc:
    """llm.c's train_gpt2cu: GPT-2 124M from scratch (-e d12), its own defaults but no GELU recompute
    (-r 0, as zerotrain and PyTorch keep the GELU input), no sampling or checkpoints."""

    label = "llm.c train_gpt2cu (-e d12, bf16, cuDNN attention)"
    name = "llmc"
    STEP_LINE = re.compile(r"^step\s+(\d+)/\d+ \| loss ([0-9.naninf]+).*\| ([0-9.]+) ms \|")
    # llm.c's own figure is CUDA events from its step's start to its update's end: its host work
    # between steps (the step line, its loop's checks) goes uncounted, which the other engines'
    # clocks count. Its step lines, line-buffered by stdbuf, are stamped as they arrive instead.
    STAMPED = "step to step: each step line's arrival (stdout line-buffered by stdbuf -oL)"
    OWN = "llm.c's own CUDA events, its step's start to its update's end (no working stdbuf, or no warm-up step)"

    def __init__(self):
        self.clock = None  # set by each block: how its steps were timed


    def start(self, ctx):
        if not ctx.args.llmc or not os.path.exists(ctx.args.llmc):
            raise EngineError(f"no llm.c binary at {ctx.args.llmc!r} (tools/gpu_pack.sh builds it into the pack)")

    def stop(self):
        pass

    def run(self, ctx, warmup, steps, profile=False):
        b = ctx.args.batch
        cmd = [ctx.args.llmc, "-e", "d12", "-i", os.path.join(ctx.data_dir, "train.bin"), "-j",
               os.path.join(ctx.data_dir, "val.bin"), "-b", str(b), "-t", str(T), "-d", str(b * T), "-x",
               str(warmup + steps), "-v", "1000000", "-m", "1", "-s", "0", "-n", "0", "-r", "0", "-h", "0",
               # The other engines' AdamW (configs/gpt2_124m.json, bench_gpu_torch.py): the same work,
               # stated so that no reader has to ask (llm.c's defaults are lr 3e-4, no weight decay).
               "-l", "6e-4", "-c", "0.1"]
        stdbuf = working_stdbuf()
        lines, err_path = [], os.path.join(ctx.work, "llmc_stderr.txt")
        with open(err_path, "w") as err:
            proc = subprocess.Popen(([stdbuf, "-oL"] if stdbuf else []) + cmd, stdout=subprocess.PIPE, stderr=err,
                                    text=True, errors="replace", cwd=ctx.work)

            def read():  # each line with the moment it arrived
                for line in proc.stdout:
                    lines.append((time.perf_counter(), line))

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            try:
                proc.wait(timeout=max(ctx.seconds_left(1800), 0.1))
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                reader.join(timeout=10)
                proc.stdout.close()
        rows = [(t, self.STEP_LINE.match(l)) for t, l in lines]
        rows = [(t, m) for t, m in rows if m]
        if proc.returncode != 0 or len(rows) < warmup + steps:
            with open(err_path, errors="replace") as f:
                text = "".join(l for _, l in lines) + f.read()
            raise EngineError(f"exit {proc.returncode}, {len(rows)} step lines: {text[-2000:]}")
        own = [float(m.group(3)) for _, m in rows]
        step_ms, self.clock = own[warmup:], self.OWN
        if stdbuf and warmup >= 1:  # a stamped step needs the line before it
            step_ms = [(rows[i][0] - rows[i - 1][0]) * 1e3 for i in range(warmup, len(rows))]
            self.clock = self.STAMPED
        return {"step_ms": step_ms, "own_step_ms": own[warmup:], "losses": [float(m.group(2)) for _, m in rows]}


def make_engines():
    return {e.name: e for e in [
        Zerotrain("zerotrain-s0", 0), Zerotrain("zerotrain-s1", 1), Zerotrain("zerotrain-s2", 2),
        Zerotrain("zerotrain-s3", 3), Zerotrain("zerotrain-s0-fp32-activations", 0, activations="fp32"),
        Zerotrain("zerotrain-s0-flash", 0, attention="flash"),
        Zerotrain("zerotrain-s0-separate-gelu", 0, gelu_epilogue=False),
        Torch("pytorch", "default", "auto"), Torch("pytorch-max-autotune-cudnn", "max-autotune", "cudnn"), Llmc()]}


# The PyTorch rows the 1.15x target takes the best of, and the fewest interleaved rounds a target
# ratio is judged on.
TARGET_PYTORCH_ROWS = ("pytorch", "pytorch-max-autotune-cudnn")
TARGET_MIN_ROUNDS = 3


def ratios_of(rows):
    """The target ratios from the rows' medians, each beside its same-round ratios (median, min,
    max over the rounds both rows ran: bench_harness.same_round_ratio), and whether this invocation
    can judge the targets at all (`valid_for_targets`, else the reasons in `not_valid_because`)."""
    ok = {r["name"]: r for r in rows if "tokens_per_s" in r}
    ratios, reasons = {}, []
    s0 = ok.get("zerotrain-s0")

    def ratio(key, numerator, denominator):
        ratios[key] = numerator["tokens_per_s"] / denominator["tokens_per_s"]
        paired = same_round_ratio(numerator, denominator)
        if paired:
            ratios[key.replace("_tokens_per_s", "_same_round")] = paired
        if min(numerator.get("rounds_measured", 0), denominator.get("rounds_measured", 0)) < TARGET_MIN_ROUNDS:
            reasons.append(f"{key}: fewer than {TARGET_MIN_ROUNDS} rounds")

    torch_rows = [r for n, r in ok.items() if n.startswith("pytorch")]
    if s0 and torch_rows:
        best = max(torch_rows, key=lambda r: r["tokens_per_s"])
        ratio("stage0_over_best_pytorch_tokens_per_s", s0, best)
        ratios["best_pytorch"] = best["name"]
        missing = [n for n in TARGET_PYTORCH_ROWS if n not in ok]
        if missing:  # the best of the rows that ran is not the best of the target's rows
            ratios["best_pytorch_missing_rows"] = missing
            reasons.append(f"best PyTorch row without {', '.join(missing)} in this invocation")
        for r in torch_rows:
            ratios[f"stage0_over_{r['name'].replace('-', '_')}_tokens_per_s"] = s0["tokens_per_s"] / r["tokens_per_s"]
        # Kernels max-autotune chose while other work shared the GPU (--warm-autotune) and then
        # served from the compile cache: not the anchor's own choices.
        def tuned_beside_work(r):
            cache = r.get("facts", {}).get("compile_cache") or {}
            return cache.get("warm_autotune") and cache.get("fxgraph_hit", 0) + cache.get("aotautograd_hit", 0) > 0

        if any(tuned_beside_work(r) for r in torch_rows):
            reasons.append("a PyTorch row compiled from kernels tuned beside other work (--warm-autotune)")
    if s0 and "llmc" in ok:
        ratio("stage0_over_llmc_tokens_per_s", s0, ok["llmc"])
    for st in (1, 2, 3):
        if s0 and f"zerotrain-s{st}" in ok:
            ratio(f"stage{st}_collectives_over_stage0_tokens_per_s", ok[f"zerotrain-s{st}"], s0)
    for variant in ("fp32-activations", "flash", "separate-gelu"):
        r = ok.get(f"zerotrain-s0-{variant}")
        if s0 and r:
            ratios[f"stage0_over_stage0_{variant.replace('-', '_')}_tokens_per_s"] = s0["tokens_per_s"] / r["tokens_per_s"]
    if s0:
        ratios["stage0_mfu"] = s0["mfu"]
        if s0["mfu"] is None:
            reasons.append("no MFU: the card's peak FLOP/s is not known (--peak-tflops)")
    ratios["valid_for_targets"] = bool(s0) and not reasons
    if reasons:
        ratios["not_valid_because"] = reasons
    return ratios


def write_report(out, meta, rows, complete):
    """The JSON, rewritten after every round so a call cut short still leaves what was measured."""
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out + ".tmp", "w") as f:
        json.dump({**meta, "complete": complete, "rows": rows, "ratios": ratios_of(rows), "targets": TARGETS}, f,
                  indent=1)
    os.replace(out + ".tmp", out)


def print_table(args, name, rows):
    print(f"\nGPT-2 124M, B={args.batch}, T={T}, bf16, {args.rounds_run} interleaved rounds of {args.steps} timed steps "
          f"after {args.warmup}, on {name}")
    print_rows(rows)
    for k, v in ratios_of(rows).items():
        print_ratio(k, v)
    for r in rows:
        if "op_profile" in r:
            print("\n" + "\n".join(top_ops_lines(r["op_profile"], r["label"])))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zerotrain", default=os.path.join(ROOT, "build", "zerotrain"))
    ap.add_argument("--llmc", default=os.path.join(ROOT, ".gpu_build", "train_gpt2cu"))
    ap.add_argument("--engines", nargs="+", default=DEFAULT_ENGINES)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--python", default=sys.executable, help="interpreter with torch for the PyTorch anchors")
    ap.add_argument("--no-profile", action="store_true", help="no separate per-op profile runs")
    add_run_arguments(ap)  # rounds, steps, time limit, out, peak, and the CPU test's (tests/tools/bench_gpu_test.py)
    args = ap.parse_args(argv)
    exit_on_sigterm()
    args.zerotrain_sets = dict(kv.split("=", 1) for kv in args.zerotrain_sets)
    # Absolute: the engines run from their own folders (a relative --llmc was not found there).
    args.zerotrain, args.llmc = os.path.abspath(args.zerotrain), args.llmc and os.path.abspath(args.llmc)
    engines = make_engines()
    unknown = [e for e in args.engines if e not in engines]
    if unknown:
        sys.exit(f"bench_gpu: unknown engine(s) {unknown}; known: {' '.join(engines)}")
    name, driver = (args.fake_device, "none") if args.fake_device else device_facts()
    n_params, flops_tok = flops_per_token()
    peak, peak_source = peak_bf16_flops(name, args.peak_tflops)
    # The code measured: the commit the binary was built from, as it reports it ("+dirty": built
    # with uncommitted changes); the checkout's (ZT_COMMIT for copies of the tree that travel
    # without .git, as the device calls carry) beside it, for a binary that names none.
    checkout = head_commit() or "unknown"
    commit = binary_commit(args.zerotrain) or checkout
    slug = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    out = args.out or default_out(f"gpu_bench_{slug}.json")
    check_out_file("bench_gpu", out)
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "commit": commit,
            "checkout_commit": checkout, "device": name, "driver": driver, "batch": args.batch, "seq_len": T, "params": n_params, "flops_per_token": flops_tok,
            "peak_bf16_flops": peak, "peak_source": peak_source, "rounds": args.rounds, "steps": args.steps, "warmup": args.warmup,
            "order": args.engines, "gpu_state_at_start": gpu_state()}
    chosen = [engines[e] for e in args.engines]
    rows = [{"name": e.name, "label": e.label, "rounds": []} for e in chosen]
    with tempfile.TemporaryDirectory() as work:
        ctx = Context.make(args, work, VOCAB, peak)
        began = time.monotonic()

        def profiles():
            """Stage 0's and stage 3's per-op profiles (about one block each), right after round 1,
            where the time limit leaves room for them (a quarter of it)."""
            profile_rows([(e, r) for e, r in zip(chosen, rows)
                          if isinstance(e, Zerotrain) and e.name in ("zerotrain-s0", "zerotrain-s3")],
                         ctx, began, PROFILED_STEPS, lambda: write_report(out, meta, rows, complete=False))

        args.rounds_run = meta["rounds_run"] = interleave(chosen, rows, ctx, args.batch * T, flops_tok,
                                                          lambda: write_report(out, meta, rows, complete=False),
                                                          None if args.no_profile else profiles)
    meta["gpu_state_at_end"] = gpu_state()
    write_report(out, meta, rows, complete=True)
    print_table(args, name, rows)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
