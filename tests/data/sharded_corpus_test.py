#!/usr/bin/env python3
"""Training on sharded corpora through the real CLI (data.train_files, data.order): tinyshakespeare
(prepared here, char-level) cut into four llm.c shards.

  * 2 ranks at ZeRO stage 3 train on the shards in llm.c's sequential order; the run's header says
    how many shards and tokens each split has;
  * its step-3 checkpoint resumes on 2 ranks bitwise, and on 1 rank with steps 4-6 within 1e-4 of
    the uninterrupted run: the data position is a function of the sample index, not of the ranks;
  * random order over the shards trains too, and differs from sequential;
  * a token over the vocabulary deep inside one shard is found when the run reaches it: every rank
    stops at that step, the job printing one line naming the shard (exit 2, no hang), and the checkpoint written
    before it still resumes;
  * a pattern that matches nothing, a mix of uint16 and uint32 shards, a file in both splits and a
    text file matched as raw tokens are refused in one line; so are shards of two prepared
    datasets of other vocabularies (where data.vocab_file names none).

usage: sharded_corpus_test.py MPIRUN [MPIRUN FLAGS...] -- PATH/TO/zerotrain
"""
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402
from shared_corpus import require_tiny_shakespeare  # noqa: E402
from run_dir_util import curve, train_records  # noqa: E402

TEXT = require_tiny_shakespeare()  # exits 77 (skipped) where the shared corpus is absent
CONFIG = {
    "model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 65},
    "train": {"micro_batch": 4, "max_steps": 6, "eval_batches": 2, "num_threads": 1, "deterministic": True},
    "optim": {"lr": 3e-3, "warmup_steps": 0, "decay": "constant"},
    "zero": {"stage": 3},
    "checkpoint": {"every_steps": 3},
    "log": {"sample_tokens": 0, "progress": "plain"},
}


def write_llmc(path, tokens, wide=False):
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = (20240801, 7, len(tokens)) if wide else (20240520, 1, len(tokens))
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype=np.uint32 if wide else np.uint16).tobytes())


def read_llmc(path):
    with open(path, "rb") as f:
        f.seek(1024)
        return np.frombuffer(f.read(), dtype=np.uint16)


def main():
    split = sys.argv.index("--")
    launcher, binary = sys.argv[1:split], sys.argv[split + 1]
    checks = Checks()
    work = checks.work_folder("zt_shards_")
    prepared = os.path.join(work, "prepared")
    subprocess.run([binary, "prepare", "--text", TEXT, "--out", prepared], check=True, capture_output=True)
    train, val = read_llmc(os.path.join(prepared, "train.bin")), read_llmc(os.path.join(prepared, "val.bin"))
    shards = os.path.join(work, "shards")
    os.makedirs(shards)
    for i, part in enumerate(np.array_split(train, 4)):
        write_llmc(os.path.join(shards, f"shakespeare_train_{i:06d}.bin"), part)
    write_llmc(os.path.join(shards, "shakespeare_val_000000.bin"), val)
    config = os.path.join(work, "config.json")
    with open(config, "w") as f:
        json.dump(CONFIG, f)
    data_sets = ["--set", f"data.train_files={shards}/shakespeare_train_*.bin",
                 "--set", f"data.val_files={shards}/shakespeare_val_*.bin",
                 "--set", f"data.vocab_file={prepared}/vocab.json"]

    def train_run(name, ranks, *extra):
        run_dir = os.path.join(work, name)
        cmd = ([binary] if ranks == 1 else launcher + ["-np", str(ranks), binary]) + [
            "train", "--config", config, "--run-dir", run_dir, *data_sets, *extra]
        return run_dir, subprocess.run(cmd, capture_output=True, text=True, timeout=300)

    # 2 ranks, sequential, uninterrupted (checkpoints at steps 3 and 6).
    seq_dir, p = train_run("sequential", 2, "--set", "data.order=sequential")
    if not checks.check(p.returncode == 0, f"2 ranks train at stage 3 on 4 shards in sequential order "
                                           f"({(p.stdout + p.stderr)[-600:]})"):
        return checks.finish()
    header = next((l for l in p.stdout.splitlines() if l.startswith("data: ")), "")
    checks.check(f"train: 4 shards (llm.c uint16), {len(train):,} tokens" in header and
                 f"val: 1 shard (llm.c uint16), {len(val):,} tokens" in header and "sequential windows" in header,
                 f"the header gives each split's shards and tokens ({header})")
    seq = [(s, l) for s, l, _, _ in curve(train_records(seq_dir))]
    checks.check(len(seq) == 6 and len({l for _, l in seq}) == 6, f"6 steps, each on its own data ({seq})")

    step3 = os.path.join(seq_dir, "checkpoints", "step_00000003")
    for ranks in (2, 1):
        # The same global batch of 8 samples: 2 x 4, or 1 x 8.
        resumed, p = train_run(f"resumed_n{ranks}", ranks, "--set", "data.order=sequential", "--set",
                               f"train.micro_batch={8 // ranks}", "--resume", step3)
        if not checks.check(p.returncode == 0, f"the step-3 checkpoint resumes on {ranks} rank(s) "
                                               f"({(p.stdout + p.stderr)[-400:]})"):
            continue
        after = [(s, l) for s, l, _, _ in curve(train_records(resumed))]
        if ranks == 2:
            checks.check(after == seq[3:], f"on 2 ranks steps 4-6 are bitwise the uninterrupted run's ({after})")
        else:
            gap = max(abs(a[1] - b[1]) for a, b in zip(after, seq[3:])) if len(after) == 3 else float("inf")
            checks.check([s for s, _ in after] == [4, 5, 6] and gap < 1e-4,
                         f"on 1 rank steps 4-6 follow the uninterrupted run within 1e-4 ({gap:.2e})")

    rnd_dir, p = train_run("random", 2, "--set", "checkpoint.every_steps=0")
    if checks.check(p.returncode == 0, "random order over the shards trains"):
        rnd = [l for _, l, _, _ in curve(train_records(rnd_dir))]
        checks.check(rnd != [l for _, l in seq] and "random windows" in p.stdout,
                     "and reads other windows than the sequential walk")

    # A bad token at position 300 of shard 0: sequential windows of 32 tokens, 8 samples a step on
    # 2 ranks, so step 2 reads tokens 256..512. The entropy's sample is cut to 64 tokens (one at
    # position 0 of shard 0, the rest far from 300), as a large corpus's would miss it.
    bad_dir = os.path.join(work, "bad_shards")
    os.makedirs(bad_dir)
    for i in range(4):
        part = read_llmc(os.path.join(shards, f"shakespeare_train_{i:06d}.bin")).copy()
        if i == 0:
            part[300] = 500
        write_llmc(os.path.join(bad_dir, f"train_{i:06d}.bin"), part)
    bad_run = os.path.join(work, "bad")
    cmd = launcher + ["-x", "ZT_TEST_ENTROPY_SAMPLE_TOKENS", "-np", "2", binary, "train", "--config", config,
                      "--run-dir", bad_run,
                      "--set", f"data.train_files={bad_dir}/train_*.bin",
                      "--set", f"data.val_files={shards}/shakespeare_val_*.bin", "--set", "data.order=sequential",
                      "--set", "checkpoint.every_steps=1"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "ZT_TEST_ENTROPY_SAMPLE_TOKENS": "64"})
        errors = [l for l in p.stderr.splitlines() if "zerotrain: error:" in l]
        # Every rank reads the step's whole global batch, so all meet the token: the job's line, once.
        checks.check(p.returncode == 2 and len(errors) == 1 and
                     f"{bad_dir}/train_000000.bin: token 500 at position 300" in errors[0],
                     f"a bad token is found when step 2 reaches it, named by shard and position once for the "
                     f"job (exit {p.returncode}: {errors or p.stderr[-400:]})")
        steps = [s for s, _, _, _ in curve(train_records(bad_run))]
        checks.check(steps == [1], f"the run stopped before step 2 ran ({steps})")
        ok = os.path.isdir(os.path.join(bad_run, "checkpoints", "step_00000001"))
        if checks.check(ok, "step 1's checkpoint is there"):
            # Other shards than the checkpoint recorded: a resume says so, and continues only when told to.
            step1 = os.path.join(bad_run, "checkpoints", "step_00000001")
            _, p = train_run("refused", 2, "--set", "checkpoint.every_steps=0", "--set", "data.order=sequential",
                             "--resume", step1)
            checks.check(p.returncode != 0 and "bad_shards/train_000000.bin" in p.stderr,
                         f"a resume on other shards is refused naming them ({p.stderr[-300:]})")
            _, p = train_run("after_bad", 2, "--set", "checkpoint.every_steps=0", "--set", "data.order=sequential",
                             "--resume", step1, "--allow-config-change")
            checks.check(p.returncode == 0 and "continuing with a changed config" in p.stdout,
                         f"and resumes on the good shards with --allow-config-change ({p.stderr[-300:]})")
            # Sequential order: the position, a count of windows, now lands elsewhere in the files.
            checks.check("the sequential order rereads or skips windows" in p.stdout,
                         f"and says the sequential order's position moved with the files ({p.stdout[-400:]})")
    except subprocess.TimeoutExpired:
        checks.check(False, "a bad token stops the 2-rank job without a hang (timed out after 120 s)")

    # An evaluation asking more windows than the validation split holds (sequential order) says so.
    small_val = os.path.join(work, "small_val.bin")
    write_llmc(small_val, val[:500])
    _, p = train_run("small_val", 1, "--set", f"data.val_files={small_val}", "--set", "data.order=sequential",
                     "--set", "train.max_steps=1", "--set", "train.eval_batches=100", "--set", "checkpoint.every_steps=0")
    checks.check(p.returncode == 0 and "note: an evaluation reads" in p.stdout and "repeat a window" in p.stdout,
                 f"an evaluation larger than the validation split is noted ({p.stdout[-300:]} {p.stderr[-200:]})")
    # ... in random order too; and a shard too short for a window, whose tokens nothing reads (32
    # tokens: one short of a window of seq_len 32 and its next token).
    write_llmc(os.path.join(work, "short_000001.bin"), train[:32])
    _, p = train_run("short_shard", 1, "--set", f"data.val_files={small_val}", "--set",
                     f"data.train_files=[\"{shards}/shakespeare_train_*.bin\", \"{work}/short_000001.bin\"]",
                     "--set", "train.max_steps=1", "--set", "train.eval_batches=1000", "--set", "checkpoint.every_steps=0")
    checks.check(p.returncode == 0 and "so at least" in p.stdout and
                 "note: 1 training shard(s) shorter than a window (33 tokens) are never read" in p.stdout and
                 "short_000001.bin" in p.stdout,
                 f"random order: the repeats and a shard shorter than a window are noted "
                 f"({[line for line in p.stdout.splitlines() if line.startswith('data:')]})")
    # One file both splits read, as named (data.val_file the data.train_file, a shard named in both
    # lists): taken as meant, and noted (it trained in silence).
    for what, sets in (("one file", ["data.train_files=[]", "data.val_files=[]", f"data.train_file={small_val}",
                                     f"data.val_file={small_val}"]),
                       ("a shard in both lists", [f"data.train_files=[\"{small_val}\"]",
                                                  f"data.val_files=[\"{small_val}\"]"])):
        _, p = train_run("same_file_" + what.replace(" ", "_"), 1, *[a for s in sets for a in ("--set", s)], "--set",
                         "train.max_steps=1", "--set", "checkpoint.every_steps=0")
        checks.check(p.returncode == 0 and f"note: validation reads a file training reads too ({small_val})" in p.stdout,
                     f"{what} for both splits: noted "
                     f"({[line for line in p.stdout.splitlines() if line.startswith('data:')]} {p.stderr[-200:]})")

    # A prepared dataset whose vocabulary is larger than the model's: named, not its first token past it.
    p = subprocess.run([binary, "train", "--config", config, "--run-dir", os.path.join(work, "small_vocab"), "--set",
                        f"data.dataset={prepared}", "--set", "model.vocab_size=60"],
                       capture_output=True, text=True, timeout=120)
    lines = p.stderr.strip().splitlines()
    checks.check(p.returncode == 2 and len(lines) == 1 and "model.vocab_size = 60 is smaller than" in lines[0] and
                 "vocab.json's vocabulary" in lines[0], f"a dataset's vocabulary past the model's is named ({lines})")

    # Refused at the start, in one line.
    for what, sets, fragments in [
        ("a pattern that matches nothing", ["--set", f"data.train_files={shards}/nothing_*.bin"],
         ["data.train_files", "nothing_*.bin", "matches no file"]),
        ("a mix of uint16 and uint32 shards", ["--set", f"data.val_files={work}/mixed_*.bin"],
         ["mixed_1.bin", "llm.c uint32", "one format per split"]),
        # Patterns on both sides: neither is named as the one at fault (it blamed the training side
        # where a validation glob took a training shard).
        ("a glob that takes the validation shard into training", ["--set", f"data.train_files={shards}/*.bin"],
         ["shakespeare_val_000000.bin", "a data.train_files and a data.val_files pattern both take"]),
        ("a glob that takes a training shard into validation",
         ["--set", f"data.train_files=[\"{shards}/shakespeare_train_000000.bin\"]",
          "--set", f"data.val_files={shards}/shakespeare_*_000000.bin"],
         ["shakespeare_train_000000.bin", "a data.val_files pattern takes", "into validation"]),
        # The windows every evaluation reads are checked at the start (an evaluation after the last
        # step found it, the whole run trained first).
        ("a validation token outside the vocabulary", ["--set", f"data.val_files={work}/bad_val.bin",
                                                       "--set", "data.order=sequential"],
         [f"{work}/bad_val.bin: token 500 at position 50", "outside the vocabulary"]),
        ("a text file beside the shards", ["--set", f"data.train_files={work}/notes.txt"],
         ["notes.txt", "not a .bin file", "data.format"]),
        ("one shard under two names", ["--set", f"data.train_files=[\"{shards}/shakespeare_train_*.bin\", "
                                               f"\"{shards}/./shakespeare_train_000001.bin\"]"],
         ["./shakespeare_train_000001.bin is listed twice (as", "shakespeare_train_000001.bin too: the same file)"]),
        ("a pattern in a folder that does not exist", ["--set", f"data.train_files={work}/no_such_dir/train_*.bin"],
         ["data.train_files", f"no folder {work}/no_such_dir"]),
    ]:
        with open(os.path.join(work, "notes.txt"), "w") as f:  # nanoGPT's input.txt beside its .bin files
            f.write("First Citizen:\nBefore we proceed any further, hear me speak.\n" * 50)
        write_llmc(os.path.join(work, "mixed_0.bin"), val[:5000])
        write_llmc(os.path.join(work, "mixed_1.bin"), val[:5000], wide=True)
        bad_val = val[:5000].copy()
        bad_val[50] = 500
        write_llmc(os.path.join(work, "bad_val.bin"), bad_val)
        p = subprocess.run([binary, "train", "--config", config, "--run-dir", os.path.join(work, "refused"),
                            *data_sets, *sets], capture_output=True, text=True, timeout=120)
        lines = p.stderr.strip().splitlines()
        checks.check(p.returncode == 2 and len(lines) == 1 and all(f in lines[0] for f in fragments),
                     f"{what} is refused in one line with exit 2 (exit {p.returncode}: {lines})")
    # Shards of two zerotrain prepare datasets of other vocabularies (a text of digits beside
    # Shakespeare's): refused in one line naming both vocab.json files (it trained, id 11 read as 'A'
    # in one and 'B' in the other); a vocabulary named with data.vocab_file is the user's choice.
    digits = os.path.join(work, "digits")
    with open(os.path.join(work, "digits.txt"), "w") as f:
        f.write("0123456789 \n" * 3000)
    subprocess.run([binary, "prepare", "--text", os.path.join(work, "digits.txt"), "--out", digits], check=True,
                   capture_output=True)
    two_folders = ["--set", f"data.train_files=[\"{prepared}/train.bin\", \"{digits}/train.bin\"]",
                   "--set", f"data.val_files={prepared}/val.bin", "--set", "train.max_steps=1"]
    p = subprocess.run([binary, "train", "--config", config, "--run-dir", os.path.join(work, "two_vocabularies"),
                        *two_folders], capture_output=True, text=True, timeout=120)
    lines = p.stderr.strip().splitlines()
    checks.check(p.returncode == 2 and len(lines) == 1 and "different vocabularies" in lines[0] and
                 f"{prepared}/vocab.json" in lines[0] and f"{digits}/vocab.json" in lines[0],
                 f"shards of two prepared datasets of other vocabularies: refused naming both (exit {p.returncode}: "
                 f"{lines})")
    p = subprocess.run([binary, "train", "--config", config, "--run-dir", os.path.join(work, "one_vocabulary"),
                        *two_folders, "--set", f"data.vocab_file={prepared}/vocab.json"], capture_output=True,
                       text=True, timeout=120)
    same = subprocess.run([binary, "train", "--config", config, "--run-dir", os.path.join(work, "one_folder"), "--set",
                           f"data.train_files={prepared}/train.bin", "--set", f"data.val_files={prepared}/val.bin",
                           "--set", "train.max_steps=1"], capture_output=True, text=True, timeout=120)
    checks.check(p.returncode == 0 and same.returncode == 0,
                 f"... named with data.vocab_file, and one folder's splits, train ({p.stderr.strip()[-200:]}; "
                 f"{same.stderr.strip()[-200:]})")
    # On 2 ranks, a data error every rank meets alike is the job's: one line, not one a rank.
    for what, sets in [("a missing validation file", ["--set", f"data.val_files={work}/no_such_val.bin"]),
                       ("a validation token outside the vocabulary",
                        ["--set", f"data.val_files={work}/bad_val.bin", "--set", "data.order=sequential"])]:
        p = subprocess.run(launcher + ["-np", "2", binary, "train", "--config", config, "--run-dir",
                                       os.path.join(work, "refused_2"), *data_sets, *sets],
                           capture_output=True, text=True, timeout=120)
        errors = [line for line in p.stderr.splitlines() if line.startswith("zerotrain: error:")]
        checks.check(p.returncode != 0 and len(errors) == 1 and "rank" not in errors[0],
                     f"2 ranks: {what} is one line for the job (exit {p.returncode}: {errors})")
    # ... and so is the memory check's refusal (each rank measures its own offer).
    p = subprocess.run(launcher + ["-x", "ZT_TEST_AVAILABLE_BYTES", "-np", "2", binary, "train", "--config", config,
                                   "--run-dir", os.path.join(work, "refused_3"), *data_sets],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "ZT_TEST_AVAILABLE_BYTES": "1000"})
    errors = [line for line in p.stderr.splitlines() if line.startswith("zerotrain: error:")]
    checks.check(p.returncode == 2 and len(errors) == 1 and "ZT_TEST_AVAILABLE_BYTES offers: 1000 B" in errors[0],
                 f"2 ranks: a run that does not fit is one line for the job (exit {p.returncode}: {errors})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
