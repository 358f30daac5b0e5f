#!/usr/bin/env python3
"""The GPU benchmarks' report, recomputed here from the step times their engines returned: each
block's median, each row's median over rounds, tokens/s and MFU, which PyTorch row is the best,
every ratio and its same-round spread, and the reasons a report gives for not judging its targets.
The engines are faked (no GPU), each with step times that differ within a block and from round to
round, so a median taken as a mean or a minimum, a ratio turned over, or the worst anchor taken for
the best gives another number than the one computed here. tests/tools/bench_gpu_test.py covers the
interleaving, time limits and the real engines' plumbing."""
import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.dirname(HERE))
import bench_gpu  # noqa: E402
import bench_harness  # noqa: E402
import bench_llama_gpu  # noqa: E402
import bench_multi_gpu  # noqa: E402
from check_report import Checks  # noqa: E402

H100 = "NVIDIA H100 80GB HBM3"
H100_PEAK = 989e12


class ScriptedEngine:
    """An engine whose blocks return the step times given for each round in turn (a block of a
    round listed as None fails), and whose start reports `facts`."""

    def __init__(self, name, blocks, facts=None):
        self.name, self.label, self.blocks, self.facts, self.clock = name, f"scripted {name}", blocks, facts, None
        self.ran = 0

    def start(self, ctx):
        pass

    def run(self, ctx, warmup, steps, profile=False):
        steps_ms = self.blocks[self.ran]
        self.ran += 1
        if steps_ms is None:
            raise bench_harness.EngineError("a block that failed")
        return {"step_ms": list(steps_ms), "losses": [1.0] * (warmup + len(steps_ms))}

    def stop(self):
        pass


def close(a, b):
    return a is not None and b is not None and abs(a - b) <= 1e-12 * max(abs(a), abs(b))


def run_bench(engines, work):
    """bench_gpu.main over `engines` on a faked H100 (3 rounds of 3 steps), its report as written."""
    real = bench_gpu.make_engines
    out = os.path.join(work, "bench.json")
    bench_gpu.make_engines = lambda: {e.name: e for e in engines}
    try:
        bench_gpu.main(["--fake-device", H100, "--rounds", "3", "--steps", "3", "--warmup", "1", "--no-profile",
                        "--out", out, "--engines", *[e.name for e in engines]])
    finally:
        bench_gpu.make_engines = real
    with open(out) as f:
        return json.load(f)


def expected_row(blocks, tokens_per_step, flops_per_token):
    """What a row's figures are from its blocks' step times, computed apart from bench_harness."""
    medians = [statistics.median(b) for b in blocks if b is not None]
    ms = statistics.median(medians)
    tokens_per_s = tokens_per_step / (ms / 1e3)
    return {"block_medians": medians, "ms_per_step": ms, "tokens_per_s": tokens_per_s,
            "mfu": tokens_per_s * flops_per_token / H100_PEAK, "rounds_measured": len(medians)}


def expected_same_round(numerator, denominator):
    """tokens/s of numerator over denominator round by round, over the rounds both measured."""
    ratios = sorted(statistics.median(d) / statistics.median(n) for n, d in zip(numerator, denominator)
                    if n is not None and d is not None)
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios), "rounds": len(ratios)}


# Step times (ms) of each engine's block in rounds 1, 2 and 3. Each block's median differs from its
# mean and from its minimum, each row's median over rounds from the rounds' mean, and the
# same-round ratios differ from round to round. llm.c's second block fails.
BLOCKS = {
    "zerotrain-s0": [[100.0, 104.0, 99.0], [90.0, 91.0, 200.0], [130.0, 120.0, 125.0]],
    "pytorch": [[130.0, 118.0, 119.0], [112.0, 140.0, 111.0], [150.0, 115.0, 117.0]],
    "pytorch-max-autotune-cudnn": [[108.0, 109.0, 150.0], [121.0, 102.0, 103.0], [107.0, 90.0, 106.0]],
    "llmc": [[101.0, 103.0, 102.0], None, [98.0, 140.0, 99.0]],
    "zerotrain-s3": [[106.0, 105.0, 300.0], [95.0, 96.0, 97.0], [119.0, 111.0, 118.0]],
}


def check_report_arithmetic(checks, work):
    engines = [ScriptedEngine(name, blocks) for name, blocks in BLOCKS.items()]
    report = run_bench(engines, work)
    rows = {r["name"]: r for r in report["rows"]}
    tokens_per_step = 16 * bench_gpu.T
    checks.check(report["batch"] == 16 and report["seq_len"] == bench_gpu.T and report["peak_bf16_flops"] == H100_PEAK,
                 "the report states its batch, sequence length and the H100's peak")
    want = {name: expected_row(blocks, tokens_per_step, report["flops_per_token"]) for name, blocks in BLOCKS.items()}
    for name, w in want.items():
        r = rows[name]
        got_medians = [b["median_ms"] for b in r["rounds"] if "median_ms" in b]
        checks.check(got_medians == w["block_medians"], f"{name}: each block's figure is the median of its steps "
                     f"({got_medians}, want {w['block_medians']})")
        checks.check(close(r["ms_per_step"], w["ms_per_step"]) and close(r["tokens_per_s"], w["tokens_per_s"]) and
                     close(r["mfu"], w["mfu"]),
                     f"{name}: the median over rounds of the blocks' medians, B x T tokens a step, MFU over the "
                     f"peak ({r['ms_per_step']} ms, {r['tokens_per_s']:.1f} tokens/s, mfu {r['mfu']}; want "
                     f"{w['ms_per_step']} ms, {w['tokens_per_s']:.1f}, {w['mfu']})")
        checks.check(r["rounds_measured"] == w["rounds_measured"] and len(r["rounds"]) == 3,
                     f"{name}: rounds_measured counts the blocks that measured ({r['rounds_measured']} of "
                     f"{len(r['rounds'])} blocks)")

    ratios = report["ratios"]
    s0 = want["zerotrain-s0"]["tokens_per_s"]
    best = max(("pytorch", "pytorch-max-autotune-cudnn"), key=lambda n: want[n]["tokens_per_s"])
    checks.check(best == "pytorch-max-autotune-cudnn" and ratios["best_pytorch"] == best and
                 close(ratios["stage0_over_best_pytorch_tokens_per_s"], s0 / want[best]["tokens_per_s"]),
                 f"the target's PyTorch row is the faster of the two ({ratios['best_pytorch']}: "
                 f"{ratios['stage0_over_best_pytorch_tokens_per_s']:.4f})")
    for name in ("pytorch", "pytorch-max-autotune-cudnn"):
        key = f"stage0_over_{name.replace('-', '_')}_tokens_per_s"
        checks.check(close(ratios[key], s0 / want[name]["tokens_per_s"]),
                     f"{key}: stage 0's tokens/s over the row's ({ratios[key]:.4f})")
    checks.check(close(ratios["stage0_over_llmc_tokens_per_s"], s0 / want["llmc"]["tokens_per_s"]) and
                 close(ratios["stage3_collectives_over_stage0_tokens_per_s"],
                       want["zerotrain-s3"]["tokens_per_s"] / s0) and close(ratios["stage0_mfu"], want["zerotrain-s0"]["mfu"]),
                 "over llm.c, and stage 3 over stage 0 (not the other way round), and stage 0's MFU")
    for key, numerator, denominator in (("stage0_over_best_pytorch_same_round", "zerotrain-s0", best),
                                        ("stage0_over_llmc_same_round", "zerotrain-s0", "llmc"),
                                        ("stage3_collectives_over_stage0_same_round", "zerotrain-s3", "zerotrain-s0")):
        w = expected_same_round(BLOCKS[numerator], BLOCKS[denominator])
        got = ratios.get(key, {})
        checks.check(got.get("rounds") == w["rounds"] and all(close(got.get(k), w[k]) for k in ("median", "min", "max")),
                     f"{key}: median, min and max over the rounds both measured ({got}; want {w})")
    checks.check(ratios["valid_for_targets"] is False and
                 ratios["not_valid_because"] == ["stage0_over_llmc_tokens_per_s: fewer than 3 rounds"],
                 f"an anchor with 2 measured rounds of 3 (its denominator's) makes the only reason "
                 f"({ratios.get('not_valid_because')})")


def check_autotune_beside_work(checks, work):
    """A max-autotune row whose compile hit kernels tuned beside other work (--warm-autotune) makes the
    report invalid for its targets; one that tuned on its own (no hit) does not."""
    def engines(cache):
        every = {n: b for n, b in BLOCKS.items() if n != "llmc"}
        every["llmc"] = BLOCKS["zerotrain-s0"]
        return [ScriptedEngine(n, b, {"compile_cache": cache} if n == "pytorch-max-autotune-cudnn" else None)
                for n, b in every.items()]

    misses = {"fxgraph_miss": 0, "aotautograd_miss": 0}
    served = run_bench(engines({"warm_autotune": True, "fxgraph_hit": 2, "aotautograd_hit": 0, **misses}), work)
    reasons = served["ratios"].get("not_valid_because", [])
    checks.check(served["ratios"]["valid_for_targets"] is False and reasons ==
                 ["a PyTorch row compiled from kernels tuned beside other work (--warm-autotune)"],
                 f"kernels tuned beside other work and served from the cache: not judged ({reasons})")
    own = run_bench(engines({"warm_autotune": True, "fxgraph_hit": 0, "aotautograd_hit": 0, **misses}), work)
    checks.check(own["ratios"]["valid_for_targets"] is True,
                 f"tuned in its own compile (no hit): judged ({own['ratios'].get('not_valid_because')})")


def measured_row(name, block_medians):
    """A row as bench_harness.summarise leaves it, from its blocks' medians (None: a failed block)."""
    medians = [m for m in block_medians if m is not None]
    ms = statistics.median(medians)
    return {"name": name, "tokens_per_s": 1e3 / ms, "rounds_measured": len(medians), "mfu": 0.4,
            "rounds": [{"round": i, **({"median_ms": m} if m is not None else {"error": "failed"})}
                       for i, m in enumerate(block_medians)]}


def check_variant_and_stage_ratios(checks):
    """Stage 0 over each of its variants (what fp32 activations, the project's flash kernels or a
    separate GELU cost), and stages 1 and 2 over stage 0 as stage 3's is."""
    def row(name, tokens_per_s):  # three rounds at that rate
        return measured_row(name, [1e3 / tokens_per_s] * 3)

    rows = [row("zerotrain-s0", 120.0), row("zerotrain-s1", 114.0), row("zerotrain-s2", 108.0),
            row("zerotrain-s0-fp32-activations", 80.0), row("zerotrain-s0-flash", 60.0),
            row("zerotrain-s0-separate-gelu", 100.0)]
    ratios = bench_gpu.ratios_of(rows)
    want = {"stage0_over_stage0_fp32_activations_tokens_per_s": 1.5, "stage0_over_stage0_flash_tokens_per_s": 2.0,
            "stage0_over_stage0_separate_gelu_tokens_per_s": 1.2,
            "stage1_collectives_over_stage0_tokens_per_s": 0.95, "stage2_collectives_over_stage0_tokens_per_s": 0.9}
    got = {k: ratios.get(k) for k in want}
    checks.check(all(close(got[k], v) for k, v in want.items()),
                 f"stage 0 over each variant, stages 1 and 2 over stage 0 ({got})")


def check_llama_and_multi_gpu_ratios(checks):
    """The Llama benchmark's ratio over FSDP2 (judged on the rounds both rows measured) and the
    several-GPU benchmark's scaling efficiency with its same-round spread."""
    zt, fsdp = measured_row("zerotrain-llama-s3", [500.0, 520.0, 480.0]), measured_row("fsdp2", [550.0, None, 560.0])
    ratios = bench_llama_gpu.ratios_of([zt, fsdp])
    checks.check(close(ratios["zerotrain_over_fsdp2_tokens_per_s"], 555.0 / 500.0) and
                 ratios["zerotrain_over_fsdp2_same_round"]["rounds"] == 2 and ratios["valid_for_targets"] is False and
                 ratios["not_valid_because"] == ["2 round(s) of both rows, fewer than 3"],
                 f"Llama: zerotrain over FSDP2, not judged while FSDP2 measured 2 rounds of 3 ({ratios})")
    fsdp_whole = measured_row("fsdp2", [550.0, 600.0, 560.0])
    checks.check(bench_llama_gpu.ratios_of([zt, fsdp_whole])["valid_for_targets"] is True,
                 "Llama: judged once both rows measured 3 rounds")

    blocks = {"zerotrain-s0-n2": [100.0, 110.0, 95.0], "zerotrain-s0-n1": [90.0, 88.0, 99.0],
              "fsdp2-n2": [120.0, 115.0, 100.0]}
    rows = [measured_row(name, b) for name, b in blocks.items()]
    ratios = bench_multi_gpu.ratios_of(rows, 2)
    want = expected_same_round(*[[[m] for m in blocks[n]] for n in ("zerotrain-s0-n2", "zerotrain-s0-n1")])
    got = ratios.get("stage0_scaling_efficiency_same_round", {})
    checks.check(close(ratios["stage0_scaling_efficiency"], 1e3 / 100.0 / (1e3 / 90.0)) and
                 got.get("rounds") == 3 and all(close(got.get(k), want[k]) for k in ("median", "min", "max")),
                 f"several GPUs: stage 0's scaling efficiency, N GPUs' tokens/s over one's, round by round "
                 f"({ratios['stage0_scaling_efficiency']:.4f}, {got}; want {want})")
    checks.check(close(ratios["stage0_over_fsdp2_tokens_per_s"], 115.0 / 100.0) and
                 "stage1_over_fsdp2_tokens_per_s" not in ratios, "several GPUs: stage 0 over FSDP2, no row no ratio")


def check_gpu_samples_summary(checks):
    """A block's GPU summary from nvidia-smi's samples (clock, power, temperature, throttle mask,
    utilization): medians that are medians, peaks, every mask seen; a line of another shape skipped."""
    import gpu_state
    lines = ["1500, 300.0, 50, 0x0, 10", "1980, 650.5, 61, 0x4, 90", "1755, 400.0, 58, 0x0, 95", "garbage",
             "1800, n/a, 60, 0x0, 97"]
    s = gpu_state.summarise_samples(lines)
    checks.check(s == {"samples": 3, "sm_clock_min": 1500.0, "sm_clock_median": 1755.0, "sm_clock_max": 1980.0,
                       "power_max": 650.5, "temperature_max": 61.0, "utilization_median": 90.0,
                       "throttle_reasons_seen": ["0x0", "0x4"]}, f"the block's GPU summary ({s})")


def check_printed_table(checks):
    """The table's line per engine: ms/step, tokens/s and MFU as a percentage, or why it failed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        bench_harness.print_rows([{"label": "zerotrain stage 0", "ms_per_step": 27.25, "tokens_per_s": 601234.0,
                                   "mfu": 0.4512},
                                  {"label": "llm.c", "rounds": [], "error": "start: no binary"}], width=20)
    lines = printed.getvalue().splitlines()
    checks.check(lines[1].split() == ["zerotrain", "stage", "0", "27.2", "601234", "45.1%"] and
                 "FAILED" in lines[2] and "start: no binary" in lines[2], f"the printed rows ({lines})")


STAND_IN_ZEROTRAIN = """#!/usr/bin/env python3
import json, os, sys
run_dir = sys.argv[sys.argv.index("--run-dir") + 1]
os.makedirs(run_dir)
with open(os.path.join(run_dir, "metrics.jsonl"), "w") as f:
    for step, (elapsed, own) in enumerate([(1.0, 900), (1.5, 450), (2.5, 950), (4.0, 1400)], 1):
        f.write(json.dumps({"type": "train", "step": step, "loss": 1.0, "elapsed_s": elapsed, "step_ms": own}) + "\\n")
"""

STAND_IN_LLMC = """#!/usr/bin/env python3
import sys, time
n = int(sys.argv[sys.argv.index("-x") + 1])
for s in range(1, n + 1):
    time.sleep(0.05)
    print(f"step {s:4d}/{n} | loss 10.9 (+0.00z)| norm 1.0 (+0.00z)| lr 3.00e-04 | 40.00 ms | 40.1% bf16 MFU | "
          "400000 tok/s", flush=True)
"""


def check_engine_clocks(checks, work):
    """The engines' timed steps: zerotrain's from one record's elapsed_s to the next's, after the
    warm-up (its own step_ms beside), and llm.c's one stamped time a timed step."""
    import gpt2_bench_engines
    scripts = {}
    for name, text in (("zerotrain", STAND_IN_ZEROTRAIN), ("train_gpt2cu", STAND_IN_LLMC)):
        scripts[name] = os.path.join(work, name)
        with open(scripts[name], "w") as f:
            f.write(text)
        os.chmod(scripts[name], 0o755)
    runs = os.path.join(work, "engine_runs")
    os.makedirs(runs)
    args = argparse.Namespace(zerotrain=scripts["zerotrain"], zerotrain_sets={}, batch=1, mpirun="",
                              llmc=scripts["train_gpt2cu"])
    ctx = bench_harness.Context(args, runs, work)
    r = gpt2_bench_engines.Zerotrain("zerotrain-s0", 0).run(ctx, 2, 2)
    checks.check(r["step_ms"] == [1000.0, 1500.0] and r["own_step_ms"] == [950, 1400],
                 f"zerotrain: steps 3 and 4 timed record to record after 2 warm-up steps ({r.get('step_ms')}, own "
                 f"{r.get('own_step_ms')})")
    r = gpt2_bench_engines.Llmc().run(ctx, 1, 3)
    checks.check(len(r["step_ms"]) == 3 and len(r["own_step_ms"]) == 3 and all(ms > 0 for ms in r["step_ms"]),
                 f"llm.c: one stamped time a timed step ({r.get('step_ms')}, own {r.get('own_step_ms')})")


def main():
    checks = Checks()
    check_printed_table(checks)
    check_gpu_samples_summary(checks)
    check_variant_and_stage_ratios(checks)
    check_llama_and_multi_gpu_ratios(checks)
    with tempfile.TemporaryDirectory() as work:
        check_report_arithmetic(checks, work)
        check_engine_clocks(checks, work)
        check_autotune_beside_work(checks, work)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
