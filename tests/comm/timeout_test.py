#!/usr/bin/env python3
"""A rank that never reaches a collective: the other ranks must stop within their timeout with a
one-line error naming the collective and the step, and the whole MPI job must end (no hang).

usage: timeout_test.py MPIRUN_PREFIX... -- PATH/TO/zt_comm_tests
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402


def main():
    split = sys.argv.index("--")
    launcher, binary = sys.argv[1:split], sys.argv[split + 1]
    env = dict(os.environ, ZT_COMM_TEST_SCENARIO="timeout")
    start = time.time()
    p = subprocess.run(launcher + ["-np", "3", binary], capture_output=True, text=True, env=env, timeout=120)
    elapsed = time.time() - start
    output = p.stdout + p.stderr
    print(output[-2000:])
    errors = [l for l in output.splitlines() if l.startswith("zerotrain: error:")]
    checks = [
        (p.returncode != 0, f"the job exits non-zero (got {p.returncode})"),
        (any("all_reduce" in l and "did not complete within 2 s (train.collective_timeout_s) at step 7" in l for l in errors),
         "a waiting rank names the collective, its timeout and the step"),
        (elapsed < 18, f"the job ends before the late rank would have arrived ({elapsed:.1f} s < 18 s)"),
    ]
    report = Checks()
    for ok, what in checks:
        report.check(ok, what)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
