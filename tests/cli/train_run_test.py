#!/usr/bin/env python3
"""End-to-end `zerotrain train` / `sample` on the embedded dataset, through the real binary:

  * a short run writes config.json (which reloads), metrics.jsonl (one record per step with loss,
    lr, grad norm, timing, memory; eval, sample and summary records), final.safetensors, vocab.json;
    the loss falls; `sample --run` generates text from the final weights, the run's own last
    sample (a bf16 run's in bf16, as `--dtype bf16`), and `--device cuda` without a GPU refuses in
    one line;
  * optim.decay = "wsd" logs the warmup-stable-decay rates step by step;
  * the same config twice gives bitwise the same losses (deterministic batches, init, kernels);
  * a non-finite gradient (injected through ZT_TEST_NONFINITE_AT_STEP) stops the run with exit 1
    and writes no weights, or with train.nonfinite=skip skips that step and finishes with finite
    weights, the checkpoint and evaluation due after the skipped step still made, and a resume
    from that checkpoint ending on the same weights; a gradient norm past fp32's squares counts as
    non-finite, a sample from overflowing weights is recorded and the run goes on, and a run none of
    whose steps updated the weights says why;
  * bad batch terms on the command line are refused with exit 2 and one line.

usage: train_run_test.py PATH/TO/zerotrain
"""
import json
import math
import os
import random
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402
from run_dir_util import copy_run_with, tensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = {
    "model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 64},
    "data": {"embedded_chars": 200000},
    "train": {"micro_batch": 8, "max_steps": 30, "eval_every": 15, "eval_batches": 4, "num_threads": 2},
    "optim": {"lr": 3e-3, "warmup_steps": 5},
    "log": {"sample_every": 15, "sample_tokens": 40, "progress": "plain", "every_steps": 10},
}
report = Checks()
check = report.check


def run(binary, args, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([binary] + args, capture_output=True, text=True, timeout=600, env=env)


def records(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def safetensors_all_finite(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        values = struct.unpack(f"<{(end - begin) // 4}f", data[begin:end])
        if not all(math.isfinite(v) for v in values):
            return False
    return True


def main():
    binary = sys.argv[1]
    work = report.work_folder("zt_train_")
    config_path = os.path.join(work, "tiny.json")
    with open(config_path, "w") as f:
        json.dump(CONFIG, f)

    # 1. A short run and everything it leaves behind.
    run_a = os.path.join(work, "a")
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_a])
    print(p.stdout[-1500:], p.stderr[-500:])
    check(p.returncode == 0, "train exits 0")
    for name in ["config.json", "metrics.jsonl", "final.safetensors", "vocab.json"]:
        check(os.path.exists(os.path.join(run_a, name)), f"run dir holds {name}")
    recs = records(run_a)
    train = [r for r in recs if r["type"] == "train"]
    check([r["step"] for r in train] == list(range(1, 31)), "one train record per step")
    check(all({"loss", "lr", "grad_norm", "step_ms", "tokens_per_s", "memory_peak_bytes"} <= r.keys() for r in train),
          "train records carry loss, lr, grad_norm, timing and memory")
    # Each step's tokens are the global batch's (8 windows of 32 tokens), and its rate is them over
    # its step_ms.
    check(all(r["tokens"] == 8 * 32 and abs(r["tokens_per_s"] * r["step_ms"] / 1e3 - r["tokens"]) <= 1e-6 * r["tokens"]
              for r in train), f"tokens and tokens_per_s are the step's global batch and its rate ({train[:1]})")
    ends = [r.get("elapsed_s", -1.0) for r in train]
    check(all(b - a >= r["step_ms"] / 1e3 - 1e-9 for a, b, r in zip([0.0] + ends, ends, train)),
          "elapsed_s grows from record to record by at least the step's own step_ms (the step-to-step clock)")
    check([r["step"] for r in recs if r["type"] == "eval"] == [15, 30], "evaluations at steps 15 and 30")
    check(all(r.get("val_windows") == 4 * 8 for r in recs if r["type"] == "eval"),
          "each evaluation says over how many windows (eval_batches x micro_batch)")
    check(sum(r["type"] == "sample" for r in recs) == 2, "two text samples")
    check(recs[-1]["type"] == "summary", "a closing summary record")
    check(train[-1]["loss"] < train[0]["loss"] - 0.5, f"loss falls ({train[0]['loss']:.3f} -> {train[-1]['loss']:.3f})")
    check(abs(train[0]["lr"] - 3e-3 / 6) < 1e-9, "warmup: step 1 runs at lr/(warmup+1)")
    check("derived: train.global_batch_tokens = 256" in p.stdout, "derived batch terms are printed")
    check("val loss" in p.stdout and "unigram entropy" in p.stdout, "summary prints val loss and unigram entropy")
    # The plain progress prints every log.every_steps-th step and the last, also where that is no
    # multiple of every_steps (its loss was the run's last word on the terminal).
    p = run(binary, ["train", "--config", config_path, "--run-dir", os.path.join(work, "odd_end"), "--set",
                     "train.max_steps=5", "--set", "log.every_steps=2", "--set", "train.eval_every=0", "--set",
                     "log.sample_every=0"])
    printed = [line.split(" |")[0] for line in p.stdout.splitlines() if line.startswith("step ") and " | loss" in line]
    check(p.returncode == 0 and printed == ["step 2/5", "step 4/5", "step 5/5"],
          f"progress lines at every 2nd step and the last of 5 ({printed})")
    # The host allocator's idle blocks went back to the system around the final evaluation and
    # sample (a step's cached activations sat beside them, past what the memory check weighs).
    check("(plus 0 B of freed blocks the host allocator keeps for reuse)" in p.stdout,
          f"no idle host blocks kept at the run's end ({[l for l in p.stdout.splitlines() if 'freed blocks' in l]})")
    check(safetensors_all_finite(os.path.join(run_a, "final.safetensors")), "final weights are finite")
    with open(os.path.join(run_a, "final.safetensors"), "rb") as f:
        meta = json.loads(f.read(struct.unpack("<Q", f.read(8))[0])).get("__metadata__", {})
    check(meta.get("format") == "pt" and "run_config" in meta,
          f"final.safetensors says format pt, as Hugging Face's loaders demand ({sorted(meta)})")

    p = run(binary, ["sample", "--run", run_a, "--tokens", "30", "--prompt", "the "])
    check(p.returncode == 0 and len(p.stdout) >= 30, f"sample --run generates text: {p.stdout.strip()[:60]!r}")
    # --temperature 0 is greedy decoding (HF's and vLLM's spelling): top-k 1, whatever the seed.
    greedy = [run(binary, ["sample", "--run", run_a, "--tokens", "30", "--prompt", "the "] + flags)
              for flags in (["--temperature", "0"], ["--temperature", "0", "--seed", "9"], ["--top-k", "1"])]
    check(all(g.returncode == 0 for g in greedy) and greedy[0].stdout == greedy[1].stdout == greedy[2].stdout,
          f"--temperature 0 samples greedily ({[g.stdout[:40] for g in greedy]}; {greedy[0].stderr[-200:]})")
    # The threads: the same text at one and at every core. By default OMP_NUM_THREADS, else as many
    # as other processes' runnable threads leave idle (ZT_TEST_RUNNABLE_ELSEWHERE stands in for the
    # machine's count): said in a note; --threads 0 is refused in one line.
    cores = len(os.sched_getaffinity(0))
    threads = [run(binary, ["sample", "--run", run_a, "--tokens", "30", "--prompt", "the ", "--temperature", "0",
                            "--threads", str(n)]) for n in (1, cores)]
    check(all(t.returncode == 0 and t.stdout == greedy[0].stdout for t in threads),
          f"--threads 1 and --threads {cores} draw the same text ({[t.stdout[:40] for t in threads]})")
    busy = run(binary, ["sample", "--run", run_a, "--tokens", "5", "--prompt", "the "],
               env_extra={"ZT_TEST_RUNNABLE_ELSEWHERE": str(cores)})
    check(busy.returncode == 0 and (cores == 1 or f"note: 1 CPU thread(s), not {cores}:" in busy.stderr.splitlines()[-1]),
          f"a loaded machine's idle cores set the threads, noted ({busy.stderr[-300:]})")
    idle = run(binary, ["sample", "--run", run_a, "--tokens", "5", "--prompt", "the "],
               env_extra={"ZT_TEST_RUNNABLE_ELSEWHERE": "0"})
    told = run(binary, ["sample", "--run", run_a, "--tokens", "5", "--prompt", "the "],
               env_extra={"ZT_TEST_RUNNABLE_ELSEWHERE": str(cores), "OMP_NUM_THREADS": "1"})
    check(told.returncode == 0 and "CPU thread(s)" not in told.stderr, f"OMP_NUM_THREADS chooses ({told.stderr[-200:]})")
    derived = run(binary, ["train", "--config", os.path.join(os.path.dirname(__file__), "..", "..", "configs",
                                                             "tiny.json"), "--run-dir", os.path.join(work, "omp1"),
                           "--set", "train.max_steps=1", "--set", "log.sample_tokens=0"],
                  env_extra={"OMP_NUM_THREADS": "1"})
    check(derived.returncode == 0 and "derived: train.num_threads = 1 (OMP_NUM_THREADS)" in derived.stdout,
          f"train.num_threads left out takes OMP_NUM_THREADS ({derived.stdout[-300:]})")
    past = run(binary, ["sample", "--run", run_a, "--tokens", "5", "--threads", str(cores + 1)],
               env_extra={"OMP_WAIT_POLICY": "active"})
    env_past = run(binary, ["sample", "--run", run_a, "--tokens", "5"],
                   env_extra={"OMP_WAIT_POLICY": "active", "OMP_NUM_THREADS": f"{cores + 1},2"})
    check(past.returncode == 0 and f"--threads = {cores + 1} on each of this node's 1 process(es)" in past.stderr and
          env_past.returncode == 0 and f"OMP_NUM_THREADS = {cores + 1} on each" in env_past.stderr,
          f"--threads or OMP_NUM_THREADS past the cores is warned of, as train.num_threads is ({past.stderr[-300:]}; "
          f"{env_past.stderr[-300:]})")
    zero = run(binary, ["sample", "--run", run_a, "--tokens", "5", "--threads", "0"])
    check(idle.returncode == 0 and "CPU thread(s)" not in idle.stderr and zero.returncode == 2 and
          len(zero.stderr.strip().splitlines()) == 1 and "--threads" in zero.stderr,
          f"an idle machine's cores are all taken without a note; --threads 0 is refused ({zero.stderr.strip()})")
    # --top-p: a nucleus small enough holds the most likely token alone (greedy again); a bad one is
    # refused in one line.
    nucleus = run(binary, ["sample", "--run", run_a, "--tokens", "30", "--prompt", "the ", "--top-p", "1e-9"])
    check(nucleus.returncode == 0 and nucleus.stdout == greedy[0].stdout,
          f"--top-p 1e-9 draws the most likely token each time ({nucleus.stdout[:40]!r})")
    for bad in ("0", "1.5", "abc", "nan"):
        r = run(binary, ["sample", "--run", run_a, "--tokens", "3", "--top-p", bad])
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 2 and len(lines) == 1 and "--top-p must be a number in (0, 1]" in lines[0],
              f"--top-p {bad} refused in one line ({r.returncode}: {lines})")
    check("zerotrain sample: 30 tokens in " in p.stderr and " tokens/s;" in p.stderr,
          f"sample says on stderr how long its 30 tokens took ({p.stderr.strip()[-200:]!r})")
    # An empty prompt where the vocabulary has no document delimiter starts from token 0 (the
    # sorted character vocabulary's newline), and says so: it was silent, and counted 0 positions.
    empty, newline = (run(binary, ["sample", "--run", run_a, "--tokens", "12", "--temperature", "0", "--prompt", prompt])
                      for prompt in ("", "\n"))
    check(empty.returncode == 0 and 'the sample starts from token 0 ("\\n")' in empty.stderr and
          "the prompt's 1 position included" in empty.stderr and newline.stdout == "\n" + empty.stdout,
          f"an empty prompt starts from token 0, said so ({empty.stderr.strip()[-300:]!r}; {empty.stdout[:30]!r} "
          f"against {newline.stdout[:31]!r})")
    # A prompt past the 32 positions the sample attends to: its last 32 condition it, said (the
    # summary counted all 40 as run, and nothing said the first 8 were cut off).
    long_prompt = run(binary, ["sample", "--run", run_a, "--tokens", "2", "--temperature", "0", "--prompt", "\n" * 40])
    check(long_prompt.returncode == 0 and "the prompt's 32 positions included" in long_prompt.stderr and
          "the prompt's first 8 of 40 tokens were cut off: the sample attends to 32 positions" in long_prompt.stderr,
          f"a prompt past the context says what was cut off ({long_prompt.stderr.strip()[-300:]!r})")
    # The text comes as it is drawn: a long sample's first characters reach a pipe within seconds,
    # and a Ctrl-C keeps them (it printed nothing until the last token).
    long = subprocess.Popen([binary, "sample", "--run", run_a, "--tokens", "1000000", "--prompt", "the "],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ready, _, _ = select.select([long.stdout], [], [], 20)
    first = os.read(long.stdout.fileno(), 64) if ready else b""
    long.send_signal(signal.SIGINT)
    rest, err = long.communicate(timeout=60)
    check(first.startswith(b"the ") and len(first) > 4,
          f"sample streams its text: {first!r} read while a 1,000,000-token sample ran")
    # Ctrl-C ends it after the token being drawn, with the text and the summary line (the default
    # handler used to end it at once, the summary lost) and the shell's exit code for SIGINT.
    drawn = re.search(rb"stopped by SIGINT after (\d+) tokens in ", err)
    check(long.returncode == 130 and drawn is not None and (first + rest).endswith(b"\n")
          and len(first + rest) == len(b"the ") + int(drawn.group(1)) + 1,
          f"Ctrl-C ends a sample with its text and a summary (exit {long.returncode}, {err.strip()[-200:]!r})")
    # A run whose optimizer values this build refuses (optim.eps = 0, which earlier builds took) is
    # sampled all the same: its optimizer plays no part in sampling.
    old_run = copy_run_with(run_a, os.path.join(work, "old_eps"), "optim", "eps", 0.0)
    old = run(binary, ["sample", "--run", old_run, "--tokens", "30", "--prompt", "the "])
    check(old.returncode == 0 and old.stdout == p.stdout,
          f"a run saved with optim.eps = 0 is sampled as before ({old.stderr.strip()[-200:]!r})")
    # The run's own last sample (step 30, seed train.seed + 30) is what `sample` draws from its final
    # weights; a bf16 run samples in bf16, as `sample --dtype bf16` does.
    def logged_sample_matches(run_dir, step, tokens, extra=(), seed=1337):
        logged = [r["text"] for r in records(run_dir) if r["type"] == "sample" and r["step"] == step]
        p = run(binary, ["sample", "--run", run_dir, "--tokens", str(tokens), "--seed", str(seed + step),
                         "--ignore-eos", *extra])  # as docs/config.md says (a run's samples draw every token)
        return p.returncode == 0 and len(logged) == 1 and p.stdout == "\n" + logged[0] + "\n", logged, p.stdout
    ok, logged, printed = logged_sample_matches(run_a, 30, 40)
    check(ok, f"sample --run draws the run's own last sample ({logged!r} / {printed!r})")
    run_bf16 = os.path.join(work, "bf16")
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_bf16, "--set", "log.sample_every=0",
                     "--set", "log.sample_tokens=120", "--set", "precision.param_dtype=bf16",
                     "--set", "precision.activations=bf16"])
    ok, logged, printed = logged_sample_matches(run_bf16, 30, 120, ["--dtype", "bf16"])
    check(p.returncode == 0 and ok,
          f"a bf16 run samples in bf16: sample --run --dtype bf16 draws its last sample ({logged!r} / {printed!r})")
    # A stage-3 option changed at a stage that does not use it is said (it ran without a word), and a
    # default written back by config.json is not.
    run_stage1 = os.path.join(work, "stage1_options")
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_stage1, "--set", "train.max_steps=1",
                     "--set", "zero.stage=1", "--set", "zero.prefetch_units=3", "--set", "zero.grad_shard_dtype=fp32"])
    said = [l for l in p.stdout.splitlines() if "option: stage 1 runs without it" in l]
    check(p.returncode == 0 and len(said) == 2 and "zero.prefetch_units is a stage 3 option" in said[0] and
          "zero.grad_shard_dtype is a stages 2-3 option" in said[1], f"options the stage does not use are said ({said})")
    # The start line names the zero keys changed from their defaults (they showed only in the JSON).
    banner = [l for l in p.stdout.splitlines() if l.startswith("ZeRO stage 1 on 1 rank(s)")]
    check(banner and banner[0].endswith("; zero: grad_shard_dtype = fp32, prefetch_units = 3"),
          f"the ZeRO line names the options changed ({banner})")
    # int8 gathers on one rank's solo path quantize nothing: said, not left to look active (a user
    # previewing int8's effect on one process trained on exact weights without a word).
    run_int8 = os.path.join(work, "int8_one_rank")
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_int8, "--set", "train.max_steps=1",
                     "--set", "zero.stage=3", "--set", "zero.gather_dtype=int8"])
    said = [l for l in p.stdout.splitlines() if "zero.gather_dtype = int8 has no gather to quantize" in l]
    check(p.returncode == 0 and len(said) == 1 and "zero.solo_path = false" in said[0],
          f"int8 gathers on one rank's solo path are said to quantize nothing ({said})")
    # ... and in deterministic mode its banner promises every stage's bits on this rank count (it said
    # stages 1-3 only, beside the note), not any rank count's (on more ranks int8 acts).
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_int8 + "_det", "--set", "train.max_steps=1",
                     "--set", "zero.stage=3", "--set", "zero.gather_dtype=int8", "--set", "train.deterministic=true"])
    banner = [l for l in p.stdout.splitlines() if l.startswith("ZeRO stage 3")]
    check(p.returncode == 0 and banner and "deterministic: the same bits at every stage on this rank count (int8 "
          "gathers, idle on one rank's solo path" in banner[0],
          f"a deterministic one-rank int8 run promises every stage's bits on this rank count ({banner})")
    # The largest train.seed: the logged sample's seed, train.seed + 30, passes 2^31 - 1.
    run_seed = os.path.join(work, "big_seed")
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_seed, "--set", "log.sample_every=0",
                     "--set", "log.sample_tokens=40", "--set", "train.seed=2147483647"])
    ok, logged, printed = logged_sample_matches(run_seed, 30, 40, seed=2147483647)
    check(p.returncode == 0 and ok, f"train.seed = 2^31 - 1: sample --seed 2147483677 draws the run's last sample "
                                    f"({logged!r} / {printed!r})")
    # A seed in exponent form past 2^53 (not read exactly through a double): refused saying so; below it, taken.
    past = run(binary, ["sample", "--run", run_seed, "--tokens", "2", "--seed", "9.2e18"])
    below = run(binary, ["sample", "--run", run_seed, "--tokens", "2", "--seed", "9e15"])
    check(past.returncode == 2 and "(got '9.2e18': exponent form is taken below 2^53 only; write it in digits)"
          in past.stderr and below.returncode == 0,
          f"sample --seed 9.2e18 says why it is refused, 9e15 is taken ({past.stderr.strip()}; {below.returncode})")
    # fp32 parameters with bf16 activations: the weights stay fp32 (the run computes with them).
    run_mixed = os.path.join(work, "mixed")
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_mixed, "--set", "log.sample_every=0",
                     "--set", "log.sample_tokens=120", "--set", "precision.activations=bf16"])
    ok, logged, printed = logged_sample_matches(run_mixed, 30, 120, ["--dtype", "bf16"])
    check(p.returncode == 0 and ok, f"fp32 parameters, bf16 activations: sample --run --dtype bf16 draws the run's "
                                    f"last sample ({logged!r} / {printed!r})")

    # optim.decay = "wsd": warmup, the peak held, then 1 - sqrt down to min_lr over the last half.
    run_w = os.path.join(work, "wsd")
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_w, "--set", "train.max_steps=10",
                     "--set", "log.sample_tokens=0", "--set", "optim.decay=wsd", "--set", "optim.cooldown_fraction=0.5",
                     "--set", "optim.warmup_steps=2", "--set", "optim.lr=0.01", "--set", "optim.min_lr=0.001"])
    def wsd(i):  # optimizer step i (0-based); cooldown from max(2, 10 - 5) = 5
        return 0.01 * (i + 1) / 3 if i < 2 else 0.01 if i < 5 else 0.001 + (1 - math.sqrt((i - 5) / 5)) * 0.009
    lrs = [(r["step"], r["lr"]) for r in records(run_w) if r["type"] == "train"] if p.returncode == 0 else []
    check(len(lrs) == 10 and all(abs(lr - wsd(step - 1)) <= 1e-6 * wsd(step - 1) for step, lr in lrs),
          f"optim.decay = wsd: warmup, the peak held, a 1 - sqrt cooldown ({lrs})")

    # --device cuda: without a visible GPU, one line naming the device and exit 2, no text (with one,
    # tests/gpu/gpu_sample_test.py holds the GPU's text to this CPU's).
    version = run(binary, ["version"]).stdout
    # The build names its commit (tools/build_commit.cmake): this checkout's HEAD or, for a binary
    # built before the last commits, one of its ancestors.
    named = re.match(r"zerotrain \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}|unknown)(\+dirty)?\)$", version.splitlines()[0])
    in_git = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True).returncode == 0
    ancestor = named is not None and named.group(1) != "unknown" and subprocess.run(
        ["git", "-C", ROOT, "merge-base", "--is-ancestor", named.group(1), "HEAD"], capture_output=True).returncode == 0
    check(named is not None and (ancestor or not in_git),
          f"zerotrain version names the build's commit, one of this checkout's ({version.splitlines()[0]!r})")
    # A core name OpenBLAS does not know: it detects the core itself, and the report says the name
    # was not taken (not "(user)", as if the user had chosen what it runs).
    bogus = run(binary, ["version"], {"OPENBLAS_CORETYPE": "NoSuchCore"}).stdout
    check("(OPENBLAS_CORETYPE=NoSuchCore not taken by OpenBLAS)" in bogus and "(user)" not in bogus,
          f"an unknown OPENBLAS_CORETYPE is reported as not taken ({bogus.splitlines()[1:2]})")
    if "cuda: built;" not in version or "; 0 device(s)" in version:
        p = run(binary, ["sample", "--run", run_a, "--tokens", "30", "--device", "cuda"])
        lines = [line for line in p.stderr.splitlines() if line.strip()]
        check(p.returncode == 2 and len(lines) == 1 and 'device = "cuda"' in lines[0] and not p.stdout,
              f"sample --device cuda without a GPU: exit {p.returncode}, one line naming the device ({lines})")

    # 2. Determinism: the same config twice gives the same losses, bit for bit.
    run_b = os.path.join(work, "b")
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_b])
    losses_a = [r["loss"] for r in train]
    losses_b = [r["loss"] for r in records(run_b) if r["type"] == "train"]
    check(p.returncode == 0 and losses_a == losses_b, "two identical runs give identical losses")

    # 3. Non-finite handling.
    run_c = os.path.join(work, "c")
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_c, "--set", "train.max_steps=8"],
            {"ZT_TEST_NONFINITE_AT_STEP": "4"})
    check(p.returncode == 1, f"a NaN gradient stops the run with exit 1 (got {p.returncode})")
    # One error line, the command's, naming the step; the progress line on stdout is no second one.
    err_lines = [line for line in p.stderr.splitlines() if line.strip()]
    check(len(err_lines) == 1 and err_lines[0].startswith("zerotrain: error: step 4: non-finite gradient") and
          not any(line.startswith("error:") for line in p.stdout.splitlines()),
          f"the stop is explained in one error line naming the step ({err_lines})")
    check("note: test hook ZT_TEST_NONFINITE_AT_STEP is set: a gradient element is made NaN at step 4" in p.stdout,
          f"the run says the hook is set (nothing named it) ({p.stdout[-300:]!r})")
    check(not os.path.exists(os.path.join(run_c, "final.safetensors")), "no weights are written after a NaN stop")
    nonfinite = [r for r in records(run_c) if r["type"] == "nonfinite"]
    step3 = [r for r in records(run_c) if r["type"] == "train" and r["step"] == 3]
    # In place of the step's train record: the batch it used up and its rate in the schedule (rising
    # in the warm-up), what is not finite null (the loss is finite: the gradient was poisoned).
    check(len(nonfinite) == 1 and nonfinite[0]["step"] == 4 and step3 and
          isinstance(nonfinite[0]["loss"], float) and nonfinite[0]["grad_norm"] is None and
          nonfinite[0]["tokens"] == step3[0]["tokens"] and
          # warm-up over 5 steps: step s has lr x s / 6, so step 4 has 4/3 of step 3's
          abs(nonfinite[0]["lr"] - step3[0]["lr"] * 4 / 3) <= 1e-6 * nonfinite[0]["lr"] and
          nonfinite[0]["action"] == "stop", f"metrics record the NaN step ({nonfinite}, step 3: {step3})")
    check(max(r["step"] for r in records(run_c) if r["type"] == "train") == 3, "no optimizer step after the NaN")
    # Stopped before any evaluation: no validation loss, not 0.0 "below the unigram entropy".
    check(records(run_c)[-1]["type"] == "summary" and records(run_c)[-1]["val_loss"] is None and
          "val loss: none (no evaluation ran)" in p.stdout,
          f"a run stopped before its first evaluation has no validation loss ({records(run_c)[-1].get('val_loss')})")

    # Context use is judged against the least a model that ignores context can score on the
    # validation windows, their targets' own entropy: i.i.d. tokens (no context to learn) whose
    # validation split is mostly 0 score far below the training split's entropy and were said to use
    # context; the training frequencies' add-one smoothed loss on those targets was no floor either
    # (an untrained model's ln V fell below it on small data). The figure printed is recomputed here
    # from the sequential windows, and i.i.d. tokens never fall below it.
    iid = os.path.join(work, "iid")
    os.makedirs(iid)
    rng = random.Random(5)
    split_tokens = {}
    for name, count, zeros in (("train.bin", 20000, 0.7), ("val.bin", 4000, 0.97)):
        split_tokens[name] = [0 if rng.random() < zeros else rng.randrange(1, 65) for _ in range(count)]
        with open(os.path.join(iid, name), "wb") as f:
            f.write(struct.pack("<3i", 20240520, 1, count) + bytes(253 * 4) +
                    struct.pack(f"<{count}H", *split_tokens[name]))
    iid_run = os.path.join(work, "iid_run")
    p = run(binary, ["train", "--config", os.path.join(ROOT, "configs", "tiny_debug.json"), "--run-dir", iid_run,
                     "--set", "train.num_threads=1", "--set", "log.sample_tokens=0", "--set", "data.order=sequential",
                     "--set", f"data.train_file={iid}/train.bin", "--set", f"data.val_file={iid}/val.bin", "--set",
                     "train.max_steps=150", "--set", "optim.lr=0.01"])
    line = next((l for l in p.stdout.splitlines() if l.startswith("val loss:")), "")
    m = re.match(r"val loss: (\S+)\s+unigram entropy of the training data: (\S+) nats; no model that ignores context "
                 r"scores below (\S+) on the validation windows, their targets' entropy \((.*)\)", line)
    expected = None
    if p.returncode == 0:
        with open(os.path.join(iid_run, "config.json")) as f:
            train_cfg = json.load(f)["train"]
        T, windows = train_cfg["seq_len"], train_cfg["eval_batches"] * train_cfg["micro_batch"]
        val = split_tokens["val.bin"]
        targets = [t for w in range(windows) for t in val[w * T + 1:w * T + T + 1]]
        expected = -sum(targets.count(v) / len(targets) * math.log(targets.count(v) / len(targets))
                        for v in set(targets))
    check(m is not None and expected is not None and abs(float(m.group(3)) - expected) < 1e-4 and
          float(m.group(3)) < float(m.group(2)) - 1.0 and float(m.group(1)) >= float(m.group(3)) and
          m.group(4) == "not below",
          f"context use is judged against the validation targets' entropy, which i.i.d. tokens do not beat "
          f"({expected}: {line})")

    # With "skip", a stop past train.max_skipped_steps says why this one stopped the run.
    p = run(binary, ["train", "--config", config_path, "--run-dir", os.path.join(work, "c_skip"), "--set",
                     "train.max_steps=8", "--set", "train.nonfinite=skip", "--set", "train.max_skipped_steps=1"],
            {"ZT_TEST_NONFINITE_AT_STEP": "4-5"})
    err_lines = [line for line in p.stderr.splitlines() if line.strip()]
    check(p.returncode == 1 and len(err_lines) == 1 and "step 5: non-finite" in err_lines[0] and
          "2 in a row, past train.max_skipped_steps = 1" in err_lines[0],
          f"a stop past train.max_skipped_steps says so ({err_lines})")
    # ... and so does its record: step 4 was skipped, step 5 stopped the run (it said "skip").
    actions = [(r["step"], r["action"]) for r in records(os.path.join(work, "c_skip")) if r["type"] == "nonfinite"]
    check(actions == [(4, "skip"), (5, "stop")], f"the nonfinite records say what each step did ({actions})")

    # A run none of whose steps updated the weights says why, not "no step in this run
    # (train.max_steps = 0)" (or "resumed at its last step" after a resume).
    for name, extra, env, why in (
            ("c_all", ["--set", "train.max_steps=3", "--set", "train.nonfinite=skip"], "1-3",
             "train loss: none (no step of this run updated the weights: all 3 of its steps skipped for a non-finite loss"),
            ("c_first", ["--set", "train.max_steps=3"], "1",
             "train loss: none (no step of this run updated the weights: step 1: non-finite gradient")):
        p = run(binary, ["train", "--config", config_path, "--run-dir", os.path.join(work, name)] + extra,
                {"ZT_TEST_NONFINITE_AT_STEP": env})
        check(why in p.stdout and "no step in this run" not in p.stdout,
              f"a run whose every step was non-finite says so ({[l for l in p.stdout.splitlines() if 'loss:' in l]})")

    # A non-finite loss says where it came from first (data-caused NaNs: which batch): the rank,
    # micro-batch and global samples. An untied Llama whose token 64 embeds as +-fp32's largest values
    # (squared in RMSNorm: inf; NaN weights are refused at load), the token put in
    # window 5 alone of a sequential token file: step 2's micro-batch 0 (samples 4-5 at 2 a
    # micro-batch, 2 micro-batches a step); the windows without it stay finite.
    llama = os.path.join(ROOT, "configs", "llama_tiny_debug.json")
    poisoned = os.path.join(work, "poisoned")
    p0 = run(binary, ["train", "--config", llama, "--run-dir", poisoned, "--set", "train.max_steps=1", "--set",
                      "checkpoint.at_end=true", "--set", "log.sample_tokens=0"])
    export = os.path.join(work, "poisoned_hf")
    p1 = run(binary, ["ckpt", "export", os.path.join(poisoned, "checkpoints"), "--format", "hf", "--out", export])
    where = None
    if p0.returncode == 0 and p1.returncode == 0:
        with open(os.path.join(export, "model.safetensors"), "r+b") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            entry = json.loads(f.read(n))["model.embed_tokens.weight"]
            cols = entry["shape"][1]
            if entry["dtype"] == "F32":
                f.seek(8 + n + entry["data_offsets"][0] + 64 * cols * 4)
                f.write(struct.pack(f"<{cols}f", *([3.4e38, -3.4e38] * (cols // 2))))
        T = 16  # llama_tiny_debug's block_size
        rng = random.Random(11)
        tokens = [rng.randrange(0, 64) for _ in range(40 * T + 1)]
        tokens[5 * T + 3] = 64
        token_file = os.path.join(work, "poisoned.bin")
        with open(token_file, "wb") as f:
            f.write(struct.pack("<3i", 20240520, 1, len(tokens)) + bytes(253 * 4) +
                    struct.pack(f"<{len(tokens)}H", *tokens))
        p = run(binary, ["train", "--config", llama, "--run-dir", os.path.join(work, "poisoned_run"), "--set",
                         f"train.init_from={export}", "--set", f"data.train_file={token_file}", "--set",
                         f"data.val_file={token_file}", "--set", "data.order=sequential", "--set",
                         "train.micro_batch=2", "--set", "train.grad_accum=2", "--set", "train.max_steps=4", "--set",
                         "log.sample_tokens=0", "--set", "train.eval_every=0"])
        where = [line for line in p.stderr.splitlines() if line.strip()]
    check(where is not None and len(where) == 1 and "step 2: non-finite loss" in where[0] and
          "first on rank 0, micro-batch 0: global samples 4-5" in where[0],
          f"a non-finite loss names the rank, micro-batch and samples it came from first ({where}; "
          f"{p0.stderr.strip()[-200:]}{p1.stderr.strip()[-200:]})")

    # A gradient whose norm passes sqrt(FLT_MAX) with no clipping: AdamW's fp32 squares of it are inf
    # (its second moments stayed inf, the elements frozen, the checkpoint saved so, nothing said), as
    # PyTorch's fp32 norm is: a non-finite step. The fp64 norm is finite; the line says what overflows.
    diverging = ["--set", "optim.lr=10", "--set", "optim.weight_decay=10", "--set", "optim.grad_clip=0", "--set",
                 "optim.eps=1e-30", "--set", "optim.decay=constant", "--set", "optim.warmup_steps=0", "--set",
                 "precision.param_dtype=bf16", "--set", "precision.activations=bf16", "--set", "log.sample_tokens=0",
                 "--set", "train.eval_every=0"]
    p = run(binary, ["train", "--config", os.path.join(ROOT, "configs", "tiny_debug.json"), "--run-dir",
                     os.path.join(work, "c_square"), "--set", "train.max_steps=8"] + diverging)
    err_lines = [line for line in p.stderr.splitlines() if line.strip()]
    norms = [r["grad_norm"] for r in records(os.path.join(work, "c_square")) if r["type"] == "train"]
    check(p.returncode == 1 and len(err_lines) == 1 and "past 1.845e+19, where AdamW's fp32 squares may overflow" in err_lines[0]
          and all(n < 1.845e19 for n in norms),
          f"a gradient norm past fp32's squares stops the run, every step before it under the bound "
          f"({err_lines}, norms {norms})")

    # A periodic sample from weights that overflow (a diverging run kept alive by "skip") is recorded,
    # like the evaluation's NaN loss, and the run goes on to its summary and final weights: it ended
    # the run (exit 1, no summary, the steps since the last save lost).
    nan_sample = os.path.join(work, "c_sample")
    p = run(binary, ["train", "--config", os.path.join(ROOT, "configs", "tiny_debug.json"), "--run-dir", nan_sample,
                     "--set", "train.max_steps=10", "--set", "optim.lr=10", "--set", "optim.weight_decay=10", "--set",
                     "optim.grad_clip=0", "--set", "optim.eps=1e-30", "--set", "optim.decay=constant", "--set",
                     "train.nonfinite=skip", "--set", "train.eval_every=5", "--set", "log.sample_every=5", "--set",
                     "log.sample_tokens=8"])
    samples = [r for r in records(nan_sample) if r["type"] == "sample"]
    check(p.returncode == 0 and samples and all(r["text"] is None and "not finite" in r["nonfinite"] for r in samples)
          and records(nan_sample)[-1]["type"] == "summary" and os.path.exists(os.path.join(nan_sample,
                                                                                            "final.safetensors")),
          f"a sample from overflowing weights is recorded and the run finishes (exit {p.returncode}, {samples}, "
          f"{p.stderr.strip()[-300:]})")

    run_d = os.path.join(work, "d")
    skip_run = ["train", "--config", config_path, "--set", "train.max_steps=8", "--set", "train.nonfinite=skip",
                "--set", "checkpoint.every_steps=2", "--set", "checkpoint.keep_last=0", "--set", "train.eval_every=4"]
    p = run(binary, skip_run + ["--run-dir", run_d], {"ZT_TEST_NONFINITE_AT_STEP": "4"})
    summary = records(run_d)[-1]
    check(p.returncode == 0 and summary["skipped_steps"] == 1 and summary["steps"] == 7,
          "with nonfinite=skip the step is skipped and the run finishes")
    check(safetensors_all_finite(os.path.join(run_d, "final.safetensors")), "weights after a skipped step are finite")
    # A skipped step is still a step: the checkpoint and evaluation due after it are made, and a
    # resume from that checkpoint ends on the uninterrupted run's weights, bit for bit.
    saved = sorted(os.listdir(os.path.join(run_d, "checkpoints")))
    check([n for n in saved if n.startswith("step_")] == [f"step_0000000{k}" for k in (2, 4, 6, 8)] and
          any(r["type"] == "eval" and r["step"] == 4 for r in records(run_d)),
          f"the save and the evaluation due after a skipped step are made ({saved})")
    run_d4 = os.path.join(work, "d4")
    shutil.copytree(run_d, run_d4)
    os.remove(os.path.join(run_d4, "final.safetensors"))  # the resume's own, not the copy's
    p = run(binary, skip_run + ["--run-dir", run_d4, "--resume", os.path.join(run_d4, "checkpoints", "step_00000004")])
    resumed_weights = os.path.join(run_d4, "final.safetensors")
    same = os.path.exists(resumed_weights) and \
        tensors(os.path.join(run_d, "final.safetensors")) == tensors(resumed_weights)
    check(p.returncode == 0 and same,
          f"a resume from the skipped step's checkpoint ends on the same weights (exit {p.returncode}: "
          f"{p.stderr.strip()[-300:]})")
    # ... and on the same record: its last checkpoint says where the run is (tokens seen, samples,
    # the optimizer's own step) and what it skipped, as the uninterrupted run's does, and so does its
    # summary.
    def position(run_dir):
        with open(os.path.join(run_dir, "checkpoints", "step_00000008", "manifest.json")) as f:
            m = json.load(f)
        return ({k: m[k] for k in ("step", "tokens_seen", "next_sample_index", "optimizer_step")},
                {k: m["extra"][k] for k in ("skipped_steps", "consecutive_skips")})
    whole, resumed = position(run_d), position(run_d4)
    check(whole == resumed and whole[1]["skipped_steps"] == 1,
          f"the resumed run's last checkpoint keeps the uninterrupted run's position and skips ({resumed} vs {whole})")
    resumed_summary = records(run_d4)[-1]
    check(resumed_summary["type"] == "summary" and resumed_summary["skipped_steps"] == 1,
          f"the resumed run's summary counts the step skipped before it ({resumed_summary})")
    # A resume keeps the count of skipped steps in a row: one skipped before the save and one after
    # it are two in a row, past train.max_skipped_steps = 1, as in an uninterrupted run.
    run_s = os.path.join(work, "d_skip_resume")
    in_a_row = skip_run + ["--run-dir", run_s, "--set", "train.max_skipped_steps=1"]
    p = run(binary, in_a_row, {"ZT_TEST_NONFINITE_AT_STEP": "2"})
    check(p.returncode == 0, f"a run with one step skipped finishes ({p.stderr.strip()[-300:]})")
    p = run(binary, in_a_row + ["--resume", os.path.join(run_s, "checkpoints", "step_00000002")],
            {"ZT_TEST_NONFINITE_AT_STEP": "3"})
    err_lines = [line for line in p.stderr.splitlines() if line.strip()]
    check(p.returncode == 1 and len(err_lines) == 1 and "step 3: non-finite" in err_lines[0] and
          "2 in a row, past train.max_skipped_steps = 1" in err_lines[0],
          f"a skip after a resume counts the skip before it ({p.returncode}, {err_lines})")

    # log.final_weights = false (benchmarks): the run finishes, evaluates and says it wrote no weights.
    # An earlier run's final weights in the directory are kept aside at the fresh run's start (as
    # its log is), not left as if they were this run's.
    run_e = os.path.join(work, "e")
    os.makedirs(run_e)
    shutil.copy(os.path.join(run_a, "final.safetensors"), os.path.join(run_e, "final.safetensors"))
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_e, "--set", "train.max_steps=4",
                     "--set", "log.final_weights=false"])
    kept = [n for n in os.listdir(run_e) if n.startswith("final.") and n != "final.safetensors"]
    check(p.returncode == 0 and not os.path.exists(os.path.join(run_e, "final.safetensors")) and
          records(run_e)[-1]["type"] == "summary" and "no final.safetensors: log.final_weights = false" in p.stdout
          and len(kept) == 1 and kept[0].endswith(".safetensors") and "an earlier run's weights kept as" in p.stdout,
          f"log.final_weights=false: no final.safetensors, the summary and the printout say so (exit {p.returncode})")
    # ... and sample --run says why there are none.
    p = run(binary, ["sample", "--run", run_e, "--tokens", "4"])
    check(p.returncode == 2 and "has no final.safetensors (its config sets log.final_weights = false" in p.stderr,
          f"sample --run of such a run names the setting ({p.stderr.strip()[-200:]})")

    # Staging files a kill left (a lock's, LOCK.<host>.<pid>.tmp[.tmp], made while taking it; a log's
    # rewrite, metrics.jsonl.tmp) are removed by the next run that holds the folder: a lock's once
    # older than a taker ever keeps one (a minute: judged by age, as a pid says nothing in another
    # container or host), whichever host wrote it; a fresh one stays.
    host = socket.gethostname()
    old = time.time() - 120
    left = {os.path.join(run_e, f"RUN_LOCK.{host}.4242.tmp.tmp"): (old, False),
            os.path.join(run_e, f"RUN_LOCK.{host}.4242.tmp"): (old, False),
            os.path.join(run_e, "RUN_LOCK.other-host.4242.tmp"): (old, False),
            os.path.join(run_e, "checkpoints", f"LOCK.{host}.4242.tmp.takeover"): (old, False),
            os.path.join(run_e, "metrics.jsonl.tmp"): (time.time(), False),
            os.path.join(run_e, f"RUN_LOCK.{host}.4243.tmp"): (time.time(), True),
            os.path.join(run_e, "RUN_LOCK.notes.txt"): (old, True)}
    os.makedirs(os.path.join(run_e, "checkpoints"), exist_ok=True)
    for path, (mtime, _) in left.items():
        with open(path, "w") as f:
            f.write("{}")
        os.utime(path, (mtime, mtime))
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_e, "--set", "train.max_steps=2", "--set",
                     "checkpoint.at_end=true"])
    stayed = {os.path.basename(path): os.path.exists(path) for path in left}
    check(p.returncode == 0 and all(os.path.exists(path) == kept for path, (_, kept) in left.items()),
          f"a killed run's staging files are removed, a fresh lock staging file and other files kept ({stayed})")

    # 4. Nothing known at the start fails a run after training (issue 19): a sample prompt outside
    # the data's vocabulary and a checkpoint folder that cannot be made stop it before step 1,
    # naming the key; and the last step's weights (at_end checkpoint, final.safetensors) are saved
    # before its evaluation and sample, so neither can cost the trained model.
    run_f = os.path.join(work, "f")
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_f, "--set", "log.sample_prompt=~~"])
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    check(p.returncode == 2 and len(lines) == 1 and "log.sample_prompt" in lines[0] and "'~'" in lines[0]
          and not any(r["type"] == "train" for r in (records(run_f) if os.path.exists(
              os.path.join(run_f, "metrics.jsonl")) else [])),
          f"a prompt outside the vocabulary is refused before training ({lines[:1]})")
    # ... but only where the run samples: with log.sample_tokens = 0 the prompt is never used.
    run_g = os.path.join(work, "g")
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_g, "--set", "log.sample_prompt=~~",
                     "--set", "log.sample_tokens=0", "--set", "log.sample_every=2", "--set", "train.max_steps=4"])
    check(p.returncode == 0 and not any(r["type"] == "sample" for r in records(run_g)) and
          any(r["type"] == "eval" for r in records(run_g)),
          f"a run that samples nothing trains whatever its prompt, and writes no sample (exit {p.returncode}: "
          f"{p.stderr.strip()[-300:]})")
    blocker = os.path.join(work, "a_file")
    open(blocker, "w").close()
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_f,
                     "--set", f"checkpoint.dir={os.path.join(blocker, 'ckpts')}", "--set", "checkpoint.at_end=true"])
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    check(p.returncode == 2 and len(lines) == 1 and "checkpoint.dir" in lines[0],
          f"a checkpoint folder that cannot be made is refused before training ({lines[:1]})")
    # A --run-dir below a file is said of the run directory the user named, not of the checkpoint
    # folder made in it, whether or not the run saves.
    for saves in ("true", "false"):
        p = run(binary, ["train", "--config", config_path, "--run-dir", os.path.join(blocker, "run"), "--set",
                         f"checkpoint.save_on_signal={saves}", "--set", "train.max_steps=1"])
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        check(p.returncode == 2 and len(lines) == 1 and "run directory" in lines[0]
              and os.path.join(blocker, "run") in lines[0] and "checkpoint" not in lines[0],
              f"a --run-dir below a file is named as the run directory (save_on_signal={saves}: {lines[:1]})")
    # ... by a run that saves: one saving nothing never makes it, and is not refused for it.
    p = run(binary, ["train", "--config", config_path, "--run-dir", os.path.join(work, "saves_nothing"), "--set",
                     f"checkpoint.dir={os.path.join(blocker, 'ckpts')}", "--set", "checkpoint.at_end=false", "--set",
                     "checkpoint.every_steps=0", "--set", "checkpoint.save_on_signal=false", "--set",
                     "train.max_steps=2"])
    check(p.returncode == 0, f"a run that saves nothing trains beside a checkpoint.dir it cannot make ("
                             f"{p.stderr.strip()[-200:]})")
    # --resume latest where no folder is, or a file has the folder's name: said as it is.
    p = run(binary, ["train", "--config", config_path, "--run-dir", os.path.join(work, "no_folder"), "--resume",
                     "latest"])
    check(p.returncode == 2 and "no checkpoint to resume from" in p.stderr and "does not exist" in p.stderr,
          f"--resume latest with no checkpoint folder says so ({p.stderr.strip()[-200:]})")
    p = run(binary, ["train", "--config", config_path, "--run-dir", os.path.join(work, "file_folder"), "--set",
                     f"checkpoint.dir={blocker}", "--resume", "latest"])
    check(p.returncode == 2 and "is not a directory" in p.stderr,
          f"--resume latest with a file in the checkpoint folder's place says so ({p.stderr.strip()[-200:]})")
    run_g = os.path.join(work, "g")
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_g, "--set", "train.max_steps=4",
                     "--set", "checkpoint.at_end=true"])
    order = [(r["type"], r.get("step")) for r in records(run_g) if r["type"] in ("checkpoint", "eval", "sample")]
    check(p.returncode == 0 and order == [("checkpoint", 4), ("eval", 4), ("sample", 4)],
          f"the last step is saved before its evaluation and sample ({order})")
    # A global batch the config gave is what config.json keeps, not the grad_accum it made here: run
    # again with another micro-batch (or on other ranks), the batch stays.
    run_gb = os.path.join(work, "global_batch")
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_gb, "--set", "train.max_steps=1",
                     "--set", "train.global_batch_tokens=512"])
    with open(os.path.join(run_gb, "config.json")) as f:
        saved_train = json.load(f)["train"]
    check(p.returncode == 0 and saved_train.get("global_batch_tokens") == 512 and "grad_accum" not in saved_train,
          f"config.json keeps the global batch as given ({ {k: saved_train.get(k) for k in ('grad_accum', 'global_batch_tokens')} })")
    again = run(binary, ["train", "--config", os.path.join(run_gb, "config.json"), "--run-dir",
                         os.path.join(work, "global_batch_again"), "--set", "train.micro_batch=4"])
    check(again.returncode == 0 and "batch: 512 tokens/step" in again.stdout and "grad_accum 4" in again.stdout,
          f"its config.json run again with micro_batch 4 keeps 512 tokens a step "
          f"({[line for line in again.stdout.splitlines() if line.startswith('batch:')]})")
    sampled = run(binary, ["sample", "--run", run_gb, "--tokens", "5"])
    check(sampled.returncode == 0, f"and the run samples ({sampled.stderr.strip()[-200:]})")
    # Defaults that follow other keys (decay_steps from max_steps, min_lr from lr, seq_len from
    # block_size) are named in config.json's "derived": given again with another max_steps it decays
    # over the new run (decay_steps stayed 5, the warmup's, the rate at its floor from step 6 on).
    saved_doc = json.load(open(os.path.join(run_gb, "config.json")))
    saved_optim = saved_doc["optim"]
    longer = os.path.join(work, "global_batch_longer")
    p = run(binary, ["train", "--config", os.path.join(run_gb, "config.json"), "--run-dir", longer, "--set",
                     "train.max_steps=6"])
    rates = [r["lr"] for r in records(longer) if r["type"] == "train"]
    check(p.returncode == 0 and saved_optim.get("decay_steps") == 5 and "seq_len" in saved_train and
          sorted(saved_doc.get("derived", [])) == ["optim.decay_steps", "optim.min_lr", "train.seq_len"] and
          "optim.decay_steps = 6 (train.max_steps)" in p.stdout and len(rates) == 6,
          f"config.json names its derived defaults, which follow their keys when it is given again "
          f"({saved_doc.get('derived')}; rates {rates})")

    # final.safetensors is gathered and written a unit at a time: the run's workspace peak is the
    # step's plus one unit's fp32 values at most (the whole model was gathered first: 4 bytes a
    # parameter on every rank at the run's end).
    run_fw = os.path.join(work, "final_weights_peak")
    deep = ["--set", "model.n_layer=8", "--set", "train.max_steps=1"]
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_fw] + deep)
    m = run(binary, ["memory", "--config", config_path, "--ranks", "1", "--json"] + deep)
    if check(p.returncode == 0 and m.returncode == 0, f"an 8-layer run and its prediction ({p.stderr[-200:]})"):
        recs = records(run_fw)
        step_ws = next(r for r in recs if r["type"] == "memory")["measured_peak_bytes"][0]["workspace"]
        run_ws = next(r for r in recs if r["type"] == "summary")["memory_peak_bytes"]["workspace"]
        prediction = json.loads(m.stdout)
        unit_bytes, model_bytes = 4 * prediction["max_unit_numel"], 4 * prediction["params"]
        check(run_ws <= step_ws + unit_bytes < step_ws + model_bytes,
              f"the final weights' gather adds one unit's values at most ({run_ws} <= {step_ws} + {unit_bytes}; "
              f"the whole model: {model_bytes})")

    # A write of final.safetensors that fails (a full disk: /dev/full under its staging name) ends
    # the run in one line and leaves no staging file (one failing at its sync or close did).
    run_full = os.path.join(work, "disk_full")
    os.makedirs(run_full)
    os.symlink("/dev/full", os.path.join(run_full, "final.safetensors.tmp"))
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_full, "--set", "train.max_steps=1"])
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    check(p.returncode == 1 and len(lines) == 1 and "final weights not written" in lines[0]
          and "No space left" in lines[0] and not os.path.lexists(os.path.join(run_full, "final.safetensors.tmp"))
          and not os.path.exists(os.path.join(run_full, "final.safetensors")),
          f"a full disk at the final weights: one line, nothing left behind (exit {p.returncode}: {lines})")

    # A vocabulary without a newline: sample's default prompt (a newline) is named as the one refused.
    no_newline = os.path.join(work, "no_newline.txt")
    with open(no_newline, "w") as f:
        f.write("abc abcabc cab " * 300)
    run(binary, ["prepare", "--text", no_newline, "--out", os.path.join(work, "no_newline_data")])
    run_nl = os.path.join(work, "no_newline_run")
    run(binary, ["train", "--config", config_path, "--run-dir", run_nl, "--set", "train.max_steps=1", "--set",
                 f"data.dataset={os.path.join(work, 'no_newline_data')}", "--set", "log.sample_tokens=0"])
    p = run(binary, ["sample", "--run", run_nl, "--tokens", "3"])
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    check(p.returncode == 2 and len(lines) == 1 and "the default prompt (a newline)" in lines[0]
          and "--prompt" in lines[0], f"sample names its default prompt where the vocabulary lacks it ({lines})")

    # Resuming a finished run makes no second final evaluation or sample: the log keeps one of each.
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_g, "--set", "train.max_steps=4",
                     "--resume", "latest"])
    kinds = [(r["type"], r.get("step")) for r in records(run_g) if r["type"] in ("eval", "sample")]
    check(p.returncode == 0 and kinds == [("eval", 4), ("sample", 4)] and "had finished at step 4" in p.stdout,
          f"resuming a finished run logs its final evaluation and sample once ({kinds}; {p.stdout.strip()[-200:]})")
    # ... and says that this run, not the run, evaluated nothing, and why its peaks are below a step's.
    check("val loss: none in this run (the run had finished: its final evaluation is in metrics.jsonl)" in p.stdout
          and "no evaluation ran" not in p.stdout and
          "* measured other than predicted: no training step ran in this run, so none of a step's peaks were "
          "reached" in p.stdout, f"a finished run resumed says why it has no val loss and lower peaks "
                                 f"({p.stdout.strip()[-600:]})")
    # A kill after the last save left neither: the resume makes them.
    log_path = os.path.join(run_g, "metrics.jsonl")
    kept = [line for line in open(log_path) if json.loads(line)["type"] not in ("eval", "sample", "summary")]
    with open(log_path, "w") as f:
        f.writelines(kept)
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_g, "--set", "train.max_steps=4",
                     "--resume", "latest"])
    kinds = [(r["type"], r.get("step")) for r in records(run_g) if r["type"] in ("eval", "sample")]
    check(p.returncode == 0 and kinds == [("eval", 4), ("sample", 4)],
          f"resuming a finished run whose log lacks its final evaluation makes it ({kinds})")

    summary = records(run_g)[-1]
    check(summary["type"] == "summary" and summary["first_loss"] is None and summary["last_loss"] is None
          and summary["first_step"] == 0 and summary["last_step"] == 0 and "no step in this run" in p.stdout,
          f"a finished run resumed reports no losses rather than zeros ({summary})")

    # Truthful resumes: a mid-run resume labels its losses with their steps; a config that changes
    # the trajectory (seed, schedule, global batch) is refused, naming each change, unless asked.
    run_h = os.path.join(work, "h")
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_h, "--set", "train.max_steps=6",
                     "--set", "checkpoint.every_steps=3"])
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_h, "--set", "train.max_steps=6",
                     "--set", "checkpoint.every_steps=3", "--resume", os.path.join(run_h, "checkpoints", "step_00000003")])
    summary = records(run_h)[-1]
    check(p.returncode == 0 and summary["first_step"] == 4 and summary["last_step"] == 6
          and "(step 4) ->" in p.stdout and "(step 6)" in p.stdout,
          f"a mid-run resume labels its first loss step 4 ({summary.get('first_step')}, "
          f"{[l for l in p.stdout.splitlines() if 'train loss' in l]})")
    with open(os.path.join(run_h, "config.json")) as f:
        saved_config = f.read()
    # A trajectory change can be allowed; a checkpoint past max_steps has nothing to train either way.
    allow = "--allow-config-change"
    for change, fragment, hint in ((["--set", "train.seed=99"], "train.seed: 1337 -> 99", allow),
                                   (["--set", "optim.lr=0.01"], "optim.lr: 0.003 -> 0.01", allow),
                                   (["--set", "train.micro_batch=4"], "global batch", allow),
                                   (["--set", "data.order=sequential"], 'data.order: "random" -> "sequential"', allow),
                                   (["--set", "data.embedded_chars=300000"], "data.embedded_chars: 200000 -> 300000",
                                    allow),
                                   (["--set", "train.max_steps=2"], "past train.max_steps = 2",
                                    "raise train.max_steps"),
                                   # Another model: the key named, not two model sections printed whole.
                                   (["--set", "model.n_embd=64"], "(model.n_embd: 32 in the checkpoint, 64 in the "
                                    "config)", "resume with the checkpoint's model keys")):
        p = run(binary, ["train", "--config", config_path, "--run-dir", run_h, "--set", "train.max_steps=6",
                         "--resume", os.path.join(run_h, "checkpoints", "step_00000003"), *change])
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        check(p.returncode == 2 and len(lines) == 1 and fragment in lines[0] and hint in lines[0],
              f"a resume that changes {change[1]} is refused, naming it ({lines[:1]})")
    with open(os.path.join(run_h, "config.json")) as f:
        check(f.read() == saved_config, "the refused resumes leave the run's config.json as it was")
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_h, "--set", "train.max_steps=6",
                     "--resume", os.path.join(run_h, "checkpoints", "step_00000003"), "--set", "train.seed=99",
                     "--allow-config-change"])
    check(p.returncode == 0 and any(r["type"] == "config_change" and "train.seed: 1337 -> 99" in r["changes"][0]
                                    for r in records(run_h)),
          "--allow-config-change continues and records what changed")
    # ... also into a new run directory: the record in its own log, which is not set aside as
    # another run's (the record, written before that check, made the fresh log look like one).
    run_h2 = os.path.join(work, "h2")
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_h2, "--set", "train.max_steps=6",
                     "--resume", os.path.join(run_h, "checkpoints", "step_00000003"), "--set", "train.seed=99",
                     "--allow-config-change"])
    check(p.returncode == 0 and "another run's log" not in p.stdout and
          sorted(os.listdir(run_h2)).count("metrics.jsonl") == 1 and
          not any(n.startswith("metrics.") and n != "metrics.jsonl" for n in os.listdir(run_h2)) and
          [r["type"] for r in records(run_h2)][:2] == ["config_change", "resume"],
          f"a changed-config resume into a new directory logs the change there ({os.listdir(run_h2)})")

    # A resume from an older checkpoint: the later ones (the first trajectory's) go to superseded/,
    # out of keep_last's count and the folder's fallback; the first run's summary and a record a
    # kill cut short leave metrics.jsonl.
    run_k = os.path.join(work, "k")
    common = ["train", "--config", config_path, "--run-dir", run_k, "--set", "optim.decay_steps=8"]
    p = run(binary, common + ["--set", "train.max_steps=8", "--set", "checkpoint.every_steps=4"])
    with open(os.path.join(run_k, "metrics.jsonl"), "a") as f:
        f.write('{"type":"train","step":9,"lo')
    p = run(binary, common + ["--set", "train.max_steps=6", "--set", "checkpoint.every_steps=1", "--set",
                              "checkpoint.keep_last=2", "--resume",
                              os.path.join(run_k, "checkpoints", "step_00000004")])
    folder = os.path.join(run_k, "checkpoints")
    kept = sorted(d for d in os.listdir(folder) if d.startswith("step_")) if p.returncode == 0 else []
    aside = sorted(os.listdir(os.path.join(folder, "superseded"))) if p.returncode == 0 else []
    with open(os.path.join(folder, "latest")) as f:
        latest = f.read().strip()
    check(p.returncode == 0 and kept == ["step_00000005", "step_00000006"] and aside == ["step_00000008"]
          and latest == "step_00000006" and "superseded" in p.stdout,
          f"a resume from step 4 sets step 8 aside and keeps its own last two ({kept}, {aside}, {latest}, "
          f"{(p.stdout + p.stderr)[-300:]})")
    # Nothing deletes superseded/: what it has grown to is said and logged each time it grows.
    aside_bytes = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(folder, "superseded"))
                      for f in fs)
    logged = [r for r in records(run_k) if r["type"] == "superseded_checkpoints"]
    check(p.returncode == 0 and "which now holds 1 checkpoint(s)" in p.stdout and len(logged) == 1
          and logged[0]["superseded_checkpoints"] == 1 and logged[0]["superseded_bytes"] == aside_bytes,
          f"setting aside says what superseded/ holds ({logged}, {aside_bytes} bytes)")
    # Said as they move, before the log is cut (a failure there, a full disk's, left `latest`
    # re-pointed and the move unsaid).
    moved_at, cut_at = p.stdout.find("moved step_00000008"), p.stdout.find("metrics.jsonl: dropped")
    check(0 <= moved_at < cut_at, f"the move is said before the log is cut ({moved_at}, {cut_at}: {p.stdout[-600:]})")
    # `latest` not re-pointed (its staging name taken): the error says what moved, and the next
    # --resume latest why it passes over the checkpoint `latest` names.
    run_m = os.path.join(work, "m")
    common = ["train", "--config", config_path, "--run-dir", run_m, "--set", "optim.decay_steps=8", "--set",
              "checkpoint.every_steps=2", "--set", "train.max_steps=4"]
    run(binary, common)
    os.makedirs(os.path.join(run_m, "checkpoints", "latest.tmp", "taken"))
    p = run(binary, common + ["--resume", os.path.join(run_m, "checkpoints", "step_00000002")])
    check(p.returncode != 0 and "after moving step_00000004 to " in p.stderr and "still names step_00000004" in p.stderr,
          f"a rollback that cannot re-point latest says what it moved ({p.stderr[-300:]})")
    shutil.rmtree(os.path.join(run_m, "checkpoints", "latest.tmp"))
    p = run(binary, common + ["--resume", "latest"])
    check(p.returncode == 0 and "step_00000004: moved to " in p.stdout and "by a resume from an earlier step" in p.stdout,
          f"and the next resume says where latest's checkpoint went ({p.stdout[-400:]})")
    with open(os.path.join(run_k, "metrics.jsonl")) as f:
        lines = f.read().splitlines()
    parsed = [json.loads(line) for line in lines if line.startswith("{") and line.endswith("}")]
    check(len(parsed) == len(lines) and [r["last_step"] for r in parsed if r["type"] == "summary"] == [6],
          f"metrics.jsonl: every line whole, one summary, the resumed run's ({len(lines) - len(parsed)} bad lines)")

    # The abandoned trajectory resumed in turn from superseded/: its ancestors by save id are
    # followed through superseded/, so the folder's step 2 (which step 6 descends from through the
    # step 4 set aside) stays and only the rollback's own step 4 goes aside.
    run_r = os.path.join(work, "r")
    common = ["train", "--config", config_path, "--run-dir", run_r, "--set", "optim.decay_steps=6", "--set",
              "checkpoint.every_steps=2", "--set", "checkpoint.keep_last=0"]
    run(binary, common + ["--set", "train.max_steps=6"])
    folder = os.path.join(run_r, "checkpoints")
    back = run(binary, common + ["--set", "train.max_steps=4", "--resume", os.path.join(folder, "step_00000002")])
    again = run(binary, common + ["--set", "train.max_steps=6", "--resume",
                                  os.path.join(folder, "superseded", "step_00000006")])
    finals = sorted(n for n in os.listdir(run_r) if n.startswith("final."))
    check(back.returncode == 0 and "the weights after 6 steps, past the 2 resumed from, kept as" in back.stdout and
          "another trajectory's weights after 4 steps, kept as" in again.stdout and len(finals) == 3 and
          "final.safetensors" in finals,
          f"a rollback keeps the abandoned final weights aside, as a fresh run does ({finals}, {back.stdout[-300:]})")
    # The resumed checkpoint's own final weights stay: resuming a finished run again and again makes
    # no copies (each resume kept one).
    run_f = os.path.join(work, "f")
    finished = ["train", "--config", config_path, "--run-dir", run_f, "--set", "train.max_steps=2", "--set",
                "checkpoint.at_end=true"]
    run(binary, finished)
    again_f = [run(binary, finished + ["--resume", "latest"]) for _ in range(2)]
    finals = sorted(n for n in os.listdir(run_f) if n.startswith("final."))
    check(all(r.returncode == 0 for r in again_f) and finals == ["final.safetensors"],
          f"resuming a finished run keeps no copy of its own final weights ({finals})")
    kept = sorted(d for d in os.listdir(folder) if d.startswith("step_"))
    aside = sorted(os.listdir(os.path.join(folder, "superseded")))
    check(back.returncode == 0 and again.returncode == 0 and kept == ["step_00000002"] and
          aside == ["step_00000004", "step_00000004.2", "step_00000006"] and "moved step_00000004 (" in again.stdout,
          f"a resume from superseded/ keeps its ancestors in the folder (kept {kept}, aside {aside}, "
          f"{(again.stdout + again.stderr)[-300:]})")

    # Changes a resume allows whose effects it says: another micro-batch at the same global batch
    # evaluates on other windows (a note and the config_change record); another seq_len (with the
    # flag) keeps the data position as a count of windows.
    run_w = os.path.join(work, "w")
    common = ["train", "--config", config_path, "--run-dir", run_w, "--set", "optim.decay_steps=8", "--set",
              "train.max_steps=4", "--set", "checkpoint.every_steps=2"]
    run(binary, common)
    step2 = os.path.join(run_w, "checkpoints", "step_00000002")
    halves = run(binary, common + ["--set", "train.micro_batch=4", "--set", "train.grad_accum=2", "--resume", step2])
    tokens = [(r["step"], r["tokens"]) for r in records(run_w) if r["type"] == "train"]
    check(tokens == [(s, 8 * 32) for s in range(1, 5)],
          f"a step of 2 micro-batches of 4 windows counts the global batch's tokens, as one of 8 ({tokens})")
    changes = [r for r in records(run_w) if r["type"] == "config_change"]
    window_note = "the evaluation's windows (train.eval_batches x train.micro_batch): 4 x 8 = 32 -> 4 x 4 = 16"
    check(halves.returncode == 0 and window_note in halves.stdout and "not comparable" in halves.stdout and changes
          and any(window_note in c for c in changes[-1].get("evaluation_data", [])),
          f"another micro-batch's evaluation windows are said and logged ({(halves.stdout + halves.stderr)[-400:]})")
    shorter = run(binary, common + ["--set", "train.seq_len=16", "--allow-config-change", "--resume", step2])
    check(shorter.returncode == 0 and "train.seq_len: 32 -> 16 (the data position is kept as a count of windows"
          in shorter.stdout, f"another seq_len says where the data position goes ({shorter.stdout[-400:]})")
    # Its samples keep to the run's 16 positions of the model's 32: a draw past them slides the
    # window, said (it slid in silence, and the export's samples, over all 32, drew other text).
    slid_note = "past 16 positions each token attended to the last 16 only, the run's train.seq_len (the model has 32"
    within, past = (run(binary, ["sample", "--run", run_w, "--tokens", n, "--temperature", "0"]) for n in ("16", "17"))
    check(within.returncode == 0 and past.returncode == 0 and "attended to the last" not in within.stderr and
          slid_note in past.stderr,
          f"a sample past the run's seq_len says its window slid ({within.stderr.strip()[-200:]!r}; "
          f"{past.stderr.strip()[-300:]!r})")
    # A finished run that saved no checkpoint: --resume says why there is none. Its one warm-up
    # step profiled nothing, and op_profile.json names no first profiled step.
    run_n = os.path.join(work, "n")
    run(binary, ["train", "--config", config_path, "--run-dir", run_n, "--set", "train.max_steps=1", "--set",
                 "log.profile_ops=true"])
    with open(os.path.join(run_n, "op_profile.json")) as f:
        profile = json.load(f)
    check(profile.get("first_profiled_step", 0) is None, f"one step profiles nothing ({profile.get('first_profiled_step')})")
    # Where op_profile.json cannot be written: a folder by its name is refused before the first
    # step; one in the way of its staging file costs the profile only, after the weights (it was
    # written first, and its failure lost a finished run's final.safetensors).
    blocked = os.path.join(work, "profile_blocked")
    os.makedirs(os.path.join(blocked, "op_profile.json"))
    refused = run(binary, ["train", "--config", config_path, "--run-dir", blocked, "--set", "train.max_steps=2",
                           "--set", "log.profile_ops=true"])
    check(refused.returncode == 2 and "op_profile.json: is a directory, not a regular file" in refused.stderr and
          not os.path.exists(os.path.join(blocked, "metrics.jsonl")),
          f"a folder named op_profile.json: refused before training ({refused.returncode}, {refused.stderr.strip()})")
    late = os.path.join(work, "profile_late")
    os.makedirs(os.path.join(late, "op_profile.json.tmp"))
    failed = run(binary, ["train", "--config", config_path, "--run-dir", late, "--set", "train.max_steps=2",
                          "--set", "log.profile_ops=true"])
    check(failed.returncode == 1 and "cannot write the op profile (the run's weights and checkpoints are written)"
          in failed.stderr and os.path.exists(os.path.join(late, "final.safetensors")) and
          os.path.isdir(os.path.join(late, "op_profile.json.tmp")),  # the folder in its way is not removed
          f"an op profile that cannot be written at the end: the final weights are ({failed.returncode}, "
          f"{failed.stderr.strip()[-300:]})")
    # A symlinked op_profile.json: the file it names gets the profile, the link stays (as metrics.jsonl's).
    linked = os.path.join(work, "profile_linked")
    os.makedirs(linked)
    with open(os.path.join(work, "shared_profile.json"), "w") as f:
        f.write("{}")
    os.symlink("../shared_profile.json", os.path.join(linked, "op_profile.json"))
    through = run(binary, ["train", "--config", config_path, "--run-dir", linked, "--set", "train.max_steps=2",
                           "--set", "log.profile_ops=true"])
    with open(os.path.join(work, "shared_profile.json")) as f:
        shared = f.read()
    check(through.returncode == 0 and os.path.islink(os.path.join(linked, "op_profile.json")) and
          '"ops"' in shared, f"a symlinked op_profile.json is written through its link ({through.returncode}, "
                             f"{through.stderr.strip()[-200:]})")
    none = run(binary, ["train", "--config", config_path, "--run-dir", run_n, "--set", "train.max_steps=4",
                        "--resume", "latest"])
    slash = run(binary, ["train", "--config", config_path, "--run-dir", run_n, "--set", "train.max_steps=4",
                         "--resume", os.path.join(run_n, "checkpoints") + "/"])
    check(none.returncode == 2 and slash.returncode == 2 and
          all("none was saved there: a run saves them with checkpoint.every_steps" in p.stderr for p in (none, slash)),
          f"a resume of a run that saved nothing says how to save ({none.stderr.strip()}; {slash.stderr.strip()})")
    # Its only save cut off (a kill during it leaves the staging directory): said as that, not as a
    # config that saves nothing (the hint sent a run saving every 20 steps to turn saves on).
    os.makedirs(os.path.join(run_n, "checkpoints", ".tmp-step_00000003"))
    cut = run(binary, ["train", "--config", config_path, "--run-dir", run_n, "--set", "train.max_steps=4",
                       "--resume", "latest"])
    verify = run(binary, ["ckpt", "verify", os.path.join(run_n, "checkpoints")])
    check(cut.returncode == 2 and verify.returncode == 2 and
          all("the save begun there (step 3, .tmp-step_00000003) was cut off before it completed" in p.stderr and
              "checkpoint.every_steps" not in p.stderr for p in (cut, verify)),
          f"a resume of a run whose only save was cut off says so ({cut.stderr.strip()}; {verify.stderr.strip()})")
    # A damaged newest checkpoint that --resume latest falls back past is set aside as damaged, not
    # as "another trajectory's" (it is this one's).
    run_d = os.path.join(work, "damaged")
    run(binary, ["train", "--config", config_path, "--run-dir", run_d, "--set", "train.max_steps=2", "--set",
                 "checkpoint.every_steps=1"])
    rank_file = os.path.join(run_d, "checkpoints", "step_00000002", "rank_00000.bin")
    with open(rank_file, "r+b") as f:
        f.seek(os.path.getsize(rank_file) // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 1]))
    fell_back = run(binary, ["train", "--config", config_path, "--run-dir", run_d, "--set", "train.max_steps=3",
                             "--set", "checkpoint.every_steps=1", "--resume", "latest"])
    aside = [r for r in records(run_d) if r["type"] == "superseded_checkpoints"]
    check(fell_back.returncode == 0 and "moved step_00000002 (damaged: not usable" in fell_back.stdout and
          "another trajectory" not in fell_back.stdout and len(aside) == 1 and
          aside[0]["reason"].startswith("damaged:") and aside[0]["moved"] == ["step_00000002"],
          f"a damaged checkpoint fallen back past is set aside as damaged ({fell_back.stdout[-600:]}; {aside})")

    # No steps with checkpoint.at_end: step 0, the weights as set up, which ckpt export converts.
    run_z = os.path.join(work, "zero_steps")
    p = run(binary, ["train", "--config", config_path, "--run-dir", run_z, "--set", "train.max_steps=0", "--set",
                     "checkpoint.at_end=true"])
    e = run(binary, ["ckpt", "export", os.path.join(run_z, "checkpoints"), "--format", "hf", "--out",
                     os.path.join(work, "zero_steps_hf")])
    check(p.returncode == 0 and os.path.isdir(os.path.join(run_z, "checkpoints", "step_00000000")) and
          e.returncode == 0 and "from step 0" in e.stdout,
          f"max_steps 0 with at_end saves step 0, which exports ({(p.stdout + p.stderr)[-200:]} {e.stderr[-200:]})")
    check("train loss: no step in this run (train.max_steps = 0)" in p.stdout,
          "a fresh run of no steps says why it has no loss (it said it was resumed)")
    # Weights given to --run that another flag reads are named with that flag (it said "has no
    # final.safetensors", or could not open a checkpoint folder's config.json); a Hugging Face folder
    # given to --ckpt is named too.
    hf_out, ckpt_folder = os.path.join(work, "zero_steps_hf"), os.path.join(run_z, "checkpoints")
    for given, words in ((hf_out, f"a Hugging Face folder, not a run directory: --from {hf_out} reads"),
                         (ckpt_folder, f"a zerotrain checkpoint folder, not a run directory: --ckpt {ckpt_folder}"),
                         (os.path.join(ckpt_folder, "step_00000000"), "a zerotrain checkpoint, not a run directory"),
                         (os.path.join(hf_out, "config.json"),
                          f"a file, not a run directory (it is in the Hugging Face folder {hf_out}: --from {hf_out})"),
                         (os.path.join(run_z, "config.json"),
                          f"a file, not a run directory (it is in the run directory {run_z}: --run {run_z})")):
        for command in (["sample", "--tokens", "2"], ["eval", "--tokens", given]):
            w = run(binary, [command[0], "--run", given, *command[1:]])
            check(w.returncode == 2 and words in w.stderr and len(w.stderr.strip().splitlines()) == 1,
                  f"{command[0]} --run {os.path.basename(given)}: named with the flag that reads it ({w.stderr.strip()})")
    # A file inside a checkpoint, or beside a checkpoint folder's "latest", names the checkpoint
    # with --ckpt (it pointed to --from as an llm.c model file).
    step_dir = os.path.join(ckpt_folder, "step_00000000")
    for given, words in ((os.path.join(step_dir, "manifest.json"),
                          f"(it is in a zerotrain checkpoint {step_dir}: --ckpt {step_dir})"),
                         (os.path.join(ckpt_folder, "latest"),
                          f"(it is in a zerotrain checkpoint folder {ckpt_folder}: --ckpt {ckpt_folder})")):
        w = run(binary, ["eval", "--ckpt", given, "--val"])
        check(w.returncode == 2 and "a file, not a checkpoint or checkpoint folder " + words in w.stderr,
              f"eval --ckpt {os.path.basename(given)}: the checkpoint holding it named ({w.stderr.strip()})")
    # --dtype reads fp32 as the config keys and ckpt export do.
    w = run(binary, ["sample", "--ckpt", ckpt_folder, "--tokens", "2", "--dtype", "fp32"])
    check(w.returncode == 0, f"sample --dtype fp32 is f32 ({w.stderr.strip()[-200:]})")
    w = run(binary, ["sample", "--ckpt", hf_out, "--tokens", "2"])
    check(w.returncode == 2 and "a Hugging Face folder: eval/sample --from and train.init_from read it" in w.stderr,
          f"sample --ckpt of a Hugging Face folder: --from named ({w.stderr.strip()})")

    # A byte-level vocabulary's sample cuts characters short: written to metrics.jsonl with U+FFFD,
    # where it used to end the run (the JSON writer refused the bytes).
    text_path = os.path.join(work, "bytes.txt")
    with open(text_path, "w", encoding="utf-8") as f:
        f.write("héllo wörld, ñandú çà et là. " * 2000)
    p = run(binary, ["prepare", "--text", text_path, "--out", os.path.join(work, "bytes"), "--level", "byte"])
    run_b = os.path.join(work, "byte_samples")
    p = subprocess.run([binary, "train", "--config", config_path, "--run-dir", run_b, "--set",
                        f"data.dataset={os.path.join(work, 'bytes')}", "--set", "model.vocab_size=256", "--set",
                        "train.max_steps=3", "--set", "log.sample_tokens=64", "--set", "log.sample_every=1"],
                       capture_output=True, text=True, errors="replace", timeout=600)
    samples = [r["text"] for r in records(run_b) if r["type"] == "sample"] if p.returncode == 0 else []
    check(p.returncode == 0 and len(samples) == 3 and any("\ufffd" in t for t in samples),
          f"byte-level samples cut short are logged with U+FFFD and the run goes on ({p.returncode}, "
          f"{(p.stdout + p.stderr)[-300:] if p.returncode else samples[:1]})")

    # 5. Batch terms that disagree.
    p = run(binary, ["train", "--config", config_path, "--run-dir", os.path.join(work, "e"),
                     "--set", "train.global_batch_tokens=1000"])
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    check(p.returncode == 2 and len(lines) == 1 and "train.global_batch_tokens" in lines[0],
          f"inconsistent batch terms: exit 2, one line ({lines[:1]})")

    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
