"""The engines tools/bench_gpu.py times GPT-2 124M on (and tools/bench_multi_gpu.py and
tools/bench_llama_gpu.py reuse): zerotrain's binary, a long-lived PyTorch worker (tools/bench_gpu_torch.py
or another --serve script) and llm.c's train_gpt2cu. Each has start(ctx), run(ctx, warmup, steps,
profile) returning its step times and losses, and stop(); bench_harness.interleave drives them.

The model's shape and its flops a token (the MFU numerator) live here, beside the engines that
train it."""

import functools
import json
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import threading
import time

from bench_harness import EngineError, process_tree, run_group

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N_LAYER, N_HEAD, N_EMBD, T, VOCAB, VOCAB_PADDED = 12, 12, 768, 1024, 50257, 50304


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
