#!/usr/bin/env python3
"""Files that lie about themselves (a mutation fuzz of every reader found these): each refused in
one line with exit 2 naming the file, before anything is sized by the lie, or, where the field is
only descriptive, read as absent:

  * a run's config.json of another width beside its final.safetensors: `sample --run` allocated the
    model first (48 TiB asked for, exit 1, no file named); now the weights' header is checked first;
  * a Hugging Face index whose weight_map points outside the folder ("../", an absolute path): the
    other folder's file was opened as this model's shard;
  * a Hugging Face config.json whose "architectures" is not a list of strings (a library type error,
    exit 1): only named in the description, so read as absent;
  * `plan --profile` of a JSON file of other types (null, numbers where objects belong): a library
    type error, exit 1;
  * `ckpt inspect` of a damaged rank file: exit 2 with nothing on standard error.

usage: hostile_files_test.py PATH/TO/zerotrain
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402

CONFIG = {"model": {"n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 16, "vocab_size": 64},
          "data": {"embedded_chars": 20000},
          "train": {"micro_batch": 2, "max_steps": 1, "num_threads": 1, "eval_batches": 1},
          "checkpoint": {"at_end": True}, "log": {"sample_tokens": 0, "progress": "plain"}}


def run(binary, *args):
    started = time.time()
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120)
    p.seconds = time.time() - started
    p.lines = p.stderr.strip().splitlines()
    return p


def refused(p, *needles):
    """Exit 2 and one line that holds every needle."""
    return p.returncode == 2 and len(p.lines) == 1 and all(n in p.lines[0] for n in needles)


def main():
    binary = sys.argv[1]
    checks = Checks()
    check = checks.check
    work = checks.work_folder("zt_hostile_")
    config = os.path.join(work, "config.json")
    with open(config, "w") as f:
        json.dump(CONFIG, f)
    run_dir = os.path.join(work, "run")
    p = run(binary, "train", "--config", config, "--run-dir", run_dir)
    if not check(p.returncode == 0, f"a tiny run trains ({p.stderr.strip()[-300:]})"):
        return checks.finish()

    # A run directory whose config.json says another width than its weights.
    wide = os.path.join(work, "wide_run")
    shutil.copytree(run_dir, wide, ignore=shutil.ignore_patterns("checkpoints", "*LOCK*"))
    with open(os.path.join(wide, "config.json")) as f:
        doc = json.load(f)
    doc["model"]["n_embd"] = 1 << 20
    with open(os.path.join(wide, "config.json"), "w") as f:
        json.dump(doc, f)
    p = run(binary, "sample", "--run", wide, "--tokens", "2")
    check(refused(p, "config.json says model.n_embd = 1048576", "final.safetensors was trained with 16")
          and p.seconds < 20,
          f"sample --run of weights narrower than its config: refused before any allocation ({p.returncode}, "
          f"{p.seconds:.1f} s, {p.lines})")

    # A sharded Hugging Face export, its index pointing a tensor outside the folder.
    hf = os.path.join(work, "hf")
    p = run(binary, "ckpt", "export", os.path.join(run_dir, "checkpoints"), "--format", "hf", "--out", hf,
            "--max-shard-size", "8KB")
    index = os.path.join(hf, "model.safetensors.index.json")
    if not check(p.returncode == 0 and os.path.exists(index), f"a sharded export ({p.lines})"):
        return checks.finish()
    p = run(binary, "sample", "--from", hf, "--tokens", "2")
    check(p.returncode == 0, f"the export samples ({p.lines})")
    with open(index) as f:
        original = json.load(f)
    outside = os.path.join(work, "elsewhere")
    os.makedirs(outside)
    for escape in ("../elsewhere/" + sorted(set(original["weight_map"].values()))[0],
                   os.path.join(hf, sorted(set(original["weight_map"].values()))[0]), 7):
        doc = json.loads(json.dumps(original))
        doc["weight_map"][next(iter(doc["weight_map"]))] = escape
        with open(index, "w") as f:
            json.dump(doc, f)
        p = run(binary, "sample", "--from", hf, "--tokens", "2")
        check(refused(p, "model.safetensors.index.json", "not the name of a file in the folder"),
              f"weight_map value {escape!r}: refused ({p.returncode}, {p.lines})")
    with open(index, "w") as f:
        json.dump(original, f)

    # "architectures" of other types: only the description's, read as absent.
    hf_config = os.path.join(hf, "config.json")
    with open(hf_config) as f:
        original = json.load(f)
    for archs in (5, [1, 2], "GPT2LMHeadModel"):
        with open(hf_config, "w") as f:
            json.dump(dict(original, architectures=archs), f)
        p = run(binary, "sample", "--from", hf, "--tokens", "2")
        check(p.returncode == 0, f"architectures {archs!r}: sampled as without it ({p.returncode}, {p.lines})")
    # A config zerotrain refuses: named by --from, the flag given, not as a "config error" in
    # train.init_from, which sample has none of.
    with open(hf_config, "w") as f:
        json.dump(dict(original, activation_function="relu"), f)
    p = run(binary, "sample", "--from", hf, "--tokens", "2")
    check(refused(p, f"sample: --from {hf_config}: activation_function") and "init_from" not in p.lines[0],
          f"a refused Hugging Face config: named by --from ({p.lines})")
    with open(hf_config, "w") as f:
        json.dump(original, f)

    # ckpt inspect of a checkpoint whose rank file is damaged: the table on stdout says which, and
    # standard error has the failing command's one line (it had none).
    damaged = os.path.join(work, "damaged")
    shutil.copytree(os.path.join(run_dir, "checkpoints"), damaged, ignore=shutil.ignore_patterns("*LOCK*"))
    step = sorted(d for d in os.listdir(damaged) if d.startswith("step_"))[-1]
    with open(os.path.join(damaged, step, "rank_00000.bin"), "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    p = run(binary, "ckpt", "inspect", os.path.join(damaged, step))
    check(refused(p, "ckpt inspect", "fail their checksums: 1 of 1") and "FAILED" in p.stdout,
          f"ckpt inspect of a damaged rank file: the table says which, stderr one line ({p.returncode}, {p.lines})")

    # plan --profile of JSON that is not a profile's.
    for name, content in (("null", None), ("numbers", {"config": {"model": 3}, "op_profile": {"device": 5}}),
                          ("ops", {"config": {"model": CONFIG["model"]}, "op_profile": {"ops": [1, 2]}})):
        profile = os.path.join(work, f"profile_{name}.json")
        with open(profile, "w") as f:
            json.dump(content, f)
        p = run(binary, "plan", "--config", os.path.join(ROOT, "configs", "tiny.json"), "--ranks", "2",
                "--device-memory", "1GB", "--profile", profile)
        check(refused(p, "--profile", profile), f"plan --profile of {name}: refused in one line ({p.lines})")
    # Outputs whose name a FIFO (or a device) holds are refused, not replaced: the llm.c export's
    # rename over --out /dev/null, as root, left a regular file where the device was; so did a run's
    # final.safetensors over one in its run directory.
    fifo = os.path.join(work, "fifo")
    os.mkfifo(fifo)
    ckpts = os.path.join(work, "with_ckpt")
    p0 = run(binary, "train", "--config", config, "--run-dir", ckpts, "--set", "checkpoint.at_end=true")
    p = run(binary, "ckpt", "export", os.path.join(ckpts, "checkpoints"), "--format", "llmc", "--out", fifo)
    check(p0.returncode == 0 and refused(p, "--out", "is a FIFO, not a regular file") and
          stat.S_ISFIFO(os.stat(fifo).st_mode), f"ckpt export --format llmc --out a FIFO: refused, kept ({p.lines})")
    os.remove(os.path.join(ckpts, "final.safetensors"))
    os.mkfifo(os.path.join(ckpts, "final.safetensors"))
    p = run(binary, "train", "--config", config, "--run-dir", ckpts)
    check(refused(p, "final.safetensors: is a FIFO, not a regular file") and
          stat.S_ISFIFO(os.stat(os.path.join(ckpts, "final.safetensors")).st_mode),
          f"a FIFO named final.safetensors in the run directory: refused before the run, kept ({p.lines})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
