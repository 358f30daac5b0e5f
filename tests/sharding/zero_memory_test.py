#!/usr/bin/env python3
"""Measured memory against the prediction: one training step under mpirun at N = 1..4 ranks,
ZeRO stages 0-3, f32 and bf16 (and deterministic reductions at N = 3). After the step, `train`
writes every rank's measured peak per category beside engine/distributed/sharding/memory_model's prediction
to metrics.jsonl; the contract (docs/zero_memory.md) is measured == predicted, to the byte, for
every rank and category (every rank allocates the same padded buffers, and every collective is
waited at a fixed point of the program, so the peaks are deterministic). The zero options that
move buffers (prefetch depth, reductions in flight, resharding after forward, the persistence
threshold, fp32 gradient shards, no overlap) and bf16 activations are each run once at N = 3. Also: at N = 4 each stage
needs less model-state memory per rank than the stage before (what ZeRO is for; with 6 layers, so
that the units alive at once (two gathered blocks, three pending gradients) are a small part).

usage: zero_memory_test.py MPIRUN [FLAGS...] -- PATH/TO/zerotrain
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402

CONFIG = {
    "model": {"n_layer": 6, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 64},
    "data": {"embedded_chars": 100000},
    "train": {"micro_batch": 4, "max_steps": 1, "eval_batches": 1, "num_threads": 1},
    "log": {"sample_tokens": 0, "progress": "plain"},
}
MODEL_STATES = ["parameters", "gradients", "master_weights", "optimizer_states"]
report = Checks(quiet_ok=True)
check = report.check


def memory_record(launcher, binary, work, ranks, stage, dtype, det, extra=()):
    run_dir = os.path.join(work, f"n{ranks}_s{stage}_{dtype}_{det}_{len(os.listdir(work))}")
    cmd = ([binary] if ranks == 1 else launcher + ["-np", str(ranks), binary])
    cmd += ["train", "--config", os.path.join(work, "config.json"), "--run-dir", run_dir, "--set", f"zero.stage={stage}",
            "--set", f"precision.param_dtype={dtype}", "--set", f"train.deterministic={'true' if det else 'false'}"]
    for kv in extra:
        cmd += ["--set", kv]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        print(p.stdout[-1500:], p.stderr[-1500:])
        return None
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return next(json.loads(l) for l in f if '"type": "memory"' in l or '"type":"memory"' in l)


def main():
    split = sys.argv.index("--")
    launcher, binary = sys.argv[1:split], sys.argv[split + 1]
    work = report.work_folder("zt_zero_mem_")
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump(CONFIG, f)
    runs = [(n, st, dt, False, ()) for n in (1, 2, 3, 4) for st in range(4) for dt in ("f32", "bf16")]
    runs += [(3, st, "bf16", True, ()) for st in range(4)]
    # Deterministic accumulation: stages 0-1 reduce every micro-batch through a pending buffer.
    runs += [(3, st, dt, True, ("train.grad_accum=2",)) for st in (0, 1) for dt in ("f32", "bf16")]
    variants = [("zero.prefetch_units=2",), ("zero.prefetch_units=0",), ("zero.max_inflight_reductions=1",),
                ("zero.reshard_after_forward=false",), ("zero.param_persistence_threshold=5000",),
                ("zero.grad_shard_dtype=fp32",), ("zero.overlap_comm=false",), ("precision.activations=bf16",),
                ("zero.max_inflight_reduction_mb=0.03",)]
    runs += [(3, st, "bf16", False, v) for v in variants for st in (2, 3)]
    # The head in vocabulary chunks: smaller head activations, and the tied embeddings' gradient
    # reduced in two rounds (pending at every stage on several ranks; per micro-batch in
    # deterministic mode with accumulation).
    chunked = ("model.vocab_size=300", "train.head_chunks=3")
    runs += [(3, st, "bf16", False, chunked) for st in range(4)]
    runs += [(2, st, "f32", True, chunked + ("train.grad_accum=2",)) for st in (0, 1)]
    # Blocks in attention and MLP units, with checkpointing (both halves acquired to recompute),
    # and with the head in chunks and no prefetch (the smallest stage-3 footprint).
    runs += [(3, st, "bf16", False, ("train.block_units=2",)) for st in (2, 3)]
    runs += [(3, 3, "bf16", False, ("train.block_units=2", "train.activation_checkpointing=every:2")),
             (3, 3, "bf16", False, chunked + ("train.block_units=2", "zero.prefetch_units=0"))]
    states_at_4 = {}
    grads_at_3 = {}
    for n, st, dt, det, extra in runs:
        name = f"N={n} stage {st} {dt}{' deterministic' if det else ''}{' ' + ' '.join(extra) if extra else ''}"
        rec = memory_record(launcher, binary, work, n, st, dt, det, extra)
        check(rec is not None, f"{name}: the run succeeds")
        if rec is None:
            continue
        predicted = rec["predicted_bytes"]
        worst = 0.0
        check(len(rec["measured_peak_bytes"]) == n, f"{name}: a measured peak from each of the {n} ranks")
        for rank, measured in enumerate(rec["measured_peak_bytes"]):
            for cat, p in predicted.items():
                m = measured[cat]
                check(m == p, f"{name} rank {rank} {cat}: measured {m} vs predicted {p}")
                if p:
                    worst = max(worst, abs(m - p) / p)
        print(f"ok    {name}: every rank and category as predicted (worst relative gap {worst:.2%})")
        if n == 3 and dt == "bf16" and not det and st == 2 and extra in ((), ("zero.grad_shard_dtype=fp32",)):
            grads_at_3[extra] = rec["measured_peak_bytes"][0]["gradients"]
        if n == 4 and dt == "bf16" and not extra:
            states_at_4[st] = max(sum(r[c] for c in MODEL_STATES) for r in rec["measured_peak_bytes"])
    # Issue 21's 8-layer test model (configs/tiny.json's shape, 8 layers) at N = 4 in bf16: with
    # blocks in attention and MLP units and a 0.1 MiB in-flight bound, stage 3 measures at least
    # 3.5x less model-state memory per rank than stage 0 (whole blocks: about 3.04x).
    tiny8 = ("model.n_layer=8", "model.n_head=4", "model.n_embd=128", "model.block_size=64", "train.micro_batch=16",
             "train.block_units=2", "zero.max_inflight_reduction_mb=0.1")
    tiny8_states = {}
    for st in (0, 3):
        rec = memory_record(launcher, binary, work, 4, st, "bf16", False, tiny8)
        if not check(rec is not None, f"8-layer model N=4 stage {st}: the run succeeds"):
            continue
        check(all(m == rec["predicted_bytes"] for m in rec["measured_peak_bytes"]),
              f"8-layer model N=4 stage {st}: every rank and category as predicted")
        tiny8_states[st] = max(sum(r[c] for c in MODEL_STATES) for r in rec["measured_peak_bytes"])
    if len(tiny8_states) == 2:
        ratio = tiny8_states[0] / tiny8_states[3]
        print(f"8-layer model at N=4, bf16, block_units 2: measured model states per rank {tiny8_states}, "
              f"stage 0 / stage 3 = {ratio:.2f}")
        check(ratio >= 3.5, f"8-layer model N=4, block_units 2: stage 3 holds {ratio:.2f}x less model state than "
                            f"stage 0 (>= 3.5x; measured {tiny8_states})")
    if len(states_at_4) == 4:
        print("measured model states per rank at N=4, bf16:", states_at_4)
        check(all(states_at_4[s] < states_at_4[s - 1] for s in (1, 2, 3)),
              "at N=4 each stage needs less model-state memory per rank than the one before")
    if len(grads_at_3) == 2:
        check(grads_at_3[("zero.grad_shard_dtype=fp32",)] > grads_at_3[()],
              f"fp32 gradient shards cost more than working-dtype ones: {grads_at_3}")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
