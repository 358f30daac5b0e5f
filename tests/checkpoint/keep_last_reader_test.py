#!/usr/bin/env python3
"""keep_last and a reader of the live run's folder (docs/checkpoint_format.md), through the real
binary: a checkpoint another process holds for reading (a shared flock on its directory, as
`ckpt export`, `eval --ckpt` and `sample --ckpt` take) while a save prunes it stays, marked PRUNED,
and the save says so once, on stdout and in its `checkpoint` record (`left_for_readers`), so a run
that ends before another save removes it does not leave it unsaid; the next save after the reader
let go removes it. With synchronous and asynchronous saves.

usage: keep_last_reader_test.py --zerotrain PATH
"""
import argparse
import fcntl
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402
from run_dir_util import train_records, wait_until  # noqa: E402

CONFIG = {
    "model": {"n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 16, "vocab_size": 64},
    "data": {"embedded_chars": 20000},
    "train": {"micro_batch": 2, "max_steps": 8, "eval_batches": 1, "num_threads": 1},
    "optim": {"lr": 3e-3, "warmup_steps": 2, "decay_steps": 100},
    "checkpoint": {"every_steps": 2, "keep_last": 1},
    "log": {"sample_tokens": 0, "progress": "plain"},
}
HELD = "step_00000002"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zerotrain", required=True)
    args = parser.parse_args()
    checks = Checks()
    check = checks.check
    with tempfile.TemporaryDirectory(prefix="zt_keep_last_reader_") as work:
        for mode in ("sync", "async"):
            run_dir = os.path.join(work, mode)
            config = os.path.join(work, f"{mode}.json")
            with open(config, "w") as f:
                json.dump({**CONFIG, "checkpoint": {**CONFIG["checkpoint"], "async": mode == "async"}}, f)
            command = [args.zerotrain, "train", "--config", config, "--run-dir", run_dir]
            # Each save waits 0.5 s before its commit: the reader takes step 2 before step 4 prunes it.
            env = {**os.environ, "ZT_TEST_CHECKPOINT_PAUSE_MS": "500"}
            proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            held = os.path.join(run_dir, "checkpoints", HELD)
            latest = os.path.join(run_dir, "checkpoints", "latest")

            def committed():
                try:
                    with open(latest) as f:
                        return f.read().strip() == HELD
                except OSError:
                    return False

            fd = None
            if wait_until(committed, seconds=60):
                fd = os.open(held, os.O_RDONLY | os.O_DIRECTORY)
                fcntl.flock(fd, fcntl.LOCK_SH)
            out, err = proc.communicate(timeout=120)
            if fd is not None:
                os.close(fd)
            notes = [line for line in out.splitlines() if line.startswith("note: keep_last left")]
            left = [(r["step"], r.get("left_for_readers")) for r in train_records(run_dir)
                    if r["type"] == "checkpoint" and "left_for_readers" in r]
            check(fd is not None and proc.returncode == 0, f"{mode}: the run ends with exit 0 while step 2 is read "
                                                           f"({proc.returncode}, {err.strip()[-300:]!r})")
            check(os.path.exists(os.path.join(held, "PRUNED")) and len(notes) == 1 and
                  notes[0].startswith(f"note: keep_last left {HELD} in {os.path.join(run_dir, 'checkpoints')} "
                                      "(another process was reading it; marked PRUNED") and left == [(4, [HELD])],
                  f"{mode}: step 2, held by a reader, stays marked PRUNED and is said once ({notes}, records {left})")
            # Let go: the next save removes it.
            resumed = subprocess.run(command + ["--resume", "latest", "--set", "train.max_steps=10"],
                                     capture_output=True, text=True, timeout=120)
            check(resumed.returncode == 0 and not os.path.exists(held) and "keep_last left" not in resumed.stdout,
                  f"{mode}: the next save, the reader gone, removes it ({resumed.returncode}, "
                  f"{resumed.stderr.strip()[-300:]!r})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
