#!/usr/bin/env python3
"""`ckpt export --format hf` over an earlier export's folder, through the binary:

  * a run of no tokenizer exported over a character run's export leaves no tokenizer of the earlier
    run (its tokenizer.json numbered another model's 41 tokens, and the note said the folder had
    none): the export records in its safetensors metadata the tokenizer files it wrote, and the
    next export removes those it does not write again;
  * a tokenizer.json no export recorded (the user's, after the note asked for one) stays, said, and
    an export that would write one over it is refused; so does one the export wrote and the user
    edited since (its crc32 is recorded beside its name);
  * staging files an export killed before its renames left (model-00001-of-00006.safetensors.tmp)
    go with the next export into the folder; a .tmp of another name stays;
  * --out "" is refused naming the flag (it said "cannot access '': Invalid argument").

usage: export_folder_test.py PATH/TO/zerotrain
"""
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402

CONFIG = os.path.join(ROOT, "configs", "tiny_debug.json")


def metadata(path):
    with open(path, "rb") as f:
        return json.loads(f.read(struct.unpack("<Q", f.read(8))[0])).get("__metadata__", {})


def main():
    binary = sys.argv[1]
    checks = Checks()
    work = checks.work_folder("zt_export_folder_")

    def run(*args):
        return subprocess.run([binary, *args], capture_output=True, text=True, timeout=300)

    def train(name, *sets):
        run_dir = os.path.join(work, name)
        p = run("train", "--config", CONFIG, "--run-dir", run_dir, "--set", "train.max_steps=2", "--set",
                "checkpoint.at_end=true", "--set", "log.sample_tokens=0", *sets)
        checks.check(p.returncode == 0, f"{name} trains ({p.stderr.strip()[-300:]})")
        return os.path.join(run_dir, "checkpoints")

    chars = train("char_run")  # the embedded text's character vocabulary: exported as a tokenizer
    tokens = os.path.join(work, "tokens.bin")
    header = np.zeros(256, np.int32)
    header[:3] = [20240520, 1, 2000]
    with open(tokens, "wb") as f:
        f.write(header.tobytes() + np.random.default_rng(0).integers(0, 300, 2000).astype(np.uint16).tobytes())
    ids = train("token_run", "--set", "model.vocab_size=300", "--set", f"data.train_file={tokens}", "--set",
                f"data.val_file={tokens}")  # token ids alone: no tokenizer to export

    out = os.path.join(work, "published")
    first = run("ckpt", "export", chars, "--format", "hf", "--out", out)
    recorded = metadata(os.path.join(out, "model.safetensors")).get("tokenizer_files") if first.returncode == 0 else None
    checks.check(first.returncode == 0 and recorded == "tokenizer.json,tokenizer_config.json",
                 f"an export records the tokenizer files it writes ({recorded!r}; {first.stderr.strip()[-200:]})")
    second = run("ckpt", "export", ids, "--format", "hf", "--out", out)
    left = sorted(n for n in os.listdir(out) if n.startswith("tokenizer"))
    checks.check(second.returncode == 0 and left == [] and "the folder has no tokenizer" in second.stderr,
                 f"a run of no tokenizer exported over it leaves none of the earlier run's ({left}; "
                 f"{second.stderr.strip()[-200:]})")

    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        f.write("{}")  # the user's, as the note asked
    third = run("ckpt", "export", ids, "--format", "hf", "--out", out)
    checks.check(third.returncode == 0 and os.path.exists(os.path.join(out, "tokenizer.json")) and
                 "tokenizer.json is not this export's (yours, or an older export's), kept" in third.stderr,
                 f"a tokenizer.json no export wrote stays, said ({third.stderr.strip()[-300:]})")
    # ... and an export that writes a tokenizer.json of its own over it is refused, the user's file
    # as it was (beside an export from before exports wrote tokenizers, it was replaced unsaid).
    over = run("ckpt", "export", chars, "--format", "hf", "--out", out)
    with open(os.path.join(out, "tokenizer.json")) as f:
        kept_text = f.read()
    checks.check(over.returncode == 2 and "holds a tokenizer.json no export recorded writing" in over.stderr and "move it away to export here" in over.stderr and
                 kept_text == "{}", f"an export writing over a tokenizer.json no export wrote: refused, the file kept "
                 f"({over.stderr.strip()[-300:]})")

    # An export's tokenizer_config.json the user edited since (a chat template added): the user's.
    edited = os.path.join(work, "edited")
    run("ckpt", "export", chars, "--format", "hf", "--out", edited)
    again = run("ckpt", "export", chars, "--format", "hf", "--out", edited)
    checks.check(again.returncode == 0, f"an export over its own unedited export ({again.stderr.strip()[-200:]})")
    config_path = os.path.join(edited, "tokenizer_config.json")
    with open(config_path) as f:
        config = json.load(f)
    config["chat_template"] = "{{ messages }}"
    with open(config_path, "w") as f:
        json.dump(config, f)
    with open(config_path) as f:
        edited_text = f.read()
    over_edit = run("ckpt", "export", chars, "--format", "hf", "--out", edited)
    with open(config_path) as f:
        after = f.read()
    checks.check(over_edit.returncode == 2 and "holds a tokenizer_config.json changed since the export that wrote it"
                 in over_edit.stderr and after == edited_text,
                 f"an export over a tokenizer file the user edited since: refused, the edit kept "
                 f"({over_edit.stderr.strip()[-300:]})")
    none_over = run("ckpt", "export", ids, "--format", "hf", "--out", edited)
    left = sorted(n for n in os.listdir(edited) if n.startswith("tokenizer"))
    checks.check(none_over.returncode == 0 and left == ["tokenizer_config.json"] and
                 "tokenizer_config.json is not this export's" in none_over.stderr,
                 f"a run of no tokenizer exported over it: the edited file stays, said; the unedited one goes "
                 f"({left}; {none_over.stderr.strip()[-300:]})")

    # An export cut between its renames (the tensors renamed, the tokenizer not): the next export of
    # that run completes it, the earlier run's tokenizer beside the new tensors' crc32s taken as
    # written, not as the user's edit (it was refused as one).
    other_text = os.path.join(work, "other.txt")
    with open(other_text, "w") as f:
        f.write("the quick brown fox jumps over the lazy dog. " * 400)
    other_data = os.path.join(work, "other_data")
    prepared = run("prepare", "--text", other_text, "--out", other_data)
    checks.check(prepared.returncode == 0, f"a second dataset prepares ({prepared.stderr.strip()[-200:]})")
    other = train("other_run", "--set", f"data.train_file={other_data}/train.bin", "--set",
                  f"data.val_file={other_data}/val.bin", "--set", f"data.vocab_file={other_data}/vocab.json")
    cut_folder = os.path.join(work, "cut")
    run("ckpt", "export", chars, "--format", "hf", "--out", cut_folder)
    cut = subprocess.run([binary, "ckpt", "export", other, "--format", "hf", "--out", cut_folder], capture_output=True,
                         text=True, timeout=300, env=dict(os.environ, ZT_TEST_EXPORT_EXIT_AFTER_RENAMES="1"))
    finish = run("ckpt", "export", other, "--format", "hf", "--out", cut_folder)
    with open(os.path.join(other_data, "vocab.json")) as f:
        other_vocab = json.load(f).get("tokens", [])
    with open(os.path.join(cut_folder, "tokenizer.json")) as f:
        exported = json.load(f).get("model", {}).get("vocab", {})
    checks.check(cut.returncode != 0 and finish.returncode == 0 and sorted(exported) == sorted(other_vocab),
                 f"an export cut between its renames is completed by the next ({cut.returncode}, "
                 f"{finish.stderr.strip()[-300:]})")

    # Two exports cut in a row: the second removed the first's set-aside tensors, and with them the
    # record of the tokenizer beside them; the next export is refused, saying the record may be gone
    # with the cut exports, not that the file was edited.
    twice = os.path.join(work, "cut_twice")
    run("ckpt", "export", chars, "--format", "hf", "--out", twice)
    for renames in ("1", "0"):
        subprocess.run([binary, "ckpt", "export", other, "--format", "hf", "--out", twice], capture_output=True,
                       text=True, timeout=300, env=dict(os.environ, ZT_TEST_EXPORT_EXIT_AFTER_RENAMES=renames))
    third_try = run("ckpt", "export", other, "--format", "hf", "--out", twice)
    checks.check(third_try.returncode == 0 or "whose record went with the exports cut while replacing it" in
                 third_try.stderr, f"after two cut exports: completed, or refused saying the record may be gone "
                 f"({third_try.returncode}: {third_try.stderr.strip()[-300:]})")

    # ... while a tokenizer file the user edited stays the user's across a cut (taken as the export's
    # while a cut's marker was there, it was removed by the export that completed the cut).
    kept_edit = os.path.join(work, "cut_edit")
    run("ckpt", "export", chars, "--format", "hf", "--out", kept_edit)
    with open(os.path.join(kept_edit, "tokenizer_config.json")) as f:
        config = json.load(f)
    config["chat_template"] = "{{ messages }}"
    with open(os.path.join(kept_edit, "tokenizer_config.json"), "w") as f:
        json.dump(config, f)
    subprocess.run([binary, "ckpt", "export", ids, "--format", "hf", "--out", kept_edit], capture_output=True,
                   text=True, timeout=300, env=dict(os.environ, ZT_TEST_EXPORT_EXIT_AFTER_RENAMES="0"))
    after_cut = run("ckpt", "export", ids, "--format", "hf", "--out", kept_edit)
    left = sorted(n for n in os.listdir(kept_edit) if n.startswith("tokenizer"))
    checks.check(after_cut.returncode == 0 and left == ["tokenizer_config.json"],
                 f"after a cut export, an edited tokenizer file stays; the unedited one goes ({left}; "
                 f"{after_cut.stderr.strip()[-200:]})")

    # A file of the set-aside suffix in a folder no export was cut in is the user's: it stays (every
    # export of several files removed them).
    aside = os.path.join(work, "user_aside")
    run("ckpt", "export", chars, "--format", "hf", "--out", aside)
    with open(os.path.join(aside, "notes.zt-replaced"), "w") as f:
        f.write("mine")
    again = run("ckpt", "export", chars, "--format", "hf", "--out", aside)
    checks.check(again.returncode == 0 and os.path.exists(os.path.join(aside, "notes.zt-replaced")),
                 f"a user's .zt-replaced file in a folder never cut stays ({again.stderr.strip()[-200:]})")

    for name in ("model-00001-of-00006.safetensors.tmp", "tokenizer.json.tmp", "notes.tmp"):
        with open(os.path.join(out, name), "wb") as f:
            f.write(b"left by a killed export")
    fourth = run("ckpt", "export", ids, "--format", "hf", "--out", out)
    stale = sorted(n for n in os.listdir(out) if n.endswith(".tmp"))
    checks.check(fourth.returncode == 0 and stale == ["notes.tmp"],
                 f"a killed export's staging files go with the next export, others stay ({stale})")

    # Where the run directory is unknown (moved away), whether the run had a tokenizer is too: the
    # tokenizer files an earlier export of it recorded are kept (they were removed, and the note
    # asked for them again).
    kept = os.path.join(work, "kept")
    run("ckpt", "export", chars, "--format", "hf", "--out", kept)
    lone = os.path.join(work, "lone", "checkpoints", "step_00000002")  # the checkpoint copied on its own
    shutil.copytree(os.path.join(chars, "step_00000002"), lone)
    os.rename(os.path.join(work, "char_run"), os.path.join(work, "char_run_away"))
    moved = run("ckpt", "export", lone, "--format", "hf", "--out", kept)
    os.rename(os.path.join(work, "char_run_away"), os.path.join(work, "char_run"))
    checks.check(moved.returncode == 0 and "no longer exists" in moved.stderr and
                 os.path.exists(os.path.join(kept, "tokenizer.json")),
                 f"a run directory not found keeps the earlier export's tokenizer ({moved.stderr.strip()[-300:]})")

    empty = run("ckpt", "export", ids, "--format", "hf", "--out", "")
    lines = [line for line in empty.stderr.splitlines() if line.strip()]
    checks.check(empty.returncode == 2 and len(lines) == 1 and "--out is empty" in lines[0],
                 f"--out \"\" is refused naming the flag ({lines})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
