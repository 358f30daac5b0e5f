#!/usr/bin/env python3
"""A run and a prepare on one dataset folder (data.dataset) at once, through the real binary:

  * a run started while a prepare writes the folder (the prepare holds it exclusively: held here
    with flock as a prepare holds it) is refused in one line naming data.dataset and the prepare,
    before it records anything: it had read the files half replaced, said the prepare was cut, or
    recorded in its checkpoints other files than it trained on;
  * data.dataset naming a FIFO is refused at once, not waited on;
  * a prepare into the folder of a live run is refused in one line while the run reads it, and the
    run stops normally on request; once the run ended, the prepare goes ahead.

usage: shared_dataset_test.py PATH/TO/zerotrain
"""
import fcntl
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402


def main():
    binary = sys.argv[1]
    checks = Checks()
    check = checks.check
    work = checks.work_folder("zt_shared_dataset_")
    text = os.path.join(work, "corpus.txt")
    with open(text, "w") as f:
        f.write("to be or not to be, that is the question. " * 3000)
    data = os.path.join(work, "data")
    p = subprocess.run([binary, "prepare", "--text", text, "--out", data], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"prepare exits 0 ({p.stderr.strip()[-200:]})")
    config = os.path.join(work, "config.json")
    with open(config, "w") as f:
        json.dump({"model": {"n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 16, "vocab_size": 64},
                   "data": {"dataset": data}, "train": {"micro_batch": 2, "eval_batches": 1, "num_threads": 1},
                   "log": {"sample_tokens": 0}}, f)

    # A prepare writing the folder: the run is refused before it makes anything.
    fd = os.open(data, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    run_a = os.path.join(work, "a")
    p = subprocess.run([binary, "train", "--config", config, "--run-dir", run_a, "--set", "train.max_steps=2"],
                       capture_output=True, text=True, timeout=120)
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    check(p.returncode == 2 and len(lines) == 1 and "data.dataset" in lines[0] and
          "a prepare is writing it now" in lines[0] and not os.path.exists(os.path.join(run_a, "metrics.jsonl")),
          f"a run on a folder a prepare writes is refused in one line ({p.returncode}: {lines})")

    # data.dataset naming a FIFO: refused at once (the hold's open waited for a writer, every rank
    # hung).
    fifo = os.path.join(work, "fifo")
    os.mkfifo(fifo)
    try:
        p = subprocess.run([binary, "train", "--config", config, "--run-dir", os.path.join(work, "f"), "--set",
                            f"data.dataset={fifo}"], capture_output=True, text=True, timeout=60)
        lines = [line for line in p.stderr.splitlines() if line.strip()]
        check(p.returncode == 2 and len(lines) == 1 and "neither \"embedded\" nor a directory" in lines[0],
              f"data.dataset naming a FIFO is refused at once ({p.returncode}: {lines})")
    except subprocess.TimeoutExpired:
        check(False, "data.dataset naming a FIFO is refused at once (it hung)")

    # A live run's folder: a prepare into it is refused while the run reads it.
    run_b = os.path.join(work, "b")
    live = subprocess.Popen([binary, "train", "--config", config, "--run-dir", run_b, "--set",
                             "train.max_steps=1000000"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    metrics = os.path.join(run_b, "metrics.jsonl")
    deadline = time.time() + 60
    while time.time() < deadline and live.poll() is None and not (
            os.path.exists(metrics) and '"type":"train"' in open(metrics).read()):
        time.sleep(0.05)
    with open(text, "a") as f:
        f.write("a second text for the same folder. " * 100)
    p = subprocess.run([binary, "prepare", "--text", text, "--out", data], capture_output=True, text=True, timeout=120)
    running = live.poll() is None
    live.send_signal(signal.SIGTERM)  # stops at the step's end with a checkpoint, exit 0
    _, err = live.communicate(timeout=300)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    check(running and p.returncode == 2 and len(lines) == 1 and "a run training from it" in lines[0],
          f"a prepare into a live run's dataset is refused in one line (run alive: {running}; {p.returncode}: {lines})")
    check(live.returncode == 0, f"the run stops normally on request ({live.returncode}: {err.strip()[-200:]})")
    p = subprocess.run([binary, "prepare", "--text", text, "--out", data], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"once the run ended, the prepare goes ahead ({p.stderr.strip()[-200:]})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
