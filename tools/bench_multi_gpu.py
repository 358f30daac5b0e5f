#!/usr/bin/env python3
"""Throughput on several GPUs of one machine, in one invocation: GPT-2 124M at tools/bench_gpu.py's
shape and micro-batch per GPU (B 16, T 1024, bf16) trained on N GPUs, one rank each, by

  zerotrain-sK-nN  zerotrain at ZeRO stage K (0-3), mpirun -np N, NCCL between the GPUs;
  zerotrain-s0-n1  zerotrain stage 0 on one GPU: the baseline of the scaling efficiency;
  fsdp2-nN         PyTorch FSDP2 on N GPUs under torchrun, torchtitan's recipe
                   (tools/bench_multi_gpu_torch.py);

interleaved rounds as tools/bench_gpu.py runs them (bench_harness: every engine once a round, each
round one engine later, the figure the median over rounds of each round's median step, every
engine timed step to step, GPU state beside every block). Every figure is per GPU: tokens/s of one
GPU (B x T a step) and its MFU, so rows of 1 and N GPUs compare directly.

The JSON (--out, default runs/results/gpu_multi_gpu_bench_<device>.json), rewritten after every
block, carries each row's rounds with each rank's device memory (zerotrain: measured peaks and the
prediction per category; FSDP2: the largest peak allocated over the ranks), and the ratios:
stageK_over_fsdp2_tokens_per_s (with their same-round ratios) and stage0_scaling_efficiency (stage
0's tokens/s per GPU on N GPUs over one GPU's). No issue sets targets for them yet: they are
reported, not judged. Needs N GPUs (nvidia-smi's list cut to CUDA_VISIBLE_DEVICES); with fewer it
stops with one line and exit 2.

usage: python3 tools/bench_multi_gpu.py [--gpus N] [--zerotrain build/zerotrain] [--mpirun "mpirun ..."]
           [--python python3] [--rounds 3] [--steps 15] [--warmup 3] [--batch 16] [--engines NAME ...]
           [--time-limit S] [--out FILE] [--peak-tflops T]
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import gpt2_bench_engines  # noqa: E402  zerotrain's engine, the model's flops
import bench_harness  # noqa: E402
from gpu_state import gpu_state  # noqa: E402
from mpirun_command import MPIRUN  # noqa: E402
from repo_commit import binary_commit, head_commit  # noqa: E402
from result_paths import OneLineParser, check_out_file, default_out  # noqa: E402


class TorchRanks:
    """PyTorch FSDP2 on N ranks: one torchrun of tools/bench_multi_gpu_torch.py per block (its compile
    served by torch.compile's caches after the first), rank 0's JSON line its result."""

    clock = "step to step: the host's clock on rank 0, from one step's end (the loss read, a device sync) to the next's"

    def __init__(self, ranks):
        self.ranks = ranks
        self.name = f"fsdp2-n{ranks}"
        self.label = f"PyTorch FSDP2 fully_shard, compiled per block and loss, {ranks} GPUs"

    PROBE = ("import sys; sys.path.insert(0, sys.argv[1]); import bench_gpu_torch; "
             "sys.exit(bench_gpu_torch.fsdp2_api() is None)")

    def start(self, ctx):
        """Before any block: a torch with FSDP2 (an older one's torchrun may not even start)."""
        p = subprocess.run([ctx.args.python, "-c", self.PROBE, os.path.join(ROOT, "tools")], capture_output=True,
                           text=True, timeout=max(ctx.seconds_left(120), 0.1))
        if p.returncode != 0:
            version = subprocess.run([ctx.args.python, "-c", "import torch; print(torch.__version__)"],
                                     capture_output=True, text=True).stdout.strip() or "none"
            raise bench_harness.EngineError(f"the torch of {ctx.args.python} ({version}) has no FSDP2 (fully_shard): "
                                            "PyTorch 2.4 or later runs this anchor")

    def stop(self):
        pass

    def run(self, ctx, warmup, steps, profile=False):
        cmd = [ctx.args.python, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={self.ranks}",
               os.path.join(ROOT, "tools", "bench_multi_gpu_torch.py"), "--batch", str(ctx.args.batch),
               "--steps", str(steps), "--warmup", str(warmup), *ctx.args.torch_args]
        p = bench_harness.run_group(cmd, timeout=max(ctx.seconds_left(1800), 0.1), cwd=ctx.work)
        lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
        reply = json.loads(lines[-1]) if lines else {}
        if "error" in reply:
            raise bench_harness.EngineError(reply["error"])
        if "step_ms" not in reply:
            raise bench_harness.EngineError(f"exit {p.returncode}: {(p.stdout + p.stderr)[-2000:]}")
        if p.returncode != 0:  # rank 0 measured and printed; a teardown after it failed (torch's, at exit)
            reply.setdefault("facts", {})["exit_after_result"] = f"exit {p.returncode}: {p.stderr[-300:]}"
        return reply


def make_engines(gpus):
    engines = [gpt2_bench_engines.Zerotrain(f"zerotrain-s{k}-n{gpus}", k, ranks=gpus) for k in range(4)]
    engines += [gpt2_bench_engines.Zerotrain("zerotrain-s0-n1", 0), TorchRanks(gpus)]
    return {e.name: e for e in engines}


def ratios_of(rows, gpus):
    ok = {r["name"]: r for r in rows if "tokens_per_s" in r}
    ratios = {}
    fsdp = ok.get(f"fsdp2-n{gpus}")
    for k in range(4):
        zt = ok.get(f"zerotrain-s{k}-n{gpus}")
        if zt and fsdp:
            ratios[f"stage{k}_over_fsdp2_tokens_per_s"] = zt["tokens_per_s"] / fsdp["tokens_per_s"]
            paired = bench_harness.same_round_ratio(zt, fsdp)
            if paired:
                ratios[f"stage{k}_over_fsdp2_same_round"] = paired
    s0, one = ok.get(f"zerotrain-s0-n{gpus}"), ok.get("zerotrain-s0-n1")
    if s0 and one:
        ratios["stage0_scaling_efficiency"] = s0["tokens_per_s"] / one["tokens_per_s"]
        paired = bench_harness.same_round_ratio(s0, one)
        if paired:
            ratios["stage0_scaling_efficiency_same_round"] = paired
    return ratios


def memory_lines(rows):
    """Each row's device memory per rank, from its first measured block: zerotrain's fullest rank as the
    sum of its categories' peaks, beside the prediction's; FSDP2's largest peak allocated over the ranks."""
    gib = 1024 ** 3
    lines = ["device memory per rank (first block):"]
    for r in rows:
        m = next((b["memory"] for b in r["rounds"] if b.get("memory")), None)
        if not m:
            continue
        if "measured_peak_bytes" in m and m["measured_peak_bytes"]:
            fullest = max(sum(rank.values()) for rank in m["measured_peak_bytes"])
            predicted = sum((m.get("predicted_bytes") or {}).values())
            lines.append(f"  {r['label']}: {fullest / gib:.2f} GiB (its categories' peaks) on the fullest rank, "
                         f"predicted {predicted / gib:.2f}")
        elif "peak_allocated_bytes" in m:
            lines.append(f"  {r['label']}: {m['peak_allocated_bytes'] / gib:.2f} GiB peak allocated "
                         "(PyTorch's allocator)")
    return lines if len(lines) > 1 else []


def main(argv=None):
    ap = OneLineParser("bench_multi_gpu", description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=None, help="GPUs (ranks) to train on (default: every one visible)")
    ap.add_argument("--zerotrain", default=os.path.join(ROOT, "build", "zerotrain"))
    ap.add_argument("--mpirun", default=os.environ.get("ZT_SESSION_MPIRUN") or " ".join(MPIRUN),
                    help="the launcher and its flags, as one string")
    ap.add_argument("--python", default=sys.executable, help="interpreter with torch (2.4 or later) for FSDP2")
    ap.add_argument("--engines", nargs="+", default=None)
    ap.add_argument("--batch", type=int, default=16, help="micro-batch per GPU")
    bench_harness.add_run_arguments(ap)  # and the CPU test's (tests/tools/bench_multi_gpu_test.py)
    ap.add_argument("--fake-gpus", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    bench_harness.exit_on_sigterm()
    args.zerotrain_sets = dict(kv.split("=", 1) for kv in args.zerotrain_sets)
    args.zerotrain = os.path.abspath(args.zerotrain)
    visible = args.fake_gpus if args.fake_gpus is not None else bench_harness.visible_gpu_count()
    gpus = visible if args.gpus is None else args.gpus
    if gpus < 2 or gpus > visible:
        # Without --gpus it takes every one visible: "0 GPUs asked for" named a request never made.
        seen = "no GPU visible" if visible == 0 else f"{visible} GPU{'s' if visible > 1 else ''} visible"
        asked = "" if args.gpus is None else f"{gpus} GPUs asked for, "
        print(f"bench_multi_gpu: {asked}{seen}: this benchmark needs 2 or more", file=sys.stderr)
        sys.exit(2)
    engines = make_engines(gpus)
    chosen_names = args.engines or list(engines)
    unknown = [e for e in chosen_names if e not in engines]
    if unknown:
        sys.exit(f"bench_multi_gpu: unknown engine(s) {unknown}; known: {' '.join(engines)}")
    name, driver = (args.fake_device, "none") if args.fake_device else bench_harness.device_facts()
    n_params, flops_tok = gpt2_bench_engines.flops_per_token()
    peak, peak_source = bench_harness.peak_bf16_flops(name, args.peak_tflops)
    slug = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    out = args.out or default_out(f"gpu_multi_gpu_bench_{slug}.json")
    check_out_file("bench_multi_gpu", out)
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "commit": binary_commit(args.zerotrain) or head_commit() or "unknown",
            "checkout_commit": head_commit() or "unknown", "device": name, "driver": driver, "gpus": gpus, "batch_per_gpu": args.batch, "seq_len": gpt2_bench_engines.T,
            "params": n_params, "flops_per_token": flops_tok, "peak_bf16_flops": peak, "peak_source": peak_source,
            "figures": "per GPU", "rounds": args.rounds, "steps": args.steps, "warmup": args.warmup,
            "order": chosen_names, "gpu_state_at_start": gpu_state()}
    chosen = [engines[e] for e in chosen_names]
    rows = [{"name": e.name, "label": e.label, "ranks": getattr(e, "ranks", 1), "rounds": []} for e in chosen]

    def save(complete=False):
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out + ".tmp", "w") as f:
            json.dump({**meta, "complete": complete, "rows": rows, "ratios": ratios_of(rows, gpus)}, f, indent=1)
        os.replace(out + ".tmp", out)

    with tempfile.TemporaryDirectory() as work:
        ctx = bench_harness.Context.make(args, work, gpt2_bench_engines.VOCAB, peak)
        meta["rounds_run"] = bench_harness.interleave(chosen, rows, ctx, args.batch * gpt2_bench_engines.T, flops_tok, save)
    meta["gpu_state_at_end"] = gpu_state()
    save(complete=True)
    print(f"\nGPT-2 124M on {gpus} GPUs, B={args.batch} a GPU, T={gpt2_bench_engines.T}, bf16, {meta['rounds_run']} interleaved "
          f"rounds of {args.steps} timed steps after {args.warmup}, on {name}; tokens/s and MFU per GPU")
    bench_harness.print_rows(rows, width=64)
    for line in memory_lines(rows):
        print(line)
    for k, v in ratios_of(rows, gpus).items():
        bench_harness.print_ratio(k, v)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
