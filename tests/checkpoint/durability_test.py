#!/usr/bin/env python3
"""What a power loss leaves, read off the system calls (strace): every file zerotrain moves into
place by a rename was synced (fsync of a descriptor opened on its staging name) before that
rename, its folder synced after it (else the new name itself can be lost), and the run's
metrics.jsonl was synced before each checkpoint folder's commit (the rename of .tmp-step_N). A
file renamed unsynced can be empty after a power loss under the name its folder's other files
agree with (a run's vocab.json beside a good checkpoint; a prepared dataset's).

Covers `prepare`, `train` (config.json, vocab.json, the checkpoints, latest, final.safetensors;
the files written into a checkpoint's temporary folder synced before its commit, also by
`checkpoint.async`'s writer thread), a resume's rewrite of metrics.jsonl, and `ckpt export` to
Hugging Face and llm.c.

usage: durability_test.py PATH/TO/zerotrain    (exit 77, skipped, without strace)
"""
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402
from shared_corpus import require_tiny_shakespeare  # noqa: E402

CALL = re.compile(r'^(\d+) +(openat|fsync|fdatasync|rename|renameat2?|close|write|pwrite64)\((.*)\) += (-?\d+)')
# strace -f splits a call another thread interrupts into "PID call(args <unfinished ...>" and a
# later "PID <... call resumed>rest": joined again, or a write-open on a thread would go unseen.
UNFINISHED = re.compile(r'^(\d+) +(.*) <unfinished \.\.\.>$')
RESUMED = re.compile(r'^(\d+) +<\.\.\. \w+ resumed>(.*)$')


def traced(work, name, argv):
    """The calls of argv (and its threads), in order: (call, args text, result)."""
    log = os.path.join(work, name + ".strace")
    p = subprocess.run(["strace", "-f", "-qq", "-e", "trace=openat,fsync,fdatasync,rename,renameat,renameat2,close,write,pwrite64",
                        "-o", log, *argv], capture_output=True, text=True, timeout=300)
    calls, pending = [], {}
    with open(log) as f:
        for line in f:
            line = line.strip()
            m = UNFINISHED.match(line)
            if m:
                pending[m.group(1)] = m.group(2)
                continue
            m = RESUMED.match(line)
            if m and m.group(1) in pending:
                line = f"{m.group(1)} {pending.pop(m.group(1))}{m.group(2)}"
            m = CALL.match(line)
            if m:
                calls.append((m.group(2), m.group(3), int(m.group(4))))
    return p, calls


def paths_in(args):
    return re.findall(r'"([^"]*)"', args)


def unsynced_renames(calls):
    """Files renamed into place without an fsync of a descriptor opened on them since their last
    open for writing; every rename of a folder's .tmp-step_N with whether metrics.jsonl was
    synced since its last write (or write-open) before it; and the renames whose folder was not
    synced after them before the process ended (the new name itself is then lost to a power loss)."""
    open_fds = {}  # fd -> path
    synced, written = set(), set()
    # The commit of .tmp-step_N: every file written into it (the rank files, which take no
    # rename of their own, and the manifest) synced before the folder takes its name.
    metrics_synced = False
    bad, commits = [], []
    folder_unsynced = {}  # folder -> the renames into it since its last fsync
    for call, args, result in calls:
        if call == "openat" and result >= 0:
            path = os.path.abspath(paths_in(args)[0])
            open_fds[result] = path
            if "O_WRONLY" in args or "O_RDWR" in args:
                written.add(path)
                synced.discard(path)
                if path.endswith("metrics.jsonl"):
                    metrics_synced = False
        elif call in ("fsync", "fdatasync") and result == 0:
            path = open_fds.get(int(args.split(",")[0]))
            if path is not None:
                synced.add(path)
                folder_unsynced.pop(path, None)
                if path.endswith("metrics.jsonl"):
                    metrics_synced = True
        elif call in ("write", "pwrite64"):
            path = open_fds.get(int(args.split(",")[0]))
            if path is not None and path.endswith("metrics.jsonl"):
                metrics_synced = False  # a record since the last sync
        elif call == "close":
            open_fds.pop(int(args.split(",")[0]), None)
        elif call.startswith("rename") and result == 0:
            names = [os.path.abspath(n) for n in paths_in(args)]
            source, target = names[0], names[-1]
            folder_unsynced.setdefault(os.path.dirname(target), []).append(target)
            if os.path.basename(source).startswith(".tmp-step_"):
                commits.append((target, metrics_synced))
                bad += [f"{path} (unsynced when its folder {source} was committed)" for path in sorted(written)
                        if path.startswith(source + os.sep) and path not in synced]
            elif source in written and source not in synced:
                bad.append(f"{source} -> {target}")
    bad += [f"{target} (its folder not synced after the rename)" for renamed in folder_unsynced.values()
            for target in renamed]
    return bad, commits


def main():
    binary = sys.argv[1]
    if shutil.which("strace") is None:
        print("SKIP: strace is not installed")
        return 77
    text = require_tiny_shakespeare()  # exits 77 (skipped) where the shared corpus is absent
    checks = Checks()
    work = checks.work_folder("zt_durability_")
    dataset = os.path.join(work, "dataset")
    p, calls = traced(work, "prepare", [binary, "prepare", "--text", text, "--out", dataset])
    bad, _ = unsynced_renames(calls)
    renamed = [c for c in calls if c[0].startswith("rename")]
    checks.check(p.returncode == 0 and len(renamed) >= 3 and not bad,
                 f"prepare syncs train.bin, val.bin and vocab.json before their renames, their folder after "
                 f"(unsynced: {bad})")

    config = os.path.join(work, "config.json")
    with open(config, "w") as f:
        json.dump({"model": {"n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 16, "vocab_size": 65},
                   "data": {"dataset": dataset},
                   "train": {"micro_batch": 2, "max_steps": 3, "eval_batches": 1, "num_threads": 1},
                   "checkpoint": {"every_steps": 1}, "log": {"sample_tokens": 0}}, f)
    run = os.path.join(work, "run")
    p, calls = traced(work, "train", [binary, "train", "--config", config, "--run-dir", run])
    bad, commits = unsynced_renames(calls)
    checks.check(p.returncode == 0 and not bad,
                 f"train syncs each file before its rename and its folder after (config.json, vocab.json, "
                 f"manifests, latest, final weights; unsynced: {bad}; {p.stderr.strip()[-200:]})")
    checks.check(len(commits) == 3 and all(ok for _, ok in commits),
                 f"metrics.jsonl is synced before each checkpoint commits ({commits})")

    # Saving in the background (checkpoint.async): the writer thread's rank files synced before each
    # commit, as a synchronous save's. Then its resume from step 2, whose metrics.jsonl held step
    # 3's record: the log is rewritten without it (a staged file renamed over it), synced, and its
    # folder after the rename.
    with open(config) as f:
        settings = json.load(f)
    settings["checkpoint"] = {"every_steps": 2, "async": True}
    config_async = os.path.join(work, "config_async.json")
    with open(config_async, "w") as f:
        json.dump(settings, f)
    run_async = os.path.join(work, "run_async")
    p, calls = traced(work, "train_async", [binary, "train", "--config", config_async, "--run-dir", run_async])
    bad, commits = unsynced_renames(calls)
    checks.check(p.returncode == 0 and len(commits) == 1 and not bad,
                 f"an asynchronous save syncs its rank file and manifest before the commit (commits: {commits}; "
                 f"unsynced: {bad}; {p.stderr.strip()[-200:]})")
    p, calls = traced(work, "resume", [binary, "train", "--config", config_async, "--run-dir", run_async,
                                       "--resume", "latest"])
    bad, _ = unsynced_renames(calls)
    metrics = os.path.join(run_async, "metrics.jsonl")
    rewritten = [c for c in calls if c[0].startswith("rename") and c[2] == 0
                 and os.path.abspath(paths_in(c[1])[-1]) == os.path.abspath(metrics)]
    checks.check(p.returncode == 0 and len(rewritten) == 1 and not bad,
                 f"a resume rewrites metrics.jsonl past its checkpoint synced, its folder after (renames onto it: "
                 f"{len(rewritten)}; unsynced: {bad}; {p.stderr.strip()[-200:]})")

    out = os.path.join(work, "hf")
    p, calls = traced(work, "export", [binary, "ckpt", "export", os.path.join(run, "checkpoints"), "--format", "hf",
                                       "--out", out])
    bad, _ = unsynced_renames(calls)
    # config.json, model.safetensors, tokenizer.json and tokenizer_config.json took their names by
    # renames the trace saw (none seen would pass `not bad` for nothing).
    renamed = {os.path.basename(paths_in(args)[-1]) for call, args, result in calls
               if call.startswith("rename") and result == 0}
    staged = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}
    checks.check(p.returncode == 0 and os.path.exists(os.path.join(out, "tokenizer.json")) and not bad and
                 staged <= renamed, f"an HF export syncs every file it stages, and the folder after (renamed: "
                                    f"{sorted(renamed)}; unsynced: {bad}; {p.stderr.strip()[-200:]})")

    out = os.path.join(work, "model.bin")
    p, calls = traced(work, "export_llmc", [binary, "ckpt", "export", os.path.join(run, "checkpoints"), "--format",
                                            "llmc", "--out", out])
    bad, _ = unsynced_renames(calls)
    renamed = [paths_in(args)[-1] for call, args, result in calls if call.startswith("rename") and result == 0]
    checks.check(p.returncode == 0 and os.path.exists(out) and any(os.path.abspath(r) == out for r in renamed)
                 and not bad, f"an llm.c export syncs its file before its rename, the folder after (renamed: "
                              f"{renamed}; unsynced: {bad}; {p.stderr.strip()[-200:]})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
