#!/usr/bin/env python3
"""tools/bench_gpu.py's parts that run without a GPU: its parameter count (the MFU numerator) equals
the engine's own table for GPT-2 124M, the token files it writes are ones zerotrain trains on, the
per-op summary it prints reads the op_profile.json such a run writes with log.profile_ops, and on a
machine without a GPU it stops with one line and a non-zero exit instead of a traceback; with the
engines faked, the interleaved order and its partial reports (a failed or cut-short run keeps what
was measured); and its real engines' plumbing on the CPU (zerotrain on a small model, a PyTorch
worker over its pipe, llm.c's step lines from a stand-in)."""
import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.dirname(HERE))
import bench_gpu  # noqa: E402
import gpt2_bench_engines  # noqa: E402
import bench_harness  # noqa: E402
from repo_commit import binary_commit  # noqa: E402
from check_report import Checks  # noqa: E402


class FakeEngine:
    """An engine that records when it runs; fails to start, or raises inside a round, on request."""

    def __init__(self, name, ms, order, fail_start=False, interrupt_at=None, seconds=0.0, start_seconds=0.0):
        self.name, self.label, self.ms, self.order = name, f"fake {name}", ms, order
        self.fail_start, self.interrupt_at, self.rounds, self.seconds = fail_start, interrupt_at, 0, seconds
        self.start_seconds = start_seconds

    def start(self, ctx):
        self.order.append(f"start {self.name}")
        time.sleep(self.start_seconds)
        if self.fail_start:
            raise bench_harness.EngineError("torch.compile failed")

    def run(self, ctx, warmup, steps, profile=False):
        self.rounds += 1
        if self.interrupt_at == self.rounds:
            raise KeyboardInterrupt  # the device call's time limit
        self.order.append(self.name)
        time.sleep(self.seconds)
        return {"step_ms": [self.ms] * steps, "losses": [1.0] * (warmup + steps)}

    def stop(self):
        pass


def check_interleaving_and_partial_reports(checks):
    """main() with the engines faked: they run interleaved, each round one engine later (A B C B C A), a
    PyTorch anchor that fails
    to start is a failed row while the rest still run, the ratios come from the rows measured, and
    the JSON on disk after a call cut short (in round 2) holds round 1's figures."""
    real = bench_gpu.make_engines
    order = []
    try:
        with tempfile.TemporaryDirectory() as work:
            out = os.path.join(work, "bench.json")
            bench_gpu.make_engines = lambda: {e.name: e for e in [
                FakeEngine("zerotrain-s0", 100.0, order), FakeEngine("pytorch", 110.0, order),
                FakeEngine("pytorch-max-autotune-cudnn", 0.0, order, fail_start=True),
                FakeEngine("llmc", 105.0, order), FakeEngine("zerotrain-s3", 104.0, order)]}
            engines = ["zerotrain-s0", "pytorch", "pytorch-max-autotune-cudnn", "llmc", "zerotrain-s3"]
            bench_gpu.main(["--fake-device", "NVIDIA H100 80GB HBM3", "--rounds", "2", "--steps", "3", "--warmup", "1",
                            "--no-profile", "--out", out, "--engines", *engines])
            with open(out) as f:
                report = json.load(f)
            ran = ["zerotrain-s0", "pytorch", "llmc", "zerotrain-s3"]
            # Round 2 starts one engine later (the failed anchor's turn is skipped).
            expected = ran + ["pytorch", "llmc", "zerotrain-s3", "zerotrain-s0"]
            starts = [e for e in order if e.startswith("start ")]
            blocks = [e for e in order if not e.startswith("start ")]
            checks.check(blocks == expected, f"the engines run interleaved, each round one engine later ({blocks})")
            checks.check(order[:4] == ["start zerotrain-s0", "zerotrain-s0", "start pytorch", "pytorch"] and
                         len(starts) == 5, f"each engine starts just before its first block, once ({order[:8]})")
            rows = {r["name"]: r for r in report["rows"]}
            checks.check(report["complete"] and "error" in rows["pytorch-max-autotune-cudnn"] and
                         all("tokens_per_s" in rows[n] for n in ran),
                         "an anchor that fails to start is a failed row and the rest still run")
            ratios = report["ratios"]
            checks.check(abs(ratios["stage0_over_best_pytorch_tokens_per_s"] - 110 / 100) < 1e-12 and
                         abs(ratios["stage0_over_llmc_tokens_per_s"] - 105 / 100) < 1e-12 and
                         abs(ratios["stage3_collectives_over_stage0_tokens_per_s"] - 100 / 104) < 1e-12,
                         f"the target ratios come from the rows that ran ({ratios})")
            checks.check(all(len(rows[n]["rounds"]) == 2 and "gpu_state_before" in rows[n]["rounds"][0] and
                             "gpu_during" in rows[n]["rounds"][0] for n in ran),
                         "every block records the GPU's state before, during and after")
            s0 = rows["zerotrain-s0"]
            checks.check(abs(s0["mfu"] - s0["tokens_per_s"] * report["flops_per_token"] / 989e12) < 1e-12 and
                         report["peak_bf16_flops"] == 989e12 and "H100" in report["peak_source"],
                         "MFU by 6N + 6LCT over the H100 SXM's 989 TFLOP/s, taken from the device's name")
            paired = ratios.get("stage0_over_llmc_same_round", {})
            checks.check(paired.get("rounds") == 2 and abs(paired.get("median", 0) - 1.05) < 1e-12 and
                         [r["position"] for r in rows["zerotrain-s0"]["rounds"]] == [0, 4],
                         f"each target ratio comes with its same-round ratios, each block with its position "
                         f"in the round ({paired})")
            reasons = ratios.get("not_valid_because", [])
            checks.check(ratios.get("valid_for_targets") is False and ratios.get("best_pytorch_missing_rows") ==
                         ["pytorch-max-autotune-cudnn"] and any("fewer than 3 rounds" in r for r in reasons),
                         f"and the report says it cannot judge the targets, and why ({reasons})")
            # A card the peak table does not name: no MFU claimed, and the targets not judged, unless
            # --peak-tflops states the denominator.
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                bench_gpu.main(["--fake-device", "Fake GPU", "--rounds", "1", "--steps", "3", "--warmup", "1",
                                "--no-profile", "--out", out, "--engines", "zerotrain-s0", "pytorch"])
            with open(out) as f:
                unknown = json.load(f)
            checks.check(unknown["peak_bf16_flops"] is None and unknown["rows"][0]["mfu"] is None and
                         "Fake GPU" in unknown["peak_source"] and " n/a" in printed.getvalue() and
                         any("peak FLOP/s is not known" in r for r in unknown["ratios"]["not_valid_because"]),
                         f"an unknown card gets no MFU, says why, and judges no target ({unknown['peak_source']})")
            bench_gpu.main(["--fake-device", "Fake GPU", "--peak-tflops", "500", "--rounds", "1", "--steps", "3",
                            "--warmup", "1", "--no-profile", "--out", out, "--engines", "zerotrain-s0", "pytorch"])
            with open(out) as f:
                stated = json.load(f)
            checks.check(stated["peak_bf16_flops"] == 500e12 and stated["peak_source"] == "--peak-tflops" and
                         abs(stated["rows"][0]["mfu"] - stated["rows"][0]["tokens_per_s"] *
                             stated["flops_per_token"] / 500e12) < 1e-12,
                         "--peak-tflops states the denominator for such a card")
            order.clear()
            cut = {e.name: e for e in [FakeEngine("zerotrain-s0", 100.0, order, interrupt_at=2),
                                       FakeEngine("pytorch", 110.0, order)]}
            bench_gpu.make_engines = lambda: cut
            try:
                bench_gpu.main(["--fake-device", "Fake GPU", "--rounds", "3", "--steps", "3", "--warmup", "1",
                                "--no-profile", "--out", out, "--engines", "zerotrain-s0", "pytorch"])
            except KeyboardInterrupt:
                pass
            with open(out) as f:
                report = json.load(f)
            cut_rows = {r["name"]: r for r in report["rows"]}
            checks.check(not report["complete"] and len(cut_rows["zerotrain-s0"]["rounds"]) == 1 and
                         len(cut_rows["pytorch"]["rounds"]) == 2 and
                         all("tokens_per_s" in r for r in report["rows"]) and
                         "stage0_over_best_pytorch_tokens_per_s" in report["ratios"],
                         "a call cut short in round 2 leaves the blocks run and their ratios on disk")
            # A time limit: round 1 (two blocks of 0.12 s) leaves too little of 0.3 s for another
            # round, or for the profiles (they want a quarter of the limit).
            timed = {e.name: e for e in [FakeEngine("zerotrain-s0", 100.0, order, seconds=0.12),
                                         FakeEngine("pytorch", 110.0, order, seconds=0.12)]}
            bench_gpu.make_engines = lambda: timed
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                bench_gpu.main(["--fake-device", "Fake GPU", "--rounds", "3", "--steps", "3", "--warmup", "1",
                                "--time-limit", "0.3", "--out", out, "--engines", "zerotrain-s0", "pytorch"])
            with open(out) as f:
                report = json.load(f)
            checks.check(report["complete"] and report["rounds_run"] == 1 and
                         all(len(r["rounds"]) == 1 and "tokens_per_s" in r for r in report["rows"]),
                         f"a time limit ends on whole rounds (rounds run {report.get('rounds_run')})")
            checks.check("no per-op profile runs" in printed.getvalue() and
                         "stopping after 1 of 3 rounds" in printed.getvalue(),
                         "and says that it skipped the profiles and further rounds")
            # The per-op profiles run once, right after round 1 (a budget cut short later keeps them).
            order.clear()
            two = [FakeEngine("zerotrain-s0", 100.0, order), FakeEngine("pytorch", 110.0, order)]
            args = argparse.Namespace(rounds=3, warmup=1, steps=2, time_limit=None)
            bench_gpu.interleave(two, [{"name": e.name, "label": e.label, "rounds": []} for e in two],
                                 bench_gpu.Context(args, work, work), 1024, 1.0, lambda: None,
                                 lambda: order.append("profiles"))
            blocks = [e for e in order if not e.startswith("start ")]
            checks.check(blocks == ["zerotrain-s0", "pytorch", "profiles", "pytorch", "zerotrain-s0", "zerotrain-s0",
                                    "pytorch"], f"the profiles run once, after round 1 ({blocks})")
            # A slow start (a compile) and a slow profile are paid once: the next round's cost is its
            # blocks' (it was the whole time so far over the rounds run: one round where three fit).
            order.clear()
            slow = [FakeEngine("zerotrain-s0", 100.0, order, seconds=0.02, start_seconds=0.3),
                    FakeEngine("pytorch", 110.0, order, seconds=0.02)]
            args = argparse.Namespace(rounds=3, warmup=1, steps=2, time_limit=0.6)
            ran_rounds = bench_gpu.interleave(slow, [{"name": e.name, "label": e.label, "rounds": []} for e in slow],
                                              bench_gpu.Context(args, work, work), 1024, 1.0, lambda: None,
                                              lambda: time.sleep(0.1))
            checks.check(ran_rounds == 3, f"a slow start and profile do not cut the rounds ({ran_rounds} of 3)")
    finally:
        bench_gpu.make_engines = real


def check_target_validity(checks):
    """valid_for_targets only where every target can be judged: each target's rows ran, 3 rounds or
    more (MFU on stage 0's rounds alone: one round said valid where no anchor ran)."""
    def row(name, tokens_per_s, rounds):
        return {"name": name, "tokens_per_s": tokens_per_s, "rounds_measured": rounds, "mfu": 0.45,
                "rounds": [{"round": i, "median_ms": 1e3 / tokens_per_s} for i in range(rounds)]}

    alone = bench_gpu.ratios_of([row("zerotrain-s0", 100.0, 1)])
    reasons = alone.get("not_valid_because", [])
    checks.check(alone["valid_for_targets"] is False and "stage0_mfu: fewer than 3 rounds" in reasons and
                 sum("its rows did not both run" in r for r in reasons) == 3,
                 f"stage 0 alone, one round: no target judged, each reason said ({reasons})")
    full = [row("zerotrain-s0", 110.0, 3), row("pytorch", 100.0, 3), row("pytorch-max-autotune-cudnn", 95.0, 3),
            row("llmc", 105.0, 3), row("zerotrain-s3", 104.0, 3)]
    every = bench_gpu.ratios_of(full)
    checks.check(every["valid_for_targets"] is True and "not_valid_because" not in every,
                 f"every target's rows over 3 rounds: judged ({every.get('not_valid_because')})")
    no_llmc = bench_gpu.ratios_of([r for r in full if r["name"] != "llmc"])
    checks.check(no_llmc["valid_for_targets"] is False and no_llmc["not_valid_because"] ==
                 ["stage0_over_llmc_tokens_per_s: its rows did not both run"],
                 f"a missing anchor is named ({no_llmc.get('not_valid_because')})")
    # Counts that measure nothing are refused before any work, naming the flag (--steps 0 was a
    # traceback; --rounds 0 a report marked complete with nothing measured).
    for flags, named in ((["--steps", "0"], "--steps"), (["--rounds", "0"], "--rounds"), (["--warmup", "-1"], "--warmup"),
                         (["--steps", "two"], "--steps")):
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said):
                bench_gpu.main(["--fake-device", "Fake GPU", "--no-profile", *flags])
            code = 0
        except SystemExit as e:
            code = e.code
        lines = said.getvalue().strip().splitlines()
        checks.check(code == 2 and len(lines) == 1 and lines[0].startswith("bench_gpu: ") and f"argument {named}:" in
                     lines[0], f"{' '.join(flags)} refused in one line naming the flag "
                     f"(exit {code}: {said.getvalue().strip()[-200:]})")


def check_time_limit_bounds_a_compile(checks, work):
    """A PyTorch worker that never answers (a max-autotune compile longer than the call, its tuning
    logs on stderr) is stopped at the time limit: its row says so with the log's tail, the engines
    after it are marked not reached, and the benchmark still writes its report and prints its table
    instead of being killed by the caller's timeout."""
    silent = os.path.join(work, "silent_python")
    with open(silent, "w") as f:
        f.write("#!/bin/sh\necho 'AUTOTUNE mm(16384x768, 768x3072)' >&2\nexec sleep 60\n")
    os.chmod(silent, 0o755)
    real = bench_gpu.make_engines
    order = []
    try:
        bench_gpu.make_engines = lambda: {e.name: e for e in [
            FakeEngine("zerotrain-s0", 100.0, order),
            gpt2_bench_engines.Torch("pytorch-max-autotune-cudnn", "max-autotune", "cudnn"),
            FakeEngine("llmc", 105.0, order)]}
        out = os.path.join(work, "bounded.json")
        printed = io.StringIO()
        began = time.monotonic()
        with contextlib.redirect_stdout(printed):
            bench_gpu.main(["--fake-device", "Fake GPU", "--rounds", "2", "--steps", "3", "--warmup", "1",
                            "--no-profile", "--python", silent, "--time-limit", "2", "--out", out,
                            "--engines", "zerotrain-s0", "pytorch-max-autotune-cudnn", "llmc"])
        took = time.monotonic() - began
        with open(out) as f:
            report = json.load(f)
        rows = {r["name"]: r for r in report["rows"]}
        autotune = rows["pytorch-max-autotune-cudnn"].get("error", "")
        checks.check(took < 20, f"the silent worker is stopped at the 2 s limit, not waited for ({took:.1f} s)")
        checks.check("no reply within the time limit" in autotune and "AUTOTUNE" in autotune,
                     f"its row says it was stopped, with its log's tail ({autotune[:200]})")
        checks.check("tokens_per_s" in rows["zerotrain-s0"] and
                     rows["llmc"].get("error") == "not reached within the time limit",
                     f"the engine before it keeps its figures, the one after is not reached ({rows['llmc']})")
        checks.check(report["complete"] and "GPT-2 124M" in printed.getvalue() and
                     "stopping in round 1" in printed.getvalue(),
                     "the report is complete and the table printed")
    finally:
        bench_gpu.make_engines = real


def check_real_plumbing(checks, zerotrain, work):
    """The real engines' plumbing without a GPU: zerotrain (on the CPU, a small model), a PyTorch
    worker (CPU, uncompiled, same small shapes) answering blocks over its pipe, and llm.c's step
    lines parsed from a stand-in that prints them, two interleaved rounds, and the per-op profile."""
    llmc = os.path.join(work, "fake_train_gpt2cu")
    with open(llmc, "w") as f:
        f.write("#!/usr/bin/env python3\nimport sys\nn = int(sys.argv[sys.argv.index('-x') + 1])\n"
                "import time\n"
                "for s in range(1, n + 1):\n"
                "    time.sleep(0.2)\n"
                "    print(f'step {s:4d}/{n} | loss 10.9{s} (+0.00z)| norm 1.0 (+0.00z)| lr 3.00e-04 | "
                "{40 + s:.2f} ms | 40.1% bf16 MFU | 400000 tok/s', flush=True)\n")
    os.chmod(llmc, 0o755)
    out = os.path.join(work, "plumbing.json")
    small = ["--zerotrain-set", "device=cpu", "--zerotrain-set", "precision.matmul=fp32", "--zerotrain-set",
             "model.n_layer=1", "--zerotrain-set", "model.n_embd=32", "--zerotrain-set", "model.n_head=2",
             "--zerotrain-set", "model.block_size=32", "--zerotrain-set", "train.seq_len=32",
             "--zerotrain-set", "train.global_batch_tokens=64", "--zerotrain-set", "train.num_threads=1"]
    torch_small = ["--torch-arg=--device=cpu", "--torch-arg=--n-layer=1", "--torch-arg=--n-embd=32",
                   "--torch-arg=--n-head=2", "--torch-arg=--seq-len=32"]
    # --llmc relative to the caller's folder, as tools/gpu_session.sh passes it: the engine runs elsewhere.
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bench_gpu.py"), "--zerotrain", zerotrain,
                        "--llmc", os.path.basename(llmc), "--python", "/usr/bin/python3", "--fake-device", "Fake GPU",
                        "--batch", "2", "--rounds", "2", "--steps", "2", "--warmup", "1", "--out", out,
                        "--engines", "zerotrain-s0", "pytorch", "llmc", "zerotrain-s3", *small,
                        *[a.replace("--torch-arg=", "--torch-arg=") for a in torch_small],
                        "--torch-arg=--compile=none"], capture_output=True, text=True, timeout=900, cwd=work)
    if not checks.check(p.returncode == 0, f"bench_gpu runs its real engines end to end "
                                           f"(exit {p.returncode}: {(p.stdout + p.stderr)[-1500:]})"):
        return
    with open(out) as f:
        report = json.load(f)
    rows = {r["name"]: r for r in report["rows"]}
    checks.check(report["commit"] == binary_commit(zerotrain) and "checkout_commit" in report,
                 f"the result names the commit the binary was built from ({report['commit']}), the checkout's beside it")
    checks.check(all(len(rows[n].get("rounds", [])) == 2 and "tokens_per_s" in rows[n] for n in rows),
                 f"every engine measured in both rounds ({ {n: rows[n].get('error', 'ok')[:200] for n in rows} })")
    llmc_block = rows["llmc"]["rounds"][0]
    if gpt2_bench_engines.working_stdbuf():
        checks.check(llmc_block["own_step_ms"] == [42.0, 43.0] and
                     all(150 < ms < 1000 for ms in llmc_block["step_ms"]) and "arrival" in rows["llmc"]["clock"],
                     f"llm.c's step lines stamped as they arrive, 0.2 s apart; its own figures beside them, "
                     f"warm-up dropped ({llmc_block['step_ms']}, {llmc_block.get('own_step_ms')})")
    else:
        checks.check(llmc_block["step_ms"] == [42.0, 43.0], "without stdbuf, llm.c's own step times, warm-up dropped")
    zt_blocks = rows["zerotrain-s0"]["rounds"]
    checks.check(all(len(b["step_ms"]) == 2 and len(b["own_step_ms"]) == 2 and
                     all(ms >= own - 1e-6 for ms, own in zip(b["step_ms"], b["own_step_ms"])) for b in zt_blocks) and
                 "elapsed_s" in rows["zerotrain-s0"]["clock"] and "own_clock_ms_per_step" in rows["zerotrain-s0"],
                 f"zerotrain timed step to step from metrics.jsonl's elapsed_s, never under its own step_ms "
                 f"({[(b['step_ms'], b.get('own_step_ms')) for b in zt_blocks]})")
    checks.check("step to step" in rows["pytorch"].get("clock", "") and
                 rows["pytorch"]["facts"].get("sdpa_kernel") == "none (explicit attention)",
                 f"the PyTorch row says how it is timed and which attention kernel ran ({rows['pytorch'].get('facts')})")
    checks.check("facts" in rows["pytorch"] and rows["pytorch"]["facts"].get("ready"),
                 "the PyTorch worker started once and served both rounds")
    checks.check("op_profile" in rows["zerotrain-s0"] and "op_profile" in rows["zerotrain-s3"],
                 "stage 0 and stage 3 carry their per-op profiles")
    checks.check("stage3_collectives_over_stage0_tokens_per_s" in report["ratios"],
                 f"the collectives ratio is reported ({report['ratios']})")
    # --warm-only (tools/gpu_session.sh --warm-autotune): the worker's compile and first step, one
    # JSON line, exit 0.
    p = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tools", "bench_gpu_torch.py"), "--warm-only",
                        "--batch", "2", "--compile", "none", *[a.split("=", 1)[1] for a in torch_small]],
                       capture_output=True, text=True, timeout=300)
    lines = p.stdout.strip().splitlines()
    warmed = json.loads(lines[-1]) if p.returncode == 0 and lines else {}
    checks.check(len(lines) == 1 and warmed.get("warmed") and "compile_s" in warmed and "compile_cache" in warmed,
                 f"bench_gpu_torch.py --warm-only compiles, runs one step and says so in one line "
                 f"(exit {p.returncode}: {(p.stdout + p.stderr)[-400:]})")


def check_llama_plumbing(checks, zerotrain, work):
    """tools/bench_llama_gpu.py without a GPU: the micro-batch it picks is the largest whose stage-3
    prediction fits 85% of the memory offered less the idle FSDP2 worker's 16 bytes a parameter,
    zerotrain and the FSDP2 worker's stand-in (its modules unwrapped on the CPU) run interleaved,
    the ratio is reported, and zerotrain's per-op profile is in its row."""
    small = ["device=cpu", "precision.matmul=fp32", "model.n_layer=1", "model.n_embd=64", "model.n_head=4",
             "model.n_kv_head=2", "model.intermediate_size=128", "model.vocab_size=256", "model.block_size=32",
             "train.num_threads=1"]
    out = os.path.join(work, "llama.json")
    cmd = [sys.executable, os.path.join(ROOT, "tools", "bench_llama_gpu.py"), "--zerotrain", zerotrain,
           "--fake-device", "Fake GPU", "--seq-len", "32", "--rounds", "2", "--steps", "2", "--warmup", "1",
           "--python", "/usr/bin/python3", "--out", out, "--fake-free-bytes", "1e12",
           *[a for kv in small for a in ("--zerotrain-set", kv)],
           "--torch-arg=--device=cpu", "--torch-arg=--no-fsdp", "--torch-arg=--compile=none"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if not checks.check(p.returncode == 0, f"bench_llama_gpu runs end to end (exit {p.returncode}: "
                                           f"{(p.stdout + p.stderr)[-1500:]})"):
        return
    with open(out) as f:
        report = json.load(f)
    checks.check(report["commit"] == binary_commit(zerotrain),
                 f"the Llama result names the commit the binary was built from ({report['commit']})")
    checks.check(report["batch"] == 16, f"with room for all, the largest micro-batch is chosen ({report['batch']})")
    checks.check(report["flops_per_token"] == 6 * report["params"] + 6 * 1 * 64 * 32,
                 f"the Llama's flops per token are 6 N + 6 L C T of the shape run ({report['flops_per_token']})")
    ratios = report["ratios"]
    checks.check(all(len(r["rounds"]) == 2 and "tokens_per_s" in r for r in report["rows"]) and
                 "zerotrain_over_fsdp2_tokens_per_s" in ratios and
                 ratios.get("zerotrain_over_fsdp2_same_round", {}).get("rounds") == 2 and
                 ratios.get("valid_for_targets") is False,
                 f"zerotrain and the FSDP2 worker both measured, the ratio reported with its same-round ratios, "
                 f"and two rounds not enough to judge the target ({ratios})")
    zt_row = report["rows"][0]
    checks.check(all(r.get("attention", "").startswith("materialised") for r in zt_row["rounds"]),
                 f"each zerotrain block keeps the attention its header names ({zt_row['rounds'][0].get('attention')})")
    checks.check(zt_row["name"] == "zerotrain-llama-s3" and zt_row.get("op_profile", {}).get("profiled_steps", 0) >= 1
                 and "where the time goes in zerotrain stage 3" in p.stdout,
                 f"zerotrain's row carries its per-op profile, printed after the table "
                 f"({zt_row.get('op_profile_error', '')[-300:]})")
    predicted = report["predicted_stage3_bytes_by_batch"]
    # Free memory whose offer falls between B 8's prediction and B 12's.
    offer = ((predicted["8"] + predicted["12"]) / 2 + 16 * report["params"]) / 0.85
    p = subprocess.run([a if a != "1e12" else str(offer) for a in cmd] + ["--rounds", "1", "--no-profile"],
                       capture_output=True,
                       text=True, timeout=600)
    with open(out) as f:
        report = json.load(f)
    checks.check(p.returncode == 0 and report["batch"] == 8,
                 f"the largest micro-batch whose prediction fits the offer is chosen ({report['batch']})")


def check_sampling_during_a_block(checks, work):
    """gpu_state.GpuSampler with a stand-in nvidia-smi that prints a sample every 20 ms: the block's
    summary holds the clocks' range, the peaks and every throttle mask seen; without nvidia-smi it
    says so (the interleaved rounds above ran that way)."""
    import gpu_state
    fake_bin = os.path.join(work, "fake_smi_bin")
    os.makedirs(fake_bin)
    smi = os.path.join(fake_bin, "nvidia-smi")
    with open(smi, "w") as f:
        f.write("#!/bin/sh\nwhile :; do\n  echo '1755, 640.5, 61, 0x0000000000000004, 97'\n  sleep 0.02\n"
                "  echo '1980, 455.0, 58, 0x0000000000000000, 99'\n  sleep 0.02\ndone\n")
    os.chmod(smi, 0o755)
    path = os.environ["PATH"]
    os.environ["PATH"] = fake_bin + os.pathsep + path
    try:
        with gpu_state.GpuSampler(period_ms=20) as sampler:
            time.sleep(0.3)
    finally:
        os.environ["PATH"] = path
    s = sampler.summary
    checks.check(s.get("samples", 0) >= 4 and s["sm_clock_min"] == 1755 and s["sm_clock_max"] == 1980 and
                 s["power_max"] == 640.5 and s["temperature_max"] == 61 and
                 s["throttle_reasons_seen"] == ["0x0000000000000000", "0x0000000000000004"],
                 f"the GPU sampled during a block: clocks' range, peaks, throttle masks ({s})")
    if shutil.which("nvidia-smi") is None:
        with gpu_state.GpuSampler() as none:
            pass
        checks.check(none.summary == {"error": "nvidia-smi not found"}, f"without nvidia-smi it says so ({none.summary})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zerotrain", required=True)
    args = ap.parse_args()
    checks = Checks()

    p = subprocess.run([args.zerotrain, "memory", "--config", os.path.join(ROOT, "configs", "gpt2_124m.json"),
                        "--ranks", "1", "--json"], capture_output=True, text=True)
    n_bench, flops = gpt2_bench_engines.flops_per_token()
    if checks.check(p.returncode == 0, f"zerotrain memory --json runs ({p.stderr.strip()[:200]})"):
        n_engine = json.loads(p.stdout)["params"]
        checks.check(n_bench == n_engine, f"MFU parameter count {n_bench} equals the engine's table {n_engine}")
    checks.check(flops == 6 * n_bench + 6 * 12 * 768 * 1024, "flops per token = 6 N + 6 L C T")
    peaks = {name: bench_harness.peak_bf16_flops(name)[0] for name in (
        "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200", "NVIDIA H200 NVL",
        "NVIDIA GH200 480GB", "NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-16GB")}
    checks.check(peaks == {"NVIDIA H100 80GB HBM3": 989e12, "NVIDIA H100 PCIe": 756e12, "NVIDIA H100 NVL": 835e12,
                           "NVIDIA H200": 989e12, "NVIDIA H200 NVL": 835e12, "NVIDIA GH200 480GB": 989e12,
                           "NVIDIA A100-SXM4-80GB": 312e12, "Tesla V100-SXM2-16GB": None},
                 f"MFU's peak by the card's name, the PCIe and NVL kinds apart from the SXM ones ({peaks})")

    with tempfile.TemporaryDirectory() as work:
        rng = np.random.default_rng(3)
        for name, n in (("train.bin", 5000), ("val.bin", 800)):
            bench_harness.write_llmc_tokens(os.path.join(work, name), rng.integers(0, 64, n))
        run = subprocess.run([args.zerotrain, "train", "--config", os.path.join(ROOT, "configs", "tiny.json"),
                              "--run-dir", os.path.join(work, "run"), "--set", f"data.dataset={work}",
                              "--set", "train.max_steps=2", "--set", "train.eval_batches=1",
                              "--set", "log.sample_tokens=0", "--set", "log.progress=plain",
                              "--set", "log.profile_ops=true"],
                             capture_output=True, text=True, timeout=300)
        checks.check(run.returncode == 0, f"zerotrain trains on the token files bench_gpu writes ({run.stderr[-300:]})")
        profile_path = os.path.join(work, "run", "op_profile.json")
        if checks.check(os.path.exists(profile_path), "log.profile_ops writes op_profile.json"):
            with open(profile_path) as f:
                profile = json.load(f)
            lines = bench_gpu.top_ops_lines(profile, "zerotrain stage 0", n=3)
            text = "\n".join(lines)
            print(text)
            checks.check(profile["profiled_steps"] == 1, "2 steps: the first warms up, 1 is profiled")
            checks.check(len(profile["ops"]) > 3 and f"({len(profile['ops']) - 3} more ops)" in text,
                         "the summary lists the top 3 ops and sums the rest")
            checks.check(profile["ops"][0]["op"] in lines[2] and "(outside the ops)" in lines[-1],
                         "the most expensive op comes first, the time outside the ops last")
            checks.check(profile.get("kernel_choices") == {} and profile.get("device_memory") == {},
                         "a CPU run's profile records no timed kernel choices and no device memory")
            profile["kernel_choices"] = {  # what a CUDA run's KernelResources::choices_summary writes
                "gemm_configurations": 5, "timed_slice_searches": 1, "bias_grad_configurations_timed": 2,
                "bias_grad_configurations_epilogue_faster": 1,
                "gemm_searches_kept_other_than_first": 1, "gemm_searches_first_ms": 0.25,
                "gemm_searches_kept_ms": 0.2, "gemm_searches": [{"m": 768, "kept": 3}, {"m": 3072, "kept": 0}],
                "norm_backward_choices": [{"norm": "layernorm", "rows": 16384, "cols": 768, "activations": "bf16",
                                           "params": "bf16", "kernel": "warp a row"}]}
            gib = 1024 ** 3
            profile["device_memory"] = {  # what a CUDA run's ComputeBackend::device_memory writes
                "total_bytes": 80 * gib, "free_bytes": 50 * gib, "allocator_reserved_bytes": 28 * gib,
                "allocator_peak_reserved_bytes": 29 * gib, "outside_allocator_bytes": 2 * gib}
            text = "\n".join(bench_gpu.top_ops_lines(profile, "zerotrain stage 0", n=3))
            checks.check("5 product configurations searched (1 on a slice)" in text and
                         "epilogue for 1 of 2 timed" in text and
                         "layernorm backward [16384, 768] bf16: warp a row" in text and
                         "product searches: 2, 1 kept another than the heuristic's first; one call of each "
                         "0.250 ms with the first, 0.200 with the kept" in text and
                         "device memory: 28.00 GiB held by zerotrain's allocator (peak 29.00), 2.00 GiB outside it"
                         in text,
                         "the summary names the kernels a CUDA run chose by timing")

    check_interleaving_and_partial_reports(checks)
    check_target_validity(checks)
    with tempfile.TemporaryDirectory() as work:
        check_time_limit_bounds_a_compile(checks, work)
        check_real_plumbing(checks, args.zerotrain, work)
        check_llama_plumbing(checks, args.zerotrain, work)
        check_sampling_during_a_block(checks, work)

    has_gpu = shutil.which("nvidia-smi") is not None and subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True, text=True).returncode == 0
    if not has_gpu:
        b = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bench_gpu.py"), "--zerotrain", args.zerotrain],
                           capture_output=True, text=True, timeout=120)
        lines = b.stderr.strip().splitlines()
        checks.check(b.returncode != 0 and len(lines) == 1 and "no NVIDIA GPU" in lines[0],
                     f"without a GPU: one line and a non-zero exit (exit {b.returncode}: {b.stderr.strip()[:300]})")
    else:
        print("(a GPU is present: the no-device exit is not exercised)")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
