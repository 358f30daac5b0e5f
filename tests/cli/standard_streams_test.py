#!/usr/bin/env python3
"""The command line where its streams and paths are not the usual ones, as clusters and scripts
leave them:
  * train's stdout into a pipe whose reader ends (`| head`): the run trains, saves and writes its
    final weights, says so on stderr, exit 0 (SIGPIPE killed it at the next line, its locks behind);
  * stdout and stderr both closed or full: the command's own exit code (a failed write of the
    error line itself threw: SIGABRT, exit 134);
  * sample whose stdout cannot be written: it stops drawing tokens (it drew them all for nobody),
    exit 1;
  * a path flag the shell left unexpanded (--run-dir=~/x: no expansion after '='): $HOME's, as the
    shell would have made it (a folder named "~" appeared in the working directory); without HOME
    refused in one line.

usage: standard_streams_test.py PATH/TO/zerotrain
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402

CONFIG = os.path.join(ROOT, "configs", "tiny.json")
SMALL = ["--set", "train.num_threads=1", "--set", "model.n_layer=1"]


def main():
    binary = sys.argv[1]
    checks = Checks()
    with tempfile.TemporaryDirectory() as work:
        # A reader that takes three lines and goes: every later line is a write to a closed pipe.
        run_dir = os.path.join(work, "piped")
        train = subprocess.Popen([binary, "train", "--config", CONFIG, "--run-dir", run_dir, "--set",
                                  "train.max_steps=40", "--set", "log.every_steps=1", *SMALL],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(3):
            train.stdout.readline()
        train.stdout.close()
        err = train.stderr.read().decode()
        train.wait(timeout=300)
        left = sorted(os.listdir(run_dir)) if os.path.isdir(run_dir) else []
        checks.check(train.returncode == 0 and "final.safetensors" in left and "RUN_LOCK" not in left
                     and "standard output could not be written (Broken pipe)" in err,
                     f"train into a pipe whose reader ended: trained to the end, exit 0, said so "
                     f"(exit {train.returncode}, {left}, {err.strip()[-200:]!r})")

        # A line longer than stdio's buffer (a 6000-token sample, a resolved config of many shards)
        # is written past the buffer, and its failed write threw (exit 1 at the first sample, before
        # any checkpoint).
        run_dir = os.path.join(work, "piped_long")
        train = subprocess.Popen([binary, "train", "--config", CONFIG, "--run-dir", run_dir, "--set",
                                  "train.max_steps=6", "--set", "log.sample_every=3", "--set",
                                  "log.sample_tokens=6000", "--set", "model.block_size=16", *SMALL],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        train.stdout.readline()
        train.stdout.close()
        err = train.stderr.read().decode()
        train.wait(timeout=300)
        left = sorted(os.listdir(run_dir)) if os.path.isdir(run_dir) else []
        checks.check(train.returncode == 0 and "final.safetensors" in left and "error" not in err,
                     f"train with 6000-token samples into a pipe whose reader ended: to the end, exit 0 "
                     f"(exit {train.returncode}, {left}, {err.strip()[-200:]!r})")
        # A sample whose output cannot be written stops drawing (it drew every token for nobody),
        # exit 1 naming standard output and the system's reason (as eval's does; it said "an earlier
        # write failed", its own flush having taken the reason).
        with open("/dev/full", "w") as full:
            p = subprocess.run([binary, "sample", "--run", os.path.join(work, "piped"), "--tokens", "100000"],
                               stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
        drawn = re.search(r"zerotrain sample: (\d+) tokens in", p.stderr)
        checks.check(p.returncode == 1 and drawn is not None and int(drawn.group(1)) < 100 and
                     "cannot write the sample command's output to standard output: No space left on device" in
                     p.stderr,
                     f"sample into a full disk: stops drawing, exit 1, says so (exit {p.returncode}, "
                     f"{p.stderr.strip()[-300:]!r})")
        # A help text into a full disk: one line naming the help (train's said metrics.jsonl had the
        # run's record, though nothing ran); memory --json's failed write said once (it was twice:
        # the write's own error, then the check of standard output).
        with open("/dev/full", "w") as full:
            helped = subprocess.run([binary, "train", "--help"], stdout=full, stderr=subprocess.PIPE, text=True,
                                    timeout=60)
            predicted = subprocess.run([binary, "memory", "--config", CONFIG, "--ranks", "2", "--json"], stdout=full,
                                       stderr=subprocess.PIPE, text=True, timeout=120)
        lines = [helped.stderr.strip().splitlines(), predicted.stderr.strip().splitlines()]
        checks.check(helped.returncode == 1 and len(lines[0]) == 1 and
                     "cannot write the help to standard output: No space left on device" in lines[0][0],
                     f"train --help into a full disk: one line naming the help (exit {helped.returncode}, {lines[0]})")
        checks.check(predicted.returncode == 1 and len(lines[1]) == 1 and "No space left on device" in lines[1][0],
                     f"memory --json into a full disk: one line (exit {predicted.returncode}, {lines[1]})")
        long_prompt = ["--set", "log.sample_prompt=" + "x" * 20000]
        for what, argv, streams, code in [
            ("train with a 20 KB resolved config, stdout full", ["train", "--config", CONFIG, "--run-dir",
                                                                   os.path.join(work, "long_config"), "--set",
                                                                   "train.max_steps=2", *long_prompt, *SMALL],
             "stdout full", 0),
            ("version, both streams closed", ["version"], "closed", 1),
            ("train, both streams closed", ["train", "--config", CONFIG, "--run-dir", os.path.join(work, "closed"),
                                            "--set", "train.max_steps=2", *SMALL], "closed", 0),
            ("a missing config, both streams full", ["train", "--config", os.path.join(work, "missing.json")],
             "full", 2),
            ("sample of nothing, both streams full", ["sample", "--run", os.path.join(work, "nothing")], "full", 2),
        ]:
            if streams == "stdout full":
                with open("/dev/full", "w") as full:
                    p = subprocess.run([binary, *argv], stdout=full, stderr=subprocess.DEVNULL, timeout=300)
            elif streams == "closed":
                # The shell's >&- 2>&-: the descriptors are not open at all.
                p = subprocess.run([binary, *argv], stdin=subprocess.DEVNULL, timeout=300,
                                   preexec_fn=lambda: (os.close(1), os.close(2)))
            else:
                with open("/dev/full", "w") as full:
                    p = subprocess.run([binary, *argv], stdout=full, stderr=full, timeout=300)
            checks.check(p.returncode == code, f"{what}: exit {code} (exit {p.returncode})")

        home = os.path.join(work, "home")
        os.makedirs(home)
        env = {**os.environ, "HOME": home}
        p = subprocess.run([binary, "train", "--config", CONFIG, "--run-dir=~/tilde_run", "--set", "train.max_steps=1",
                            *SMALL], cwd=work, env=env, capture_output=True, text=True, timeout=300)
        checks.check(p.returncode == 0 and os.path.isfile(os.path.join(home, "tilde_run", "final.safetensors"))
                     and not os.path.exists(os.path.join(work, "~")),
                     f"--run-dir=~/x is $HOME/x (exit {p.returncode}, {p.stderr.strip()[-200:]})")
        p = subprocess.run([binary, "sample", "--run=~/tilde_run", "--tokens", "4", "--seed", "1"], cwd=work, env=env,
                           capture_output=True, text=True, timeout=300)
        checks.check(p.returncode == 0, f"sample --run=~/x reads $HOME/x (exit {p.returncode}, {p.stderr.strip()[-200:]})")
        no_home = {k: v for k, v in os.environ.items() if k != "HOME"}
        p = subprocess.run([binary, "train", "--config", CONFIG, "--run-dir=~/x"], cwd=work, env=no_home,
                           capture_output=True, text=True, timeout=300)
        lines = p.stderr.strip().splitlines()
        checks.check(p.returncode == 2 and len(lines) == 1 and "--run-dir '~/x'" in lines[0] and "HOME" in lines[0]
                     and not os.path.exists(os.path.join(work, "~")),
                     f"--run-dir=~/x without HOME: refused in one line ({lines})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
