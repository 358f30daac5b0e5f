#!/usr/bin/env python3
"""GPU throughput benchmark: GPT-2 124M (12 layers, 12 heads, 768 wide, vocab 50257 padded to
50304, T = 1024, bf16 parameters, no activation checkpointing) trained by zerotrain on one GPU at
ZeRO stages 0-3 (stages 1-3 through a 1-rank NCCL communicator: gather, free and reduce-scatter
all run), beside a PyTorch GPT-2 of the same shapes on the same GPU in the same run
(tools/bench_gpu_torch.py: torch.compile, bf16 autocast, fused AdamW). Random tokens (speed does
not depend on them). Prints tokens/s, ms/step and MFU per engine and the ratios the targets are
stated in (zerotrain stage 0 / PyTorch >= 1.1; stage 3 / stage 0 >= 0.95; MFU >= 50%), and writes
docs/results/gpu_bench_<device>.json.

Where the time goes: after the timed runs, a separate short stage-0 run trains with
log.profile_ops (CUDA events around every op on the compute stream, read once per step); its
op_profile.json goes into the stage-0 row of the JSON (`op_profile`), and the most expensive ops
are printed after the table. It is a run of its own because profiling adds two event records per
op and a synchronize at each step's start and end, which the throughput figures must not carry;
--no-profile skips it.

Activations: the stages run with the first of --activations (default bf16: every activation and
activation gradient stored in bf16, docs/precision.md); stage 0 also runs with each other one
(default fp32 activations with bf16 matmul inputs), so the table shows what bf16 activations give.
--attention sets precision.attention for every zerotrain run (auto: cuDNN's fused attention where
it serves, the project's flash kernels elsewhere; flash: always the flash kernels), so a second
invocation with --no-torch shows what cuDNN gives. A run that fails (zerotrain or PyTorch) is recorded as a failed row (its error in the JSON) and
the others go on. Stage 0 and PyTorch run first, and the JSON is rewritten after every row
("complete": false until the last), so a call cut short keeps the headline ratio.

MFU = tokens/s x (6 N + 6 L C T) / peak, N the parameter count (wpe included, the tied head
counted once), peak 989 TFLOP/s (dense bf16, H100 and H200 SXM).

usage: python3 tools/bench_gpu.py [--zerotrain build/zerotrain] [--batch 16] [--steps 20] [--warmup 5]
                                  [--stages 0 1 2 3] [--activations bf16 fp32] [--attention auto|cudnn|flash]
                                  [--python python3]
                                  [--no-torch] [--no-profile]
"""
import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEAK_BF16_FLOPS = 989e12
PROFILED_STEPS = 5  # timed steps of the separate per-op profile run (after the warm-up steps)
N_LAYER, N_HEAD, N_EMBD, T, VOCAB, VOCAB_PADDED = 12, 12, 768, 1024, 50257, 50304
LLMC_MAGIC, LLMC_VERSION = 20240520, 1


def write_llmc_tokens(path, tokens):
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = LLMC_MAGIC, LLMC_VERSION, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype(np.uint16).tobytes())


def flops_per_token():
    n = VOCAB_PADDED * N_EMBD + T * N_EMBD + N_LAYER * (12 * N_EMBD * N_EMBD + 13 * N_EMBD) + 2 * N_EMBD
    return n, 6 * n + 6 * N_LAYER * N_EMBD * T


def device_facts():
    smi = shutil.which("nvidia-smi")
    p = smi and subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                               capture_output=True, text=True)
    if not p or p.returncode != 0 or not p.stdout.strip():
        sys.exit("bench_gpu: no NVIDIA GPU here (nvidia-smi found none); this benchmark needs one")
    name, driver = [s.strip() for s in p.stdout.strip().splitlines()[0].split(",")]
    return name, driver


def run_zerotrain(args, stage, data_dir, work, activations, profile=False):
    """The run's per-step figures, or {"error": text} when it fails."""
    run_dir = os.path.join(work, f"stage{stage}_{activations}" + ("_profiled" if profile else ""))
    steps = min(args.steps, PROFILED_STEPS) if profile else args.steps
    # bf16 parameters and bf16 matmul inputs (fp32 accumulate): the rounding PyTorch's bf16
    # autocast applies on the reference side; activations stored as --activations says.
    sets = {"device": "cuda", "zero.stage": stage, "precision.param_dtype": "bf16", "precision.matmul": "bf16",
            "precision.activations": activations, "precision.attention": args.attention,
            **({} if args.gelu_epilogue == "default" else {"precision.gelu_epilogue": args.gelu_epilogue}),
            "data.dataset": data_dir, "train.micro_batch": args.batch, "train.seq_len": T, "train.grad_accum": 1,
            "train.global_batch_tokens": args.batch * T, "train.max_steps": args.warmup + steps,
            "train.eval_every": 0, "train.eval_batches": 1, "train.activation_checkpointing": "none",
            "log.sample_tokens": 0, "log.every_steps": 1000, "log.progress": "plain", "checkpoint.at_end": "false",
            "log.profile_ops": "true" if profile else "false"}
    cmd = [args.zerotrain, "train", "--config", os.path.join(ROOT, "configs", "gpt2_124m.json"), "--run-dir", run_dir]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        print(f"bench_gpu: {' '.join(cmd)} failed (exit {p.returncode}):\n{p.stderr[-3000:]}", file=sys.stderr)
        return {"error": f"exit {p.returncode}: {p.stderr[-3000:]}"}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        steps = [json.loads(l) for l in f if '"train"' in l]
    result = {"step_ms": [s["step_ms"] for s in steps], "losses": [s["loss"] for s in steps],
              "comm_wait_ms": [s.get("comm_wait_ms", 0.0) for s in steps], "profiled": profile}
    profile_path = os.path.join(run_dir, "op_profile.json")
    if profile and os.path.exists(profile_path):
        with open(profile_path) as f:
            result["op_profile"] = json.load(f)
    return result


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
    return lines


def run_torch(args):
    """The PyTorch reference's per-step figures, or {"error": text} when it fails."""
    cmd = [args.python, os.path.join(ROOT, "tools", "bench_gpu_torch.py"), "--batch", str(args.batch),
           "--steps", str(args.steps), "--warmup", str(args.warmup)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after 1800 s"}
    if p.returncode != 0:
        print(f"bench_gpu: the PyTorch reference failed (exit {p.returncode}):\n{p.stderr[-3000:]}", file=sys.stderr)
        return {"error": f"exit {p.returncode}: {p.stderr[-3000:]}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def summarise(step_ms, warmup, batch, flops_tok):
    ms = statistics.median(step_ms[warmup:])
    tok_s = batch * T / (ms / 1e3)
    return {"ms_per_step": ms, "tokens_per_s": tok_s, "mfu": tok_s * flops_tok / PEAK_BF16_FLOPS}


TORCH_ENGINE = "pytorch (compile, bf16 autocast, fused AdamW)"


def plan_runs(args):
    """(engine, stage, activations) in the order they run: zerotrain stage 0 and PyTorch first (the
    headline ratio survives a call cut short), then the other stages, then stage 0 with each other
    activation dtype."""
    primary = args.activations[0]
    runs = [("zerotrain", stage, primary) for stage in args.stages if stage == 0]
    if not args.no_torch:
        runs.append(("pytorch", None, None))
    runs += [("zerotrain", stage, primary) for stage in args.stages if stage != 0]
    runs += [("zerotrain", 0, other) for other in args.activations[1:] if 0 in args.stages]
    return runs


def ratios_of(rows):
    by_stage = {r["stage"]: r for r in rows if r["stage"] is not None and "error" not in r}
    torch_row = next((r for r in rows if r["engine"] == TORCH_ENGINE and "error" not in r), None)
    ratios = {}
    if 0 in by_stage and torch_row:
        ratios["stage0_over_pytorch_tokens_per_s"] = by_stage[0]["tokens_per_s"] / torch_row["tokens_per_s"]
    if 0 in by_stage and 3 in by_stage:
        ratios["stage3_over_stage0_tokens_per_s"] = by_stage[3]["tokens_per_s"] / by_stage[0]["tokens_per_s"]
    for r in rows:  # what the primary activation dtype gives over each other one, at stage 0
        if 0 in by_stage and r["stage"] is None and r.get("activations") and "error" not in r:
            ratios[f"stage0_{by_stage[0]['activations']}_over_{r['activations']}_activations_tokens_per_s"] = (
                by_stage[0]["tokens_per_s"] / r["tokens_per_s"])
    return ratios


def write_report(out, meta, rows, complete):
    """The JSON, rewritten after every row so a call cut short still leaves what was measured."""
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out + ".tmp", "w") as f:
        json.dump({**meta, "complete": complete, "rows": rows, "ratios": ratios_of(rows),
                   "targets": {"stage0_over_pytorch_tokens_per_s": 1.1, "stage3_over_stage0_tokens_per_s": 0.95,
                               "mfu": 0.5}}, f, indent=1)
    os.replace(out + ".tmp", out)


def print_table(args, name, rows):
    print(f"\nGPT-2 124M, B={args.batch}, T={T}, bf16, {args.steps} timed steps after {args.warmup}, on {name}")
    print(f"{'engine':48s} {'ms/step':>9s} {'tokens/s':>10s} {'MFU':>6s}")
    for r in rows:
        if "error" in r:
            print(f"{r['engine']:48s} {'FAILED':>9s}")
            continue
        print(f"{r['engine']:48s} {r['ms_per_step']:9.1f} {r['tokens_per_s']:10.0f} {100 * r['mfu']:5.1f}%")
    for k, v in ratios_of(rows).items():
        print(f"{k}: {v:.3f}")
    for r in rows:
        if "op_profile" in r:
            print("\n" + "\n".join(top_ops_lines(r["op_profile"], r["engine"])))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zerotrain", default=os.path.join(ROOT, "build", "zerotrain"))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--stages", type=int, nargs="+", default=[0, 1, 2, 3])
    ap.add_argument("--activations", nargs="+", choices=["bf16", "fp32"], default=["bf16", "fp32"],
                    help="precision.activations: the stages run with the first, stage 0 also with the others")
    ap.add_argument("--attention", choices=["auto", "cudnn", "flash"], default="auto",
                    help="precision.attention of every zerotrain run (auto: cuDNN where it serves)")
    ap.add_argument("--gelu-epilogue", choices=["default", "true", "false"], default="default",
                    help="precision.gelu_epilogue of every zerotrain run (default: the config's, on with bf16)")
    ap.add_argument("--python", default=sys.executable, help="interpreter with torch for the reference")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-profile", action="store_true", help="no separate per-op profile run of stage 0")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    name, driver = device_facts()
    n_params, flops_tok = flops_per_token()
    # ZT_COMMIT: the commit measured, for copies of the tree that travel without .git (device calls).
    commit = os.environ.get("ZT_COMMIT") or subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"],
                                                           capture_output=True, text=True).stdout.strip()
    slug = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    out = args.out or os.path.join(ROOT, "docs", "results", f"gpu_bench_{slug}.json")
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "commit": commit, "device": name,
            "driver": driver, "batch": args.batch, "seq_len": T, "params": n_params, "flops_per_token": flops_tok,
            "peak_bf16_flops": PEAK_BF16_FLOPS,
            "attention": args.attention, "gelu_epilogue": args.gelu_epilogue}
    primary = args.activations[0]
    rows = []
    with tempfile.TemporaryDirectory() as work:
        data_dir = os.path.join(work, "data")
        os.makedirs(data_dir)
        rng = np.random.default_rng(0)
        write_llmc_tokens(os.path.join(data_dir, "train.bin"), rng.integers(0, VOCAB, 4_000_000))
        write_llmc_tokens(os.path.join(data_dir, "val.bin"), rng.integers(0, VOCAB, 200_000))
        for engine, stage, activations in plan_runs(args):
            if engine == "pytorch":
                r = run_torch(args)
                row = {"engine": TORCH_ENGINE, "stage": None, **r}
                if "params" in r and r["params"] != n_params:
                    row["error"] = f"PyTorch's model has {r['params']} parameters, zerotrain's {n_params}"
            else:
                r = run_zerotrain(args, stage, data_dir, work, activations)
                label = f"zerotrain stage {stage}" + ("" if activations == primary else f", {activations} activations")
                row = {"engine": label, "stage": stage if activations == primary else None,
                       "activations": activations, **r}
            if "error" not in row:
                row.update(summarise(r["step_ms"], args.warmup, args.batch, flops_tok))
            rows.append(row)
            print(f"{row['engine']}: " + ("FAILED" if "error" in row else f"{row['ms_per_step']:.1f} ms/step"),
                  flush=True)
            write_report(out, meta, rows, complete=False)
            if engine == "zerotrain" and stage == 0 and activations == primary and "error" not in row \
                    and not args.no_profile:
                profiled = run_zerotrain(args, 0, data_dir, work, activations, profile=True)
                if "op_profile" in profiled:
                    row["op_profile"] = profiled["op_profile"]
                write_report(out, meta, rows, complete=False)
    write_report(out, meta, rows, complete=True)
    print_table(args, name, rows)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
