#!/usr/bin/env python3
"""log.profile_ops times the parameter store's collectives beside the ops ([Note: exposed
communication] in kernels/op_profiler.h): 2 MPI ranks at ZeRO stage 3 write an op_profile.json whose
"communication" counts the step's collectives (per layer unit: a gather in forward, one in backward
and a reduce-scatter, plus the trainer's loss all-reduce and the norm's gather), with time in flight
= overlapped + exposed, and the printed table says so; one rank on the solo path times none.

usage: comm_profile_test.py MPIRUN [MPIRUN FLAGS...] -- PATH/TO/zerotrain
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402

CONFIG = {
    "model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 64},
    "data": {"embedded_chars": 50000},
    "train": {"micro_batch": 4, "max_steps": 4, "eval_batches": 1, "num_threads": 1},
    "log": {"sample_tokens": 0, "progress": "plain", "profile_ops": True},
}


def main():
    split = sys.argv.index("--")
    launcher, binary = sys.argv[1:split], sys.argv[split + 1]
    checks = Checks()
    work = checks.work_folder("zt_comm_profile_")
    config = os.path.join(work, "config.json")
    with open(config, "w") as f:
        json.dump(CONFIG, f)
    for ranks in (2, 1):
        run_dir = os.path.join(work, f"n{ranks}")
        cmd = ([binary] if ranks == 1 else launcher + ["-np", str(ranks), binary]) + [
            "train", "--config", config, "--run-dir", run_dir, "--set", "zero.stage=3"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if not checks.check(p.returncode == 0, f"N={ranks}: the profiled run succeeds ({p.stderr[-300:]})"):
            continue
        with open(os.path.join(run_dir, "op_profile.json")) as f:
            profile = json.load(f)
        comm = profile.get("communication")
        if ranks == 1:
            checks.check(comm is None, "N=1 on the solo path: no collective timed")
            continue
        if not checks.check(comm is not None, "N=2: the profile has a communication section"):
            continue
        # 4 units (embeddings, 2 blocks, final LayerNorm): 8 gathers (the head's kept through
        # backward: 7) and 4 reduce-scatters; the loss all-reduce and the norm's all-gather.
        checks.check(comm["calls_per_step"] >= 10, f"N=2: the step's collectives are counted ({comm['calls_per_step']})")
        busy, hidden, exposed = (comm[k] for k in ("busy_ms_per_step", "overlapped_ms_per_step",
                                                   "exposed_ms_per_step"))
        checks.check(busy > 0 and hidden >= 0 and exposed >= 0 and abs(busy - hidden - exposed) < 1e-9 and
                     busy <= comm["kernel_ms_per_step"] + 1e-9 and comm["exposed_share"] <= 1.0,
                     f"N=2: in flight = overlapped + exposed ({busy:.3f} = {hidden:.3f} + {exposed:.3f}), at most "
                     f"the spans' sum, exposed at most the step")
        checks.check("communication:" in p.stdout and "exposed" in p.stdout, "N=2: the printed table has the line")

    # A profile that cannot be written at the run's end (rank 0 alone writes it): the final weights
    # are written first, and the other rank, ended in the final evaluation's collective, says so
    # (it said "interrupted at the gather of final.safetensors", the context before).
    late = os.path.join(work, "late")
    os.makedirs(os.path.join(late, "op_profile.json.tmp"))
    p = subprocess.run(launcher + ["-np", "2", binary, "train", "--config", config, "--run-dir", late],
                       capture_output=True, text=True, timeout=300)
    checks.check(p.returncode != 0 and "cannot write the op profile (the run's weights and checkpoints are written)"
                 in p.stderr and os.path.exists(os.path.join(late, "final.safetensors")) and
                 "gather of final.safetensors" not in p.stderr,
                 f"N=2, a profile that cannot be written: final weights kept, no rank blames their gather "
                 f"({p.returncode}, {p.stderr.strip()[-600:]!r})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
