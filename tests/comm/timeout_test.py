#!/usr/bin/env python3
"""A rank that never reaches a collective: the other ranks must stop within their timeout with a
one-line error naming the collective and the step, and the whole MPI job must end (no hang).
And the whole job suspended (SIGSTOP, as a scheduler's suspend or Ctrl-Z does) for twice the
timeout while a rank waits in a collective, then continued: the stop counts a second of the wait,
not its length, so the job completes (it timed out on continuing, no rank having died).

usage: timeout_test.py MPIRUN_PREFIX... -- PATH/TO/zt_comm_tests
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
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

    with tempfile.TemporaryDirectory(prefix="zt_suspend_") as pid_dir:
        env = dict(os.environ, ZT_COMM_TEST_SCENARIO="suspended", ZT_COMM_TEST_PID_DIR=pid_dir)
        job = subprocess.Popen(launcher + ["-np", "2", binary], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=env)
        files = [os.path.join(pid_dir, f"rank{r}") for r in range(2)]
        deadline = time.time() + 60
        while not all(os.path.exists(f) for f in files) and time.time() < deadline and job.poll() is None:
            time.sleep(0.05)
        pids = []
        for f in files:
            if os.path.exists(f):
                with open(f) as pid_file:
                    pids.append(int(pid_file.read()))
        time.sleep(0.5)  # rank 0 waits in the collective; rank 1 waits for "go" before it
        try:
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            time.sleep(6)  # twice the scenario's 3 s timeout
        finally:  # never leave a rank stopped (a rank that had already exited: nothing to continue)
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        with open(os.path.join(pid_dir, "go"), "w"):
            pass
        try:
            output, _ = job.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            job.kill()
            output, _ = job.communicate()
        print(output[-2000:])
        waited = re.search(r"rank 0: the collective completed after the suspend \(waited ([0-9.]+) s\)", output)
        report.check(len(pids) == 2 and job.returncode == 0 and output.count("the collective completed after the "
                                                                              "suspend (waited") == 2
                     and "did not complete" not in output and waited is not None and float(waited.group(1)) > 6,
                     f"a job stopped for twice its timeout while a rank waits completes once continued "
                     f"(exit {job.returncode}, {len(pids)} pids, rank 0 waited {waited and waited.group(1)} s)")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
