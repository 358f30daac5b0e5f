#!/usr/bin/env python3
"""The staged collectives path (StagedCommunicator, what comm.backend = "mpi" runs on a GPU) end to
end on CPU ranks: with the ZT_TEST_STAGED_COLLECTIVES hook the parameter store's collectives go
through host staging whose copies run late (engine/distributed/comm/host_staging_device.h), over MPI. It must
change nothing but where the bytes wait:

- N = 2 and 3, stages 0-3, bf16 parameters, deterministic reductions (also with the head in
  vocabulary chunks, blocks in two units and gradient accumulation): losses, gradient norms and final
  weights bitwise those of the plain MPI path at the same N and stage, and the stages bitwise equal.
- The memory each rank measures equals the prediction to the byte, per category (the staging is host
  memory the staged communicator tracks apart; the run's categories pay only the store's buffers).
- One rank with zero.solo_path = false (every collective kept at a world of one, on the local
  communicator, staged, and under `mpirun -np 1` on MPI's): stages 0-3 bitwise the solo path's,
  memory as predicted.
- A staged stage-3 checkpoint resumes bitwise, staged and on the plain MPI path.

usage: staged_collectives_test.py MPIRUN [MPIRUN FLAGS...] -- PATH/TO/zerotrain
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402
from run_dir_util import run_result  # noqa: E402

CONFIG = {
    "model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 300},
    "data": {"embedded_chars": 100000},
    "train": {"micro_batch": 4, "max_steps": 8, "eval_batches": 1, "num_threads": 1, "deterministic": True},
    "precision": {"param_dtype": "bf16"},
    "log": {"sample_tokens": 0, "progress": "plain", "every_steps": 100},
}
report = Checks()
check = report.check


def train(launcher, binary, work, name, ranks, staged, *overrides, under_mpi=False):
    run_dir = os.path.join(work, name)
    env = dict(os.environ)
    under_mpi = under_mpi or ranks > 1
    cmd = launcher + ["-np", str(ranks)] if under_mpi else [binary]
    if staged:
        env["ZT_TEST_STAGED_COLLECTIVES"] = "1"
        if under_mpi:
            cmd += ["-x", "ZT_TEST_STAGED_COLLECTIVES"]
    if under_mpi:
        cmd += [binary]
    cmd += ["train", "--config", os.path.join(work, "config.json"), "--run-dir", run_dir]
    for o in overrides:
        cmd += ["--set", o]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if p.returncode != 0:
        print(p.stdout[-2000:], p.stderr[-2000:])
        check(False, f"{name}: exit {p.returncode}")
        return None
    header = next((l for l in p.stdout.splitlines() if l.startswith("ZeRO stage")), "")
    return {**run_result(run_dir), "header": header}


def same_bits(a, b):
    return a["loss"] == b["loss"] and a["norm"] == b["norm"] and a["weights"] == b["weights"]


def memory_as_predicted(run, name):
    rec = run["memory"]
    if rec is None:
        return check(False, f"{name}: a memory record")
    bad = [(rank, cat, m[cat], p) for rank, m in enumerate(rec["measured_peak_bytes"])
           for cat, p in rec["predicted_bytes"].items() if m[cat] != p]
    return check(not bad, f"{name}: every rank's measured memory equals the prediction per category"
                          f"{'' if not bad else ' (rank, category, measured, predicted: ' + str(bad[:3]) + ')'}")


def main():
    split = sys.argv.index("--")
    launcher, binary = sys.argv[1:split], sys.argv[split + 1]
    work = report.work_folder("zt_staged_")
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump(CONFIG, f)
    cases = [(2, ()), (3, ("train.head_chunks=3", "train.block_units=2")),
             (2, ("train.grad_accum=2", "train.micro_batch=2"))]
    for n, extra in cases:
        what = f"N={n}{' ' + ' '.join(extra) if extra else ''}"
        plain = {st: train(launcher, binary, work, f"plain_n{n}_s{st}_{len(extra)}", n, False, f"zero.stage={st}", *extra)
                 for st in range(4)}
        staged = {st: train(launcher, binary, work, f"staged_n{n}_s{st}_{len(extra)}", n, True, f"zero.stage={st}",
                            *extra) for st in range(4)}
        if any(r is None for r in list(plain.values()) + list(staged.values())):
            continue
        check("staged through host memory" in staged[3]["header"], f"{what}: the run says its collectives are staged "
                                                                   f"({staged[3]['header']!r})")
        for st in range(4):
            check(same_bits(staged[st], plain[st]), f"{what} stage {st}: staged = plain MPI, bitwise (losses, norms, "
                                                    f"weights; final loss {staged[st]['loss'][-1]:.6f})")
            memory_as_predicted(staged[st], f"{what} stage {st} staged")
        check(all(same_bits(staged[st], staged[0]) for st in range(4)), f"{what}: staged stages 0-3 bitwise equal")
    # One rank with every collective kept (zero.solo_path = false): on the local communicator,
    # staged over it, and under `mpirun -np 1` on an MPI communicator of one rank (which stages
    # nothing either); the same bits as the solo path, which calls none.
    # (Under mpirun without train.deterministic, so that the reductions are reduce-scatters and
    # all-reduces rather than the fold's exchange.)
    solo = train(launcher, binary, work, "n1_solo_s0", 1, False, "zero.stage=0")
    solo_free = train(launcher, binary, work, "n1_solo_s0_free", 1, False, "zero.stage=0", "train.deterministic=false")
    for staged, mpi in ((False, False), (True, False), (False, True)):
        for st in range(4):
            name = f"N=1 stage {st} zero.solo_path=false{' staged' if staged else ''}{' under mpirun' if mpi else ''}"
            extra = ("train.deterministic=false",) if mpi else ()
            r = train(launcher, binary, work, f"n1_kept_s{st}_{int(staged)}{int(mpi)}", 1, staged, f"zero.stage={st}",
                      "zero.solo_path=false", *extra, under_mpi=mpi)
            ref = solo_free if mpi else solo
            if r is None or ref is None:
                continue
            check(same_bits(r, ref), f"{name}: bitwise the solo path's")
            memory_as_predicted(r, name)
    # A staged stage-3 checkpoint (saved through the staged gathers) resumes bitwise, staged and plain.
    full = train(launcher, binary, work, "ckpt_full", 2, True, "zero.stage=3", "train.max_steps=8")
    first = train(launcher, binary, work, "ckpt_first", 2, True, "zero.stage=3", "train.max_steps=8",
                  "optim.decay_steps=8", "train.max_steps=4", "checkpoint.at_end=true")
    if full is not None and first is not None:
        for staged in (True, False):
            cmd_over = ["zero.stage=3", "train.max_steps=8", "optim.decay_steps=8"]
            name = f"resume_{'staged' if staged else 'plain'}"
            run_dir = os.path.join(work, name)
            env = dict(os.environ, ZT_TEST_STAGED_COLLECTIVES="1" if staged else "0")
            cmd = launcher + ["-np", "2", "-x", "ZT_TEST_STAGED_COLLECTIVES", binary, "train", "--config",
                              os.path.join(work, "config.json"), "--run-dir", run_dir, "--resume",
                              os.path.join(first["run_dir"], "checkpoints")]
            for o in cmd_over:
                cmd += ["--set", o]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
            if not check(p.returncode == 0, f"a staged 2-rank stage-3 checkpoint resumes {'staged' if staged else 'on plain MPI'} "
                                            f"({p.stderr.strip()[-200:]})"):
                continue
            with open(os.path.join(run_dir, "metrics.jsonl")) as f:
                losses = [json.loads(l)["loss"] for l in f if '"train"' in l]
            check(losses == full["loss"][4:], f"... and its steps 5-8 are bitwise the uninterrupted run's "
                                              f"({losses[-1] if losses else None} vs {full['loss'][-1]})")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
