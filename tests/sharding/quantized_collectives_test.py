#!/usr/bin/env python3
"""Quantized collectives (zero.gather_dtype, zero.cross_group_grad_dtype) through the real binary
and real ranks on the CPU, deterministic mode:

  * qwZ, N = 2, zero.gather_dtype = int8: stages 1-3 bitwise equal to each other (losses, gradient
    norms, final weights; also stage 3 with persistent units, which publish whole units and keep
    their exact shards apart), within the quantization's error of the exact run, every rank's
    measured peak per category = the prediction, each step's bytes and elements sent = `zerotrain
    memory --json`'s prediction (the set-up's publish staging too), and stage 3's bytes half the
    exact run's or less;
  * a stage 3 int8 run's checkpoint resumes bitwise (the exact shards are what is saved);
  * qgZ, N = 4 in groups of 2, zero.cross_group_grad_dtype = bf16 and int8: stages 1-3 bitwise
    equal to each other, bf16 at stage 0 too (bf16 rounds each value alone; int8 blocks follow the
    stage's chunking, so stage 0's differ), memory and bytes per hop as predicted, the bytes across
    the groups a half (bf16) and about a quarter (int8) of fp32's; both together at stage 3;
  * bf16 parameters with int8 gathers at stage 3: memory and bytes as predicted;
  * int8 gathers at stage 0 and a cross-group dtype without hybrid sharding are refused in one line.

usage: quantized_collectives_test.py MPIRUN [FLAGS...] -- PATH/TO/zerotrain
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402
from run_dir_util import (curve, memory_mismatches, mpi_driver, predicted_stage, ranks_trainer,  # noqa: E402
                          tensors, train_records)

CONFIG = {
    "model": {"n_layer": 3, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 64},
    "data": {"embedded_chars": 100000},
    "train": {"micro_batch": 4, "max_steps": 6, "eval_batches": 1, "eval_every": 3, "num_threads": 1,
              "deterministic": True},
    "optim": {"warmup_steps": 2},
    "log": {"sample_tokens": 0, "progress": "plain"},
}


def main():
    checks = Checks()
    launcher, binary, work, config, env = mpi_driver(checks, "zt_quantized_", CONFIG)
    check = checks.check

    train = ranks_trainer(check, launcher, binary, config, work, env)

    def steps(run_dir):
        return [r for r in train_records(run_dir) if r["type"] == "train"]

    def memory_and_bytes_exact(name, run_dir, ranks, *sets):
        m, bad = memory_mismatches(run_dir)
        check(not bad, f"{name}: every rank's measured peak equals the prediction per category ({bad[:4]})")
        setup = next((r for r in train_records(run_dir) if r["type"] == "setup_memory"), None)
        # The set-up's peak, the publish's staging with it, is the prediction's to the byte (bf16
        # parameters: without the fp32 unit copies only a step's fp32-activation kernels make).
        check(setup is not None and all(got == setup["predicted_bytes"] for got in setup["measured_peak_bytes"]),
              f"{name}: the set-up's peak on every rank equals the prediction per category, its publish staging "
              f"too ({setup and setup['measured_peak_bytes'][:1]} vs {setup and setup['predicted_bytes']})")
        doc = predicted_stage(binary, config, ranks, m["stage"], sets)
        got = [(r.get("comm_bytes_in_group", r["comm_bytes_sent"]), r.get("comm_bytes_across_groups", 0),
                r.get("comm_elements_in_group", r["comm_elements_sent"]), r.get("comm_elements_across_groups", 0))
               for r in steps(run_dir)]
        want = None if doc is None else (doc["bytes_per_step"]["in_group"], doc["bytes_per_step"]["across_groups"],
                                         doc["elements_per_step"]["in_group"], doc["elements_per_step"]["across_groups"])
        check(want is not None and all(g == want for g in got),
              f"{name}: bytes and elements sent per step (in the group, across) = predicted ({got[:1]} vs {want})")
        return got[0] if got else None

    def same_bits(name, dirs):
        ref = curve(train_records(dirs[0]))
        w0 = tensors(os.path.join(dirs[0], "final.safetensors"))
        check(all(curve(train_records(d)) == ref for d in dirs[1:]) and
              all(tensors(os.path.join(d, "final.safetensors")) == w0 for d in dirs[1:]),
              f"{name}: losses, gradient norms and final weights bitwise equal")

    # qwZ on 2 flat ranks.
    q = {}
    for stage in (1, 2, 3):
        sets = (f"zero.stage={stage}", "zero.gather_dtype=int8")
        q[stage] = train(f"N2_int8_stage{stage}", 2, *sets)
        if q[stage]:
            memory_and_bytes_exact(f"N2 int8 stage {stage}", q[stage], 2, *sets)
    persist = ("zero.stage=3", "zero.gather_dtype=int8", "zero.param_persistence_threshold=5000")
    q["persist"] = train("N2_int8_stage3_persistent", 2, *persist)
    if q["persist"]:
        memory_and_bytes_exact("N2 int8 stage 3 persistent units", q["persist"], 2, *persist)
    if all(q.values()):
        same_bits("N2 int8 gathers, stages 1, 2, 3 and 3 with persistent units", [q[1], q[2], q[3], q["persist"]])
    exact3 = train("N2_exact_stage3", 2, "zero.stage=3")
    if exact3 and q[3]:
        a, b = [r["loss"] for r in steps(q[3])], [r["loss"] for r in steps(exact3)]
        check(a != b and all(abs(x - y) < 0.02 for x, y in zip(a, b)),
              f"N2 int8 stage 3 within the quantization's error of the exact run, not equal ({a} vs {b})")
        qb, eb = steps(q[3])[0]["comm_bytes_sent"], steps(exact3)[0]["comm_bytes_sent"]
        check(qb <= 0.55 * eb, f"N2 stage 3: int8 gathers send {qb} bytes a step, exact {eb} ({qb / eb:.3f}x)")

    ck = train("N2_int8_stage3_ckpt", 2, "zero.stage=3", "zero.gather_dtype=int8", "checkpoint.every_steps=3")
    if ck:
        step3 = os.path.join(ck, "checkpoints", "step_00000003")
        resumed = train("N2_int8_stage3_resumed", 2, "zero.stage=3", "zero.gather_dtype=int8", extra=["--resume", step3])
        if resumed:
            check([r for r in curve(train_records(resumed)) if r[0] > 3] ==
                  [r for r in curve(train_records(ck)) if r[0] > 3],
                  "int8 gathers: resumed at step 3, steps 4-6 bitwise equal to the uninterrupted run")

    bf = ("zero.stage=3", "zero.gather_dtype=int8", "precision.param_dtype=bf16")
    d = train("N2_int8_stage3_bf16", 2, *bf)
    if d:
        memory_and_bytes_exact("N2 int8 stage 3 bf16 parameters", d, 2, *bf)

    # qgZ on 4 ranks in groups of 2.
    across = {}
    for wire in ("fp32", "bf16", "int8"):
        runs = {}
        for stage in (0, 1, 3):
            sets = (f"zero.stage={stage}", "zero.shard_group_size=2", f"zero.cross_group_grad_dtype={wire}")
            runs[stage] = train(f"N4_g2_{wire}_stage{stage}", 4, *sets)
            if runs[stage]:
                sent = memory_and_bytes_exact(f"N4 g2 across {wire} stage {stage}", runs[stage], 4, *sets)
                if stage == 1 and sent:
                    across[wire] = sent[1]
        if wire != "fp32" and all(runs.values()):
            same_bits(f"N4 g2 across {wire}, stages 1 and 3", [runs[1], runs[3]])
            if wire == "bf16":
                same_bits("N4 g2 across bf16, stages 0 and 1", [runs[0], runs[1]])
    if len(across) == 3:
        check(across["bf16"] * 2 <= across["fp32"] * 1.01 and across["int8"] <= 0.27 * across["fp32"],
              f"bytes across the groups per step at stage 1: fp32 {across['fp32']}, bf16 {across['bf16']}, "
              f"int8 {across['int8']}")
    both = ("zero.stage=3", "zero.shard_group_size=2", "zero.cross_group_grad_dtype=int8", "zero.gather_dtype=int8")
    d = train("N4_g2_both_int8_stage3", 4, *both)
    if d:
        memory_and_bytes_exact("N4 g2 int8 gathers and int8 across, stage 3", d, 4, *both)

    for ranks, sets, key, what in [(1, ["zero.gather_dtype=int8"], "gather_dtype", "int8 gathers at stage 0"),
                                   (1, ["zero.stage=2", "zero.cross_group_grad_dtype=int8"], "cross_group_grad_dtype",
                                    "a cross-group dtype without hybrid sharding")]:
        p = subprocess.run([binary, "train", "--config", config, "--run-dir", os.path.join(work, "refused"),
                            *[a for kv in sets for a in ("--set", kv)]], capture_output=True, text=True, timeout=60)
        errors = [line for line in p.stderr.splitlines() if "error" in line]
        check(p.returncode == 2 and len(errors) == 1 and key in errors[0], f"{what} refused in one line ({errors})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
