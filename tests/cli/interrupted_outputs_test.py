#!/usr/bin/env python3
"""Ctrl-C on a command that writes its output whole (prepare, ckpt export) at any moment: the
process ends as SIGINT's default would, and leaves the destination as it was or as it is after the
command, whole, with no staging file (.tmp) behind and no folder it made empty. (A 600 MB
train.bin.tmp stayed beside the dataset it was to replace, and an export's new folder held only
its model.safetensors.tmp.)

The signal lands at fractions of each command's own duration, measured first, so the sweep
crosses its reading, its computing and its writing whatever the machine's speed.

usage: interrupted_outputs_test.py PATH/TO/zerotrain
"""
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402
from shared_corpus import require_tiny_shakespeare  # noqa: E402

TEXT = require_tiny_shakespeare()  # exits 77 (skipped) where the shared corpus is absent
FRACTIONS = (0.2, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0)


def leftovers(folder):
    if not os.path.isdir(folder):
        return []
    return sorted(n for n in os.listdir(folder) if ".tmp" in n)


def interrupted(argv, seconds):
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(seconds)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    return p.returncode, err


def interrupted_while_staging(argv, folder):
    """SIGINT once a staging file appears in `folder` (the export's write under way); None when
    the command ended first."""
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while p.poll() is None and time.monotonic() < deadline and not leftovers(folder):
        time.sleep(0.0005)
    seen = bool(leftovers(folder))
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=120)
    return p.returncode if seen else None


def timed(argv):
    start = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    return p, time.monotonic() - start


def main():
    binary = sys.argv[1]
    checks = Checks()
    work = checks.work_folder("zt_interrupted_")
    big = os.path.join(work, "big.txt")
    with open(TEXT) as f:
        text = f.read()
    with open(big, "w") as f:
        f.write(text * 40)  # ~45 MB: a second or two of prepare on 2 cores
    dataset = os.path.join(work, "dataset")
    subprocess.run([binary, "prepare", "--text", TEXT, "--out", dataset], check=True, capture_output=True)
    small_sizes = {n: os.path.getsize(os.path.join(dataset, n)) for n in ("train.bin", "val.bin")}
    p, seconds = timed([binary, "prepare", "--text", big, "--out", os.path.join(work, "whole")])
    big_sizes = {n: os.path.getsize(os.path.join(work, "whole", n)) for n in ("train.bin", "val.bin")}
    for fraction in FRACTIONS:
        code, err = interrupted([binary, "prepare", "--text", big, "--out", dataset], fraction * seconds)
        sizes = {n: os.path.getsize(os.path.join(dataset, n)) for n in ("train.bin", "val.bin")}
        checks.check(code in (-signal.SIGINT, 0) and not leftovers(dataset) and sizes in (small_sizes, big_sizes),
                     f"prepare stopped at {fraction:.0%} of its {seconds:.1f} s: exit {code}, the dataset whole "
                     f"(old or new), no staging file ({leftovers(dataset)}; {err.strip()[-200:]})")
        if sizes == big_sizes:  # replaced: back to the small one for the next moment
            subprocess.run([binary, "prepare", "--text", TEXT, "--out", dataset], check=True, capture_output=True)

    # A kill between the renames (the hook ends the process after n of them, as a kill there
    # would): never the new token files beside the earlier vocab.json, which trained and sampled them
    # as another text; the earlier one goes before the renames, so a prepare again completes it.
    other = os.path.join(work, "other.txt")
    with open(other, "w") as f:
        f.write("0123456789 \n" * 2000)  # characters the dataset's vocabulary lacks
    with open(os.path.join(dataset, "vocab.json")) as f:
        old_vocab = f.read()
    for renames in (1, 2):
        subprocess.run([binary, "prepare", "--text", TEXT, "--out", dataset], check=True, capture_output=True)
        p = subprocess.run([binary, "prepare", "--text", other, "--out", dataset], capture_output=True, text=True,
                           env=dict(os.environ, ZT_TEST_EXPORT_EXIT_AFTER_RENAMES=str(renames)), timeout=120)
        vocab_path = os.path.join(dataset, "vocab.json")
        kept_old = os.path.exists(vocab_path) and open(vocab_path).read() == old_vocab
        checks.check(p.returncode == 137 and not kept_old,
                     f"prepare killed after {renames} rename(s): the earlier vocab.json is not left beside the new "
                     f"token files (exit {p.returncode}, old vocabulary kept: {kept_old})")
        # ... and a run there is refused (it trained on the new text's train.bin beside the old
        # val.bin and decoded nothing).
        t = subprocess.run([binary, "train", "--config", os.path.join(ROOT, "configs", "tiny_debug.json"),
                            "--run-dir", os.path.join(work, f"cut_run_{renames}"), "--set", f"data.dataset={dataset}",
                            "--set", "train.max_steps=1"], capture_output=True, text=True, timeout=120)
        lines = [line for line in t.stderr.splitlines() if line.strip()]
        checks.check(t.returncode == 2 and len(lines) == 1 and "a prepare into it was cut" in lines[0],
                     f"a run on a dataset whose prepare was cut is refused in one line ({lines})")
        # ... whichever key names its token files (data.train_files and data.train_file read them as
        # whole: the session-start binary of 2026-12-06 trained on them).
        for key, val_key in (("data.train_files", "data.val_files"), ("data.train_file", "data.val_file")):
            t = subprocess.run([binary, "train", "--config", os.path.join(ROOT, "configs", "tiny_debug.json"),
                                "--run-dir", os.path.join(work, f"cut_run_{renames}_{key}"), "--set",
                                f"{key}={dataset}/train.bin", "--set", f"{val_key}={dataset}/val.bin", "--set",
                                "model.vocab_size=128", "--set", "train.max_steps=1"],
                               capture_output=True, text=True, timeout=120)
            lines = [line for line in t.stderr.splitlines() if line.strip()]
            checks.check(t.returncode == 2 and len(lines) == 1 and key in lines[0] and
                         ".zt-incomplete-output is there: a prepare into that folder was cut" in lines[0],
                         f"{key} of a dataset whose prepare was cut: refused in one line ({lines})")
        # ... and through a symlink to its file from another folder (the link's folder was looked at).
        links = os.path.join(work, f"links_{renames}")
        os.makedirs(links)
        for name in ("train.bin", "val.bin"):
            os.symlink(os.path.join(dataset, name), os.path.join(links, name))
        t = subprocess.run([binary, "train", "--config", os.path.join(ROOT, "configs", "tiny_debug.json"),
                            "--run-dir", os.path.join(work, f"cut_run_{renames}_links"), "--set",
                            f"data.train_file={links}/train.bin", "--set", f"data.val_file={links}/val.bin", "--set",
                            "model.vocab_size=128", "--set", "train.max_steps=1"],
                           capture_output=True, text=True, timeout=120)
        checks.check(t.returncode == 2 and "a prepare into that folder was cut" in t.stderr,
                     f"a symlink to a token file of a dataset whose prepare was cut: refused ({t.stderr.strip()[-200:]})")
    # A prepare again that fails in turn before its commit (here at its vocab.json, past a file-size
    # limit) removes its own staging files, the staged vocab.json among them: the folder stays known
    # for a cut one (it refused itself, and trained on the mixed splits, before the marker).
    many = os.path.join(work, "many_characters.txt")
    with open(many, "w", encoding="utf-8") as f:
        f.write("".join(chr(0x100 + i) for i in range(600)))  # few tokens, a large vocabulary

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    failed = subprocess.run([binary, "prepare", "--text", many, "--out", dataset], capture_output=True, text=True,
                            preexec_fn=limited, timeout=120)
    t = subprocess.run([binary, "train", "--config", os.path.join(ROOT, "configs", "tiny_debug.json"), "--run-dir",
                        os.path.join(work, "cut_run_after_retry"), "--set", f"data.dataset={dataset}", "--set",
                        "train.max_steps=1"], capture_output=True, text=True, timeout=120)
    checks.check(failed.returncode == 1 and "vocab.json" in failed.stderr and t.returncode == 2 and
                 "a prepare into it was cut" in t.stderr,
                 f"a cut prepare whose retry fails too is still refused by a run ({failed.stderr.strip()[-150:]}; "
                 f"{t.stderr.strip()[-150:]})")
    again = subprocess.run([binary, "prepare", "--text", TEXT, "--out", dataset], capture_output=True, text=True)
    checks.check(again.returncode == 0 and not leftovers(dataset) and
                 open(os.path.join(dataset, "vocab.json")).read() == old_vocab,
                 f"a prepare after the kill completes the dataset ({again.stderr.strip()[-200:]})")

    config = os.path.join(work, "config.json")
    with open(config, "w") as f:  # ~13M parameters: ~50 MB of fp32 tensors to export
        json.dump({"model": {"n_layer": 4, "n_head": 8, "n_embd": 512, "block_size": 64, "vocab_size": 65},
                   "data": {"dataset": dataset}, "train": {"micro_batch": 1, "max_steps": 1, "num_threads": 1},
                   "checkpoint": {"at_end": True}, "log": {"sample_tokens": 0}}, f)
    run = os.path.join(work, "run")
    subprocess.run([binary, "train", "--config", config, "--run-dir", run], check=True, capture_output=True)
    export = [binary, "ckpt", "export", os.path.join(run, "checkpoints"), "--format", "hf", "--out"]
    earlier = os.path.join(work, "earlier")
    p, seconds = timed(export + [earlier])
    with open(os.path.join(earlier, "model.safetensors"), "rb") as f:
        earlier_bytes = f.read()
    for fraction in FRACTIONS:
        fresh = os.path.join(work, f"fresh_{int(fraction * 100)}")
        code, err = interrupted(export + [fresh], fraction * seconds)
        whole = os.path.isdir(fresh) and os.path.exists(os.path.join(fresh, "config.json"))
        checks.check(code in (-signal.SIGINT, 0) and (whole or not os.path.exists(fresh)) and not leftovers(fresh),
                     f"an export into a new folder stopped at {fraction:.0%} of its {seconds:.1f} s: exit {code}, "
                     f"the folder whole or not there ({sorted(os.listdir(fresh)) if os.path.isdir(fresh) else '-'})")
        code, err = interrupted(export + [earlier], fraction * seconds)
        with open(os.path.join(earlier, "model.safetensors"), "rb") as f:
            same = f.read() == earlier_bytes
        checks.check(code in (-signal.SIGINT, 0) and same and not leftovers(earlier),
                     f"an export over an earlier one stopped at {fraction:.0%}: exit {code}, the earlier tensors "
                     f"as they were, no staging file ({leftovers(earlier)})")
    # And at the moment the tensors are being written (the sweep's fractions mostly miss it: an
    # export of this size takes a fraction of a second).
    for target, what in ((os.path.join(work, "fresh_staging"), "into a new folder"), (earlier, "over an earlier one")):
        code = interrupted_while_staging(export + [target], target)
        kept = os.path.exists(os.path.join(earlier, "model.safetensors")) and \
            open(os.path.join(earlier, "model.safetensors"), "rb").read() == earlier_bytes
        gone = not os.path.exists(target) if target != earlier else kept
        checks.check(code == -signal.SIGINT and gone and not leftovers(target),
                     f"an export {what} stopped while its tensors are written: exit {code}, no staging file, "
                     f"{'no folder' if target != earlier else 'the earlier tensors'} left "
                     f"({sorted(os.listdir(target)) if os.path.isdir(target) else '-'})")

    # A rename that fails between others (ZT_TEST_EXPORT_FAIL_AFTER_RENAMES, as a file system fault
    # would): the earlier export and dataset are put back whole, nothing staged or set aside left
    # (the earlier files stayed replaced, the staging files beside them, under the folder's marker).
    def contents(folder):
        return {n: open(os.path.join(folder, n), "rb").read() for n in sorted(os.listdir(folder))}
    other_run = os.path.join(work, "other_run")
    subprocess.run([binary, "train", "--config", config, "--run-dir", other_run, "--set", "train.seed=7"],
                   check=True, capture_output=True)
    other_export = [binary, "ckpt", "export", os.path.join(other_run, "checkpoints"), "--format", "hf", "--out"]
    prepare_other = [binary, "prepare", "--text", other, "--out"]
    for what, argv, folder in (("an HF export", other_export, earlier), ("a prepare", prepare_other, dataset)):
        before = contents(folder)
        for renames in (0, 1, 2):
            p = subprocess.run(argv + [folder], capture_output=True, text=True, timeout=120,
                               env=dict(os.environ, ZT_TEST_EXPORT_FAIL_AFTER_RENAMES=str(renames)))
            lines = p.stderr.strip().splitlines()
            checks.check(p.returncode == 1 and len(lines) == 1 and "the earlier output is back in place" in lines[0]
                         and contents(folder) == before,
                         f"{what} whose rename {renames + 1} fails puts the earlier output back whole (exit "
                         f"{p.returncode}: {lines[-1:]}; {sorted(set(contents(folder)) ^ set(before))})")
    # A directory where an output file goes: refused before anything moves (the earlier config.json
    # was removed and the tensors replaced, the staging files left).
    blocked = os.path.join(earlier, "tokenizer_config.json")
    saved_config = open(blocked, "rb").read()
    os.remove(blocked)
    os.makedirs(os.path.join(blocked, "inside"))
    names_before = sorted(os.listdir(earlier))
    tensors_before = open(os.path.join(earlier, "model.safetensors"), "rb").read()
    p = subprocess.run(other_export + [earlier], capture_output=True, text=True, timeout=120)
    checks.check(p.returncode == 1 and "it is a directory" in p.stderr and sorted(os.listdir(earlier)) == names_before
                 and open(os.path.join(earlier, "model.safetensors"), "rb").read() == tensors_before,
                 f"an export over a directory of an output file's name is refused with the folder as it was "
                 f"({p.stderr.strip()[-200:]}; {sorted(os.listdir(earlier))})")
    shutil.rmtree(blocked)
    with open(blocked, "wb") as f:
        f.write(saved_config)

    # A single file replacing its earlier self is one rename: killed just before it, the earlier
    # file is still under its name (it went aside first, and a kill left the name empty); a name
    # at the length limit is re-exported (the aside name did not fit); and what a kill left aside
    # in a folder goes with the next export into it.
    single = [binary, "ckpt", "export", os.path.join(run, "checkpoints"), "--format", "llmc", "--out"]
    model_bin = os.path.join(work, "single", "model.bin")
    subprocess.run(single + [model_bin], check=True, capture_output=True)
    single_before = open(model_bin, "rb").read()
    p = subprocess.run(single + [model_bin], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, ZT_TEST_EXPORT_EXIT_AFTER_RENAMES="0"))
    checks.check(p.returncode == 137 and open(model_bin, "rb").read() == single_before and
                 not [n for n in os.listdir(os.path.dirname(model_bin)) if "zt-replaced" in n],
                 f"an llm.c export killed before its one rename leaves the earlier file under its name "
                 f"({p.returncode}: {sorted(os.listdir(os.path.dirname(model_bin)))})")
    long_bin = os.path.join(work, "single", "m" * 246 + ".bin")
    first, again = (subprocess.run(single + [long_bin], capture_output=True, text=True) for _ in range(2))
    checks.check(first.returncode == 0 and again.returncode == 0,
                 f"an llm.c export over one whose name is 250 bytes long ({again.stderr.strip()[-200:]})")
    p = subprocess.run(other_export + [earlier], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, ZT_TEST_EXPORT_EXIT_AFTER_RENAMES="1"))
    aside = [n for n in os.listdir(earlier) if n.endswith(".zt-replaced")]
    after = subprocess.run(export + [earlier], capture_output=True, text=True, timeout=120)
    checks.check(p.returncode == 137 and aside and after.returncode == 0 and
                 not [n for n in os.listdir(earlier) if n.endswith(".zt-replaced") or n.endswith(".tmp")] and
                 open(os.path.join(earlier, "model.safetensors"), "rb").read() == earlier_bytes,
                 f"what an export killed between its renames kept aside ({aside}) goes with the next export "
                 f"({sorted(os.listdir(earlier))})")

    # The folders an output needs, made by the command: gone again when it fails part way (a file
    # size limit: write fails "File too large") or is stopped just after making them
    # (ZT_TEST_SIGNAL_AFTER_FOLDERS), where they once stayed behind, empty.
    llmc = [binary, "ckpt", "export", os.path.join(run, "checkpoints"), "--format", "llmc", "--out"]
    outputs = (("an HF export", export, "hf/a"), ("an llm.c export", llmc, "llmc/a/model.bin"),
               ("a prepare", [binary, "prepare", "--text", big, "--out"], "data/a"))
    for what, argv, out in outputs:
        top = os.path.join(work, "failed_" + out.split("/")[0])
        p = subprocess.run(argv + [os.path.join(top, *out.split("/")[1:])], capture_output=True, text=True,
                           timeout=120, preexec_fn=limited_file_size)
        checks.check(p.returncode == 1 and "File too large" in p.stderr and not os.path.exists(top),
                     f"{what} into new folders that fails part way leaves no folder ({p.returncode}: "
                     f"{p.stderr.strip()[-200:]}; {top} there: {os.path.exists(top)})")
        top = os.path.join(work, "stopped_" + out.split("/")[0])
        p = subprocess.run(argv + [os.path.join(top, *out.split("/")[1:])], capture_output=True, text=True,
                           timeout=120, env=dict(os.environ, ZT_TEST_SIGNAL_AFTER_FOLDERS="1"))
        checks.check(p.returncode == -signal.SIGINT and not os.path.exists(top),
                     f"{what} stopped just after making its new folders leaves none ({p.returncode}: "
                     f"{p.stderr.strip()[-200:]}; {top} there: {os.path.exists(top)})")
    return checks.finish()


def limited_file_size():
    """In the child: files of at most 1 MiB, a larger write failing with EFBIG (not SIGXFSZ)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))


if __name__ == "__main__":
    sys.exit(main())
