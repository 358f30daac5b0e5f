#!/usr/bin/env python3
"""Resume on other rank counts and ZeRO stages through the real store and optimizer: a run saved
at step 3 by N ranks at stage s, resumed on M ranks at stage t to step 6, ends with master,
exp_avg and exp_avg_sq bitwise equal to an uninterrupted one-process run (the synthetic gradients
and AdamW are elementwise, so any difference is the checkpoint's). fp32 and bf16.

usage: reshard_resume_test.py --driver PATH --config CFG -- MPIRUN [FLAGS...]
"""
import argparse
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
from check_report import Checks  # noqa: E402
from ckpt_format import STATES, read_units  # noqa: E402

# (dtype, N, s, M, t): saved by N ranks at stage s, resumed on M ranks at stage t.
CASES = [("f32", 3, 2, 2, 3), ("f32", 4, 3, 1, 0), ("f32", 2, 1, 4, 1), ("f32", 1, 0, 3, 2),
         ("bf16", 2, 3, 3, 1), ("bf16", 4, 0, 2, 3)]


def main():
    argv = sys.argv[1:]
    split = argv.index("--")
    parser = argparse.ArgumentParser()
    parser.add_argument("--driver", required=True)
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv[:split])
    mpirun = argv[split + 1:]
    checks = Checks()
    work = checks.work_folder("zt_resume_")

    def run(np_, folder, stage, start, stop, dtype):
        cmd = mpirun + ["-np", str(np_), args.driver, "run", folder, "--config", args.config, "--stage", str(stage),
                        "--from", str(start), "--to", str(stop), "--dtype", dtype]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        return r.returncode == 0, (r.stdout + r.stderr).strip()[-400:]

    references = {}
    for dtype in ("f32", "bf16"):
        folder = os.path.join(work, f"reference_{dtype}")
        ok, out = run(1, folder, 0, 0, 6, dtype)
        checks.check(ok, f"{dtype}: uninterrupted reference run, 6 steps on one rank" + ("" if ok else f": {out}"))
        references[dtype] = read_units(os.path.join(folder, "step_00000006"))[1] if ok else None

    for i, (dtype, n, s, m, t) in enumerate(CASES):
        folder = os.path.join(work, f"case{i}")
        what = f"{dtype}: saved at step 3 by {n} ranks at stage {s}, resumed on {m} ranks at stage {t}"
        ok1, out1 = run(n, folder, s, 0, 3, dtype)
        ok2, out2 = run(m, folder, t, 3, 6, dtype) if ok1 else (False, "")
        if not checks.check(ok1 and ok2, f"{what}: both runs exit 0" + ("" if ok1 and ok2 else f": {out1} {out2}")):
            continue
        manifest, units = read_units(os.path.join(folder, "step_00000006"))
        ref = references[dtype]
        same = ref is not None and all(np.array_equal(a, b) for st in STATES for a, b in zip(units[st], ref[st]))
        checks.check(same and manifest["optimizer_step"] == 6,
                     f"{what}: master, exp_avg, exp_avg_sq and step count at step 6 bitwise the uninterrupted run's")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
