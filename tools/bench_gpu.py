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
import datetime
import json
import os
import re
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from gpu_state import gpu_state  # noqa: E402
from repo_commit import binary_commit, head_commit  # noqa: E402
from result_paths import OneLineParser, check_out_file, default_out  # noqa: E402
from bench_harness import (Context, add_run_arguments, device_facts, exit_on_sigterm,  # noqa: E402
                           interleave, peak_bf16_flops, print_ratio, print_rows, profile_rows, same_round_ratio,
                           top_ops_lines)
from gpt2_bench_engines import T, VOCAB, Llmc, Torch, Zerotrain, flops_per_token  # noqa: E402

PROFILED_STEPS = 5  # timed steps of the separate per-op profile runs (after the warm-up steps)
# Stage 0 and the cheap anchors first, max-autotune (minutes of compilation before its first block)
# last: a call cut short keeps the headline ratios.
DEFAULT_ENGINES = ["zerotrain-s0", "pytorch", "llmc", "zerotrain-s3", "zerotrain-s1", "zerotrain-s2",
                   "pytorch-max-autotune-cudnn"]
TARGETS = {"stage0_over_best_pytorch_tokens_per_s": 1.15, "stage0_over_llmc_tokens_per_s": 1.0,
           "stage3_collectives_over_stage0_tokens_per_s": 0.95, "mfu": 0.5}


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
        elif s0.get("rounds_measured", 0) < TARGET_MIN_ROUNDS:  # judged on stage 0's rounds alone
            reasons.append(f"stage0_mfu: fewer than {TARGET_MIN_ROUNDS} rounds")
    # A target whose rows did not both run is not judged: the invocation cannot say it is met.
    for key in TARGETS:
        if key != "mfu" and key not in ratios:
            reasons.append(f"{key}: its rows did not both run")
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
    ap = OneLineParser("bench_gpu", description=__doc__.split("\n\n")[0])
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
