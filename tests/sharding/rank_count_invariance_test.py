#!/usr/bin/env python3
"""The same bits at any rank count (train.deterministic; docs/zero_memory.md, "The same bits at any
rank count"): real ranks under mpirun train one global batch of M fixed micro-batches and must give
bitwise identical losses, gradient norms, validation losses and final weights at every rank count N
dividing M and every ZeRO stage (the 5 validation batches split over the ranks, ceil(5 / N) each).

  * GPT-2 (2 layers, dropout 0.1, clipping), M = 8 micro-batches of 3 sequences: N = 1 stage 0 as
    the reference; N = 2 stages 1 and 2, N = 4 stages 0 and 3, N = 8 stage 3 (one micro-batch a rank);
  * bf16 parameters: N = 1 stage 0, N = 2 stage 3, N = 4 stage 2;
  * a tied unit reduced in two rounds a micro-batch (head_chunks 2), half-block units and full
    activation checkpointing: N = 1 against N = 4 stage 3;
  * N that is not a power of two: M = 12, N = 1 against N = 3 stage 3 and N = 6 stage 1;
  * a Llama-style model (grouped-query heads, untied head): N = 1 against N = 4 stage 3;
  * any thread count: a model whose products OpenBLAS would split among threads, N = 1 at 1 and 3
    threads against N = 2 stage 3 at 2 threads a rank;
  * a checkpoint written at N = 2 (stage 2, step 4) resumed at N = 4 (stage 3) finishes with the
    reference's steps 5-8 and final weights, bit for bit; resumed with another micro-batch it says
    that the bits will differ (they follow the micro-batch);
  * memory measured = predicted per rank and category, and the bytes sent per step = predicted
    (`zerotrain memory --json`), at N = 4 stage 3, bf16 stage 2, and N = 2 stages 1 and 2 (grad_accum 4);
  * N that does not divide M is refused with exit 2 and one line naming the batch.

usage: rank_count_invariance_test.py MPIRUN [MPIRUN FLAGS...] -- PATH/TO/zerotrain
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402
from run_dir_util import (curve, memory_mismatches, mpi_driver, predicted_stage, ranks_trainer,  # noqa: E402
                          tensors, train_records)

CONFIG = {
    "model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 64, "dropout": 0.1},
    "data": {"embedded_chars": 200000},
    "train": {"micro_batch": 3, "global_batch_tokens": 8 * 3 * 32, "max_steps": 8, "eval_every": 4,
              "eval_batches": 5, "num_threads": 1, "deterministic": True},
    "optim": {"lr": 3e-3, "warmup_steps": 2, "grad_clip": 1.0},
    "log": {"sample_tokens": 0, "progress": "plain", "every_steps": 100},
}
TWELVE = f"train.global_batch_tokens={12 * 3 * 32}"
LLAMA_CONFIG = {**CONFIG, "model": {"arch": "llama", "n_layer": 2, "n_head": 4, "n_kv_head": 2, "n_embd": 32,
                                     "block_size": 32, "vocab_size": 64}}


def main():
    checks = Checks()
    launcher, binary, work, config, env = mpi_driver(checks, "zt_any_n_", CONFIG)
    check = checks.check
    train = ranks_trainer(check, launcher, binary, config, work, env)

    def result(run_dir):
        recs = train_records(run_dir)
        evals = [r["val_loss"] for r in recs if r["type"] == "eval"]
        return curve(recs), evals, tensors(os.path.join(run_dir, "final.safetensors"))

    def same_bits(what, ref_dir, dirs):
        if ref_dir is None or any(d is None for _, d in dirs):  # dirs: (name, run directory) pairs
            check(False, f"{what}: every run finished")
            return
        ref = result(ref_dir)
        for name, d in dirs:
            got = result(d)
            differs = [k for k in ref[2] if got[2].get(k) != ref[2][k]]
            check(got[0] == ref[0] and got[1] == ref[1] and not differs,
                  f"{what}: {name} has the reference's losses, norms, validation losses and weights bit for bit"
                  + ("" if not differs else f" (tensors differ: {differs[:3]})")
                  + ("" if got[0] == ref[0] else f" (curves {got[0][:2]} vs {ref[0][:2]})"))

    def exact_memory_and_bytes(name, run_dir, ranks, *sets):
        if run_dir is None:
            return
        m, bad = memory_mismatches(run_dir)
        check(not bad, f"{name}: every rank's measured peak equals the prediction per category ({bad[:4]})")
        doc = predicted_stage(binary, config, ranks, m["stage"], sets)
        got = {(r["comm_bytes_sent"], r["comm_elements_sent"]) for r in train_records(run_dir) if r["type"] == "train"}
        want = None if doc is None else (doc["bytes_per_step"]["in_group"], doc["elements_per_step"]["in_group"])
        check(got == {want}, f"{name}: bytes and elements sent per step = predicted ({got} vs {want})")

    # GPT-2, fp32, every stage somewhere, N = 1 .. 8.
    ref = train("n1_stage0", 1, "zero.stage=0")
    same_bits("M = 8", ref, [(f"N={n} stage {s}", train(f"n{n}_stage{s}", n, f"zero.stage={s}"))
                             for n, s in ((2, 1), (2, 2), (4, 0), (4, 3), (8, 3))])
    # Each rank evaluates its share of the 5 validation batches ([Note: the evaluation split over
    # ranks]), one more round than the others' where 5 does not divide: the losses above are the
    # one-rank run's all the same.
    shares = {}
    for n, s in ((1, 0), (2, 1), (4, 3), (8, 3)):
        d = os.path.join(work, f"n{n}_stage{s}")
        shares[n] = sorted({r.get("val_batches_per_rank") for r in train_records(d) if r["type"] == "eval"}) \
            if os.path.exists(os.path.join(d, "metrics.jsonl")) else None
    check(shares == {1: [5], 2: [3], 4: [2], 8: [1]},
          f"N ranks evaluate ceil(5 / N) batches each ({shares})")
    exact_memory_and_bytes("N=4 stage 3", os.path.join(work, "n4_stage3"), 4, "zero.stage=3")
    # Four micro-batches a rank: the prediction adds the middle ones' counts once they repeat
    # (predict_step_volume) instead of replaying each.
    for s in (1, 2):
        exact_memory_and_bytes(f"N=2 stage {s} (grad_accum 4)", os.path.join(work, f"n2_stage{s}"), 2, f"zero.stage={s}")

    # bf16 parameters (bf16 pending buffers, widened before they are added).
    bf16 = "precision.param_dtype=bf16"
    ref16 = train("bf16_n1", 1, bf16, "zero.stage=0")
    n4_16 = train("bf16_n4_stage2", 4, bf16, "zero.stage=2")
    same_bits("bf16", ref16, [("N=2 stage 3", train("bf16_n2_stage3", 2, bf16, "zero.stage=3")), ("N=4 stage 2", n4_16)])
    exact_memory_and_bytes("bf16 N=4 stage 2", n4_16, 4, bf16, "zero.stage=2")

    # Units reduced in rounds (the token table's chunks: head and embedding), half-block units.
    units = ("model.vocab_size=128", "train.head_chunks=2", "train.block_units=2", "train.activation_checkpointing=all")
    same_bits("head_chunks 2", train("chunks_n1", 1, *units),
              [("N=4 stage 3", train("chunks_n4", 4, *units, "zero.stage=3"))])

    # Any N dividing M: M = 12 at N = 3 and 6.
    same_bits("M = 12", train("m12_n1", 1, TWELVE),
              [("N=3 stage 3", train("m12_n3", 3, TWELVE, "zero.stage=3")),
               ("N=6 stage 1", train("m12_n6", 6, TWELVE, "zero.stage=1"))])

    # Any thread count: products wide enough for OpenBLAS to split among threads, whose last bits
    # would follow the split ([Note: products the same at any thread count]).
    wide = ("model.n_embd=128", "model.n_head=4", "model.block_size=64", "train.micro_batch=4",
            f"train.global_batch_tokens={4 * 4 * 64}", "train.max_steps=3", "train.eval_every=3")
    same_bits("threads", train("wide_n1_t1", 1, *wide),
              [("N=1 at 3 threads", train("wide_n1_t3", 1, *wide, "train.num_threads=3")),
               ("N=2 stage 3 at 2 threads a rank", train("wide_n2_t2", 2, *wide, "train.num_threads=2", "zero.stage=3"))])

    # A Llama-style model (no dropout: its own config).
    llama_config = os.path.join(work, "llama.json")
    with open(llama_config, "w") as f:
        json.dump(LLAMA_CONFIG, f)
    train_llama = ranks_trainer(check, launcher, binary, llama_config, work, env)
    same_bits("llama", train_llama("llama_n1", 1), [("N=4 stage 3", train_llama("llama_n4", 4, "zero.stage=3"))])

    # A checkpoint written at N = 2 resumes at N = 4 and finishes as the uninterrupted N = 1 run.
    first = train("resume_n2", 2, "zero.stage=2", "checkpoint.every_steps=4")
    if first is not None:
        resumed_dir = os.path.join(work, "resume_n4")
        shutil.copytree(first, resumed_dir)
        step4 = os.path.join(resumed_dir, "checkpoints", "step_00000004")
        resumed = train("resume_n4", 4, "zero.stage=3", extra=("--resume", step4))
        if resumed is not None and ref is not None:
            got, want = result(resumed), result(ref)
            check(got[0] == want[0] and got[2] == want[2],
                  "a checkpoint of N = 2 (stage 2) resumed at N = 4 (stage 3): steps 1-8 and the final weights are "
                  "the N = 1 run's, bit for bit")

        # The same checkpoint with another micro-batch (the same global batch): the same trajectory,
        # other bits, which the resume says by name.
        other_dir = os.path.join(work, "resume_mb")
        shutil.copytree(first, other_dir)
        p = subprocess.run(launcher + ["-np", "2", binary, "train", "--config", config, "--run-dir", other_dir,
                                       "--resume", os.path.join(other_dir, "checkpoints", "step_00000004"),
                                       "--set", "train.micro_batch=6"], capture_output=True, text=True, timeout=120,
                           env=env)
        named = [ln for ln in (p.stdout + p.stderr).splitlines() if "train.micro_batch: 3 -> 6" in ln]
        check(p.returncode == 0 and named != [],
              f"a resume with micro_batch 3 -> 6 in deterministic mode says the bits will differ ({p.returncode}: "
              f"{named[:1]})")

    # N that does not divide the global batch: refused before anything runs.
    p = subprocess.run(launcher + ["-np", "3", binary, "train", "--config", config, "--run-dir",
                                   os.path.join(work, "n3_refused")], capture_output=True, text=True, timeout=120,
                       env=env)
    message = [ln for ln in (p.stdout + p.stderr).splitlines() if "global_batch_tokens" in ln]
    check(p.returncode == 2 and message != [],
          f"N = 3 with M = 8 micro-batches: exit 2 naming the global batch ({p.returncode}: {message[:1]})")

    sys.exit(checks.finish())


if __name__ == "__main__":
    main()
