#!/usr/bin/env python3
"""A rank killed with SIGKILL in the middle of training: every other rank must end with a one-line
error saying where it was (the collective it was waiting in, or that it was between collectives,
and the step), and the job must end well within the collective timeout (in half of it: a rank that
noticed nothing would wait all of it; generous, so a loaded 2-core machine passes), never hang.
The same for a rank that fails alone with an error of its own (rank 0's metrics.jsonl on a full
disk): it prints its line, and the job ends well before the others' collectives time out.

usage: killed_rank_test.py MPIRUN [FLAGS...] -- PATH/TO/zerotrain
"""
import json
import os
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402
from run_dir_util import rank_pids  # noqa: E402

CONFIG = {
    "model": {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 64, "vocab_size": 64},
    "data": {"embedded_chars": 200000},
    "train": {"micro_batch": 8, "max_steps": 100000, "num_threads": 1, "collective_timeout_s": 120},
    "log": {"progress": "plain", "every_steps": 1, "sample_tokens": 0},
}


def output_within(proc, seconds):
    """The job's output once it ends, killed after `seconds` (a hang is a failure the checks name)."""
    try:
        return proc.communicate(timeout=seconds)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()[0]


def cpu_seconds(pid):
    """User plus system CPU time of process `pid` so far (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def main():
    split = sys.argv.index("--")
    launcher, binary = sys.argv[1:split], sys.argv[split + 1]
    report = Checks()
    work = report.work_folder("zt_kill_")
    config = os.path.join(work, "config.json")
    with open(config, "w") as f:
        json.dump(CONFIG, f)
    proc = subprocess.Popen(launcher + ["-np", "3", binary, "train", "--config", config, "--run-dir",
                                        os.path.join(work, "run")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    pids = {}
    while time.time() < deadline and len(pids) < 3:  # wait for the ranks, then for training to run
        time.sleep(0.5)
        pids = rank_pids(work)
    time.sleep(4)
    killed_at = time.time()
    os.kill(pids[1], signal.SIGKILL)
    output = output_within(proc, 150)
    elapsed = time.time() - killed_at
    print(output[-2500:])
    errors = [l for l in output.splitlines() if l.startswith("zerotrain: error:")]
    checks = [
        (proc.returncode != 0, f"the job exits non-zero ({proc.returncode})"),
        (elapsed < 60, f"the job ends {elapsed:.1f} s after the kill (collective timeout 120 s)"),
        (len(errors) >= 2, f"both surviving ranks print an error line ({len(errors)})"),
        (all(" at step " in l for l in errors), "each error names the step"),
        (all("SIGUSR1 to mpirun stops with a checkpoint" in l for l in errors),
         "each says a stop request would have saved a checkpoint (a training run's)"),
    ]
    # The same in eval, which saves nothing: the survivor says where it was (the scoring, not
    # "start-up") and offers no checkpoint.
    trained = os.path.join(work, "trained")
    subprocess.run([binary, "train", "--config", config, "--run-dir", trained, "--set", "train.max_steps=1"],
                   capture_output=True, check=True, timeout=300)
    tokens = os.path.join(work, "eval_marker", "tokens.bin")
    os.makedirs(os.path.dirname(tokens))
    count = 8_000_000
    with open(tokens, "wb") as f:  # llm.c's header (magic, version, count) and uint16 tokens below 64
        f.write(struct.pack("<3i", 20240520, 1, count) + bytes(253 * 4))
        f.write(struct.pack("<64H", *range(64)) * (count // 64))
    evaluating = subprocess.Popen(launcher + ["-np", "2", binary, "eval", "--run", trained, "--tokens", tokens,
                                              "--windows", "200000"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 60
    eval_pids = {}
    while time.time() < deadline and len(eval_pids) < 2:
        time.sleep(0.2)
        eval_pids = rank_pids(os.path.join(work, "eval_marker"))
    # Scoring once rank 1 has computed for a second: the tiny model loads in milliseconds of CPU,
    # while a fixed 2 s after the ranks appeared could still find it loading on a loaded machine.
    while time.time() < deadline and 1 in eval_pids and cpu_seconds(eval_pids[1]) < 1.0:
        time.sleep(0.1)
    if 1 in eval_pids:
        os.kill(eval_pids[1], signal.SIGKILL)
    output = output_within(evaluating, 150)
    errors = [l for l in output.splitlines() if l.startswith("zerotrain: error:")]
    checks.append((evaluating.returncode != 0 and len(errors) == 1 and "the scoring of --tokens" in errors[0] and
                   "SIGUSR1" not in errors[0], f"eval with a peer killed: the survivor names the scoring, no "
                                               f"checkpoint offered ({evaluating.returncode}: {errors})"))
    # Rank 0 alone fails (its metrics.jsonl on a full disk, at its first record): the others are
    # already in a collective it will never join.
    run_dir = os.path.join(work, "full")
    os.makedirs(run_dir)
    os.symlink("/dev/full", os.path.join(run_dir, "metrics.jsonl"))
    started = time.time()
    p = subprocess.run(launcher + ["-np", "2", binary, "train", "--config", config, "--run-dir", run_dir],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    elapsed = time.time() - started
    lines = [l for l in p.stdout.splitlines() if l.startswith("zerotrain: error:")]
    checks += [
        (p.returncode != 0 and any("metrics" in l and "No space left on device" in l for l in lines),
         f"a rank failing alone says why and the job exits non-zero ({p.returncode}: {lines[:2]})"),
        (elapsed < 60, f"... and the job ends {elapsed:.1f} s after it started (collective timeout 120 s)"),
    ]
    for ok, what in checks:
        report.check(ok, what)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
