#!/usr/bin/env python3
"""A `train` start refused after its run directory was made (here a resume whose config changes the
trajectory) removes the folders it made, and only those: the run directory and the missing folders
above it, a checkpoint folder outside it, however the path is spelt ("..", a trailing "/"). A
refused resume into runs/new/../mine/a removed the user's runs/mine, which was there (empty), and
left runs/new behind; runs/new/a/ left runs/new; a checkpoint.dir of its own was left empty.

usage: refused_start_test.py PATH/TO/zerotrain
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402

CONFIG = os.path.join(ROOT, "configs", "tiny.json")
SMALL = ["--set", "train.max_steps=1", "--set", "train.num_threads=1", "--set", "model.n_layer=1"]


def train(binary, cwd, run_dir, *extra):
    return subprocess.run([binary, "train", "--config", CONFIG, "--run-dir", run_dir, *SMALL, *extra], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def tree(folder):
    """Every path under `folder`, relative to it."""
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):
        out += [os.path.relpath(os.path.join(dirpath, n), folder) for n in dirnames + filenames]
    return sorted(out)


def main():
    binary = sys.argv[1]
    checks = Checks()
    with tempfile.TemporaryDirectory() as work:
        p = train(binary, work, "base", "--set", "checkpoint.at_end=true")
        if not checks.check(p.returncode == 0, f"a run to resume from (exit {p.returncode}: {p.stderr[-300:]})"):
            return checks.finish()
        base = sorted(os.listdir(work))

        def refused(what, run_dir, *extra, made=(), kept=()):
            """A resume refused for its seed into `run_dir`: the tree as it was, plus `kept` (made first)."""
            for folder in made:
                os.makedirs(os.path.join(work, folder))
            before = tree(work)
            p = train(binary, work, run_dir, "--resume", "base/checkpoints", "--set", "train.seed=5", *extra)
            after = tree(work)
            checks.check(p.returncode == 2 and "train.seed: 1337 -> 5" in p.stderr and after == before,
                         f"{what}: refused (exit {p.returncode}), the folders as they were "
                         f"(made {sorted(set(after) - set(before))}, removed {sorted(set(before) - set(after))})")
            for folder in kept:
                checks.check(os.path.isdir(os.path.join(work, folder)), f"{what}: {folder} is still there")

        refused("a new run directory two folders deep", "made/and/refused")
        refused("a new folder, then '..' into a folder that was there", "new/../mine/a", made=["mine"],
                kept=["mine"])
        refused("'..' out of two new folders", "x/y/../../z")
        refused("a trailing '/'", "slash/a/")
        refused("a run directory that was there, empty", "there", made=["there"], kept=["there"])
        refused("a checkpoint folder outside the new run directory", "outside/run", "--set",
                "checkpoint.dir=" + os.path.join(work, "ckpts", "deep"), "--set", "checkpoint.every_steps=1")
        refused("a new checkpoint folder beside a run directory that was there", "kept_run", "--set",
                "checkpoint.dir=kept_run/saves", "--set", "checkpoint.every_steps=1", made=["kept_run"],
                kept=["kept_run"])
        # A checkpoint folder whose save files would pass PATH_MAX: refused at the start, before any
        # step (it trained until its first save). 19 folders of 200 characters and the rest: 4040 in all.
        deep = os.path.join(*(["d" * 200] * 19), "r" * (4040 - len(work) - 1 - 19 * 201))
        before = tree(work)
        p = train(binary, work, deep, "--set", "checkpoint.every_steps=1")
        lines = p.stderr.strip().splitlines()
        checks.check(p.returncode == 2 and len(lines) == 1 and "path limit" in lines[0] and tree(work) == before
                     and "step 1" not in p.stdout,
                     f"a run directory too long for its saves' files: refused before step 1, nothing made "
                     f"(exit {p.returncode}: {lines[-1:]})")
        checks.check(sorted(os.listdir(work)) == sorted(base + ["kept_run", "mine", "there"]),
                     f"nothing else made or removed ({sorted(os.listdir(work))})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
