#!/usr/bin/env python3
"""The vocabulary a checkpoint's tokens are read with, where a later run in the same run directory
replaced the directory's copy (a fresh run whose first save set the earlier checkpoints aside in
superseded/):

  * `ckpt export --format hf` and `sample --ckpt` of the earlier run's checkpoint read the
    vocabulary it recorded (its prepared dataset's vocab.json, still there), said in a note (they
    took the later run's: a 41-token tokenizer for a model of Shakespeare's 65 characters, exit 0);
  * a checkpoint from before splits were recorded finds its vocab.json among its files by name;
  * with that file gone, both are refused in one line naming it, nothing written;
  * a checkpoint of the embedded text, whose run directory now holds a prepared dataset's
    vocabulary, is refused (nothing was recorded to find its own with); `sample --vocab` names one;
  * shards read with the tokenizer.json beside them (no data key names it, as
    tools/prepare_tokens.py leaves them): that tokenizer is recorded, so a checkpoint set aside
    after the tokenizer there changed is refused, and read from there once it is back (the later
    tokenizer was exported with exit 0: nothing recorded it);
  * the later run's own checkpoints read the directory's copy, with no note, and so do a resumed
    run's earlier ones (another seed by --allow-config-change); eval, which reads no vocabulary,
    scores a set-aside checkpoint all the same.

usage: checkpoint_vocabulary_test.py PATH/TO/zerotrain
"""
import json
import os
import shutil
import subprocess
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402
from shared_corpus import require_tiny_shakespeare  # noqa: E402

TEXT = require_tiny_shakespeare()  # exits 77 (skipped) where the shared corpus is absent
CONFIG = os.path.join(ROOT, "configs", "tiny_debug.json")


def main():
    binary = sys.argv[1]
    checks = Checks()
    work = checks.work_folder("zt_ckpt_vocab_")

    def run(*args):
        return subprocess.run([binary, *args], capture_output=True, text=True, timeout=300)

    def lines(p):
        return [line for line in p.stderr.splitlines() if line.strip()]

    def tokens_of(folder):
        with open(os.path.join(folder, "tokenizer.json")) as f:
            return len(json.load(f)["model"]["vocab"])

    dataset = os.path.join(work, "shakespeare")
    run("prepare", "--text", TEXT, "--out", dataset)
    shakespeare = ["--set", f"data.dataset={dataset}", "--set", "model.vocab_size=65"]

    def train(run_dir, steps, *sets):
        p = run("train", "--config", CONFIG, "--run-dir", run_dir, "--set", f"train.max_steps={steps}", "--set",
                "checkpoint.at_end=true", "--set", "log.sample_tokens=0", *sets)
        checks.check(p.returncode == 0, f"a run of {steps} steps in {os.path.basename(run_dir)} ({p.stderr[-200:]})")

    # Shakespeare's characters first, then the embedded text's in the same directory.
    first = os.path.join(work, "shakespeare_then_embedded")
    train(first, 3, *shakespeare)
    train(first, 2)
    aside = os.path.join(first, "checkpoints", "superseded", "step_00000003")
    out = os.path.join(work, "export_aside")
    p = run("ckpt", "export", aside, "--format", "hf", "--out", out)
    checks.check(p.returncode == 0 and tokens_of(out) == 65 and f"vocabulary is {dataset}/vocab.json" in p.stderr,
                 f"the set-aside checkpoint exports with its own vocabulary, said ({p.stderr.strip()[-300:]})")
    s = run("sample", "--ckpt", aside, "--prompt", "ROMEO", "--tokens", "5")
    checks.check(s.returncode == 0 and s.stdout.startswith("ROMEO"),
                 f"... and samples a prompt of its characters ({s.stderr.strip()[-300:]})")
    latest = run("ckpt", "export", os.path.join(first, "checkpoints"), "--format", "hf", "--out",
                 os.path.join(work, "export_latest"))
    checks.check(latest.returncode == 0 and tokens_of(os.path.join(work, "export_latest")) < 65 and
                 "vocabulary is" not in latest.stderr,
                 f"the later run's checkpoint reads the directory's copy, no note ({latest.stderr.strip()[-200:]})")
    # A checkpoint from before splits were recorded (an earlier build's identity: its files without
    # "split"): its vocab.json is found among them by name (it was refused as recording none).
    older = os.path.join(work, "older_identity")
    shutil.copytree(first, older)
    older_aside = os.path.join(older, "checkpoints", "superseded", "step_00000003")
    with open(os.path.join(older_aside, "manifest.json")) as f:
        manifest = json.load(f)
    for entry in manifest["extra"]["data_identity"]:
        entry.pop("split", None)
    manifest.pop("manifest_crc32")
    manifest["manifest_crc32"] = zlib.crc32(json.dumps(manifest, separators=(",", ":"), ensure_ascii=False).encode())
    with open(os.path.join(older_aside, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    out_older = os.path.join(work, "export_older")
    p = run("ckpt", "export", older_aside, "--format", "hf", "--out", out_older)
    checks.check(p.returncode == 0 and tokens_of(out_older) == 65 and f"vocabulary is {dataset}/vocab.json" in p.stderr,
                 f"a set-aside checkpoint of an identity without splits exports with its own vocabulary "
                 f"({p.stderr.strip()[-300:]})")
    os.rename(os.path.join(dataset, "vocab.json"), os.path.join(work, "vocab.json.away"))
    gone = run("ckpt", "export", aside, "--format", "hf", "--out", os.path.join(work, "export_gone"))
    checks.check(gone.returncode == 2 and len(lines(gone)) == 1 and f"{dataset}/vocab.json" in lines(gone)[0] and
                 "gone or changed" in lines(gone)[0] and not os.path.exists(os.path.join(work, "export_gone")),
                 f"with its vocabulary gone: refused in one line, nothing written ({lines(gone)})")
    os.rename(os.path.join(work, "vocab.json.away"), os.path.join(dataset, "vocab.json"))

    # The embedded text's first, then Shakespeare's.
    second = os.path.join(work, "embedded_then_shakespeare")
    train(second, 3)
    train(second, 2, *shakespeare)
    aside = os.path.join(second, "checkpoints", "superseded", "step_00000003")
    p = run("ckpt", "export", aside, "--format", "hf", "--out", os.path.join(work, "export_embedded"))
    checks.check(p.returncode == 2 and len(lines(p)) == 1 and "trained on the embedded text" in lines(p)[0],
                 f"an embedded-text checkpoint beside a later run's vocabulary: refused ({lines(p)})")
    named = run("sample", "--ckpt", aside, "--vocab", os.path.join(first, "vocab.json"), "--tokens", "3")
    checks.check(named.returncode == 0, f"... sample --vocab names one ({named.stderr.strip()[-200:]})")
    # eval reads no vocabulary: it scores the set-aside checkpoint all the same.
    scored = run("eval", "--ckpt", aside, "--tokens", os.path.join(dataset, "val.bin"), "--windows", "2")
    checks.check(scored.returncode == 0, f"eval --ckpt of it scores tokens ({scored.stderr.strip()[-200:]})")

    # Shards with the tokenizer beside them, which no key names; another tokenizer written there (a
    # prepare_tokens.py of other text into the folder) before a later run in the directory.
    shards = os.path.join(work, "shards")
    os.makedirs(shards)
    shutil.copy(os.path.join(dataset, "train.bin"), os.path.join(shards, "s_train_000001.bin"))
    shutil.copy(os.path.join(dataset, "val.bin"), os.path.join(shards, "s_val_000000.bin"))
    tokenizer = os.path.join(shards, "tokenizer.json")
    shutil.copy(os.path.join(out, "tokenizer.json"), tokenizer)
    with open(tokenizer) as f:
        own = json.load(f)
    swapped = json.loads(json.dumps(own))
    vocab = swapped["model"]["vocab"]
    a, b = sorted(vocab, key=vocab.get)[10:12]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    on_shards = ["--set", f"data.train_files={shards}/s_train_*.bin", "--set", f"data.val_files={shards}/s_val_*.bin",
                 "--set", "data.dataset=embedded", "--set", "model.vocab_size=65"]
    third = os.path.join(work, "shards_then_other_tokenizer")
    train(third, 3, *on_shards)
    with open(tokenizer, "w") as f:
        json.dump(swapped, f)
    train(third, 2, *on_shards)
    aside = os.path.join(third, "checkpoints", "superseded", "step_00000003")
    p = run("ckpt", "export", aside, "--format", "hf", "--out", os.path.join(work, "export_shards"))
    checks.check(p.returncode == 2 and len(lines(p)) == 1 and tokenizer in lines(p)[0] and
                 "gone or changed" in lines(p)[0] and not os.path.exists(os.path.join(work, "export_shards")),
                 f"a shard run's set-aside checkpoint after its tokenizer changed: refused naming it ({lines(p)})")
    shutil.copy(os.path.join(out, "tokenizer.json"), tokenizer)  # the very bytes it trained with
    p = run("ckpt", "export", aside, "--format", "hf", "--out", os.path.join(work, "export_shards"))
    exported = None
    if p.returncode == 0:
        with open(os.path.join(work, "export_shards", "tokenizer.json")) as f:
            exported = json.load(f)["model"]["vocab"]
    checks.check(p.returncode == 0 and exported == own["model"]["vocab"] and f"vocabulary is {tokenizer}" in p.stderr,
                 f"... with it back, exported with it, said ({p.stderr.strip()[-300:]})")
    # The run directory's tokenizer.json replaced by one zerotrain does not read (a WordPiece
    # model): refused by the export, as sample and the run would refuse it (it was copied, exit 0).
    run_tokenizer = os.path.join(third, "tokenizer.json")
    shutil.copy(run_tokenizer, run_tokenizer + ".kept")
    with open(run_tokenizer, "w") as f:
        json.dump({"model": {"type": "WordPiece", "vocab": {"a": 0}}}, f)
    out_wordpiece = os.path.join(work, "export_wordpiece")
    p = run("ckpt", "export", os.path.join(third, "checkpoints"), "--format", "hf", "--out", out_wordpiece)
    checks.check(p.returncode == 2 and len(lines(p)) == 1 and "not one it could have trained with" in lines(p)[0] and
                 not os.path.exists(os.path.join(out_wordpiece, "tokenizer.json")),
                 f"a run tokenizer zerotrain does not read: the export refuses it ({lines(p)})")
    os.replace(run_tokenizer + ".kept", run_tokenizer)

    # A run resumed with another seed (--allow-config-change): its earlier checkpoints, in its own
    # folder, are its trajectory's, read with the directory's copy (they were refused as a later
    # run's: the embedded text's seed differed).
    resumed = os.path.join(work, "resumed")
    train(resumed, 2)
    p = run("train", "--config", CONFIG, "--run-dir", resumed, "--set", "train.max_steps=3", "--set",
            "checkpoint.at_end=true", "--set", "log.sample_tokens=0", "--set", "train.seed=7", "--resume", "latest",
            "--allow-config-change")
    exported = run("ckpt", "export", os.path.join(resumed, "checkpoints", "step_00000002"), "--format", "hf",
                   "--out", os.path.join(work, "export_resumed"))
    checks.check(p.returncode == 0 and exported.returncode == 0 and "vocabulary is" not in exported.stderr,
                 f"a resumed run's earlier checkpoint exports as before ({p.stderr.strip()[-200:]}; "
                 f"{exported.stderr.strip()[-200:]})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
