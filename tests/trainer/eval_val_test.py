#!/usr/bin/env python3
"""`zerotrain eval --val`: a run's validation loss from its saved weights, as its evaluations make it
(train.eval_batches batches of train.micro_batch windows of its validation data, drawn as its
data.order draws them), end to end through the real binary:

  * a deterministic run's logged val_loss, bit for bit (as float32): from its final weights
    (--run), from a checkpoint of an earlier step (--ckpt) at that step's record, with data.order
    random (the default, whose windows `eval --tokens` cannot read) and sequential;
  * a 2-rank stage-3 bf16 run's, from its checkpoint, by 1 process and by 2 ranks under mpirun;
  * a run with bf16 activations, in them (--dtype's default with --val), and in fp32 with a note;
  * a run without train.deterministic: within rounding of its record (its products split by the
    library, eval's in fixed blocks);
  * refused in one line: --val with --from (no run's data), for a run whose data is gone,
    naming the data key, from another directory than a run's relative data paths start in,
    saying so, and where the validation file is no longer the one the run evaluated (a dataset
    prepared again), from --run and --ckpt alike; --batch-tokens with --val alone;
  * --val reads the validation split alone: the training file gone, the same loss;
  * `--tokens` says how much of the file it scored, and in which activations where --val made
    them the run's; `ckpt export`'s default fp32 of a bf16-parameter run, and `sample` of a
    bf16-activation run in fp32, say they are not what the run computed with.

usage: eval_val_test.py MPIRUN [MPIRUN FLAGS...] -- PATH/TO/zerotrain
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402
from run_dir_util import copy_run_with, train_records  # noqa: E402

CONFIG = os.path.join(ROOT, "configs", "tiny_debug.json")
PRINTED = re.compile(r"validation \(the run's evaluation: (\d+) batch(?:es)? of (\d+) windows? of (\d+) tokens, "
                     r"data\.order (\w+)\): val_loss (\S+)")


def run(argv, timeout=300):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, OMP_WAIT_POLICY="passive"))


def printed_loss(p):
    """The printed val_loss as float32, None where none was printed."""
    m = PRINTED.search(p.stdout)
    return np.float32(float(m.group(5))) if p.returncode == 0 and m else None


def logged(run_dir, step):
    """The run's eval record of `step`, as float32."""
    found = [r["val_loss"] for r in train_records(run_dir) if r.get("type") == "eval" and r["step"] == step]
    return np.float32(found[-1]) if found else None


def main():
    split = sys.argv.index("--")
    launcher, binary = sys.argv[1:split], sys.argv[split + 1]
    checks = Checks()
    check = checks.check
    work = checks.work_folder("zt_eval_val_")
    common = ["--set", "train.max_steps=4", "--set", "train.eval_every=2", "--set", "train.eval_batches=3",
              "--set", "checkpoint.every_steps=2", "--set", "log.sample_tokens=0"]

    for order in ("random", "sequential"):
        run_dir = os.path.join(work, f"det_{order}")
        p = run([binary, "train", "--config", CONFIG, "--run-dir", run_dir, *common, "--set",
                 "train.deterministic=true", "--set", f"data.order=\"{order}\""])
        if not check(p.returncode == 0, f"a deterministic run, data.order {order} ({p.stderr.strip()[-300:]})"):
            return checks.finish()
        final = run([binary, "eval", "--run", run_dir, "--val"])
        m = PRINTED.search(final.stdout)
        check(printed_loss(final) is not None and printed_loss(final) == logged(run_dir, 4) and m.group(1) == "3"
              and m.group(4) == order,
              f"data.order {order}: --run --val is the run's last logged val_loss bit for bit "
              f"({final.stdout.strip()} vs {logged(run_dir, 4)}; {final.stderr.strip()[-200:]})")
        step2 = run([binary, "eval", "--ckpt", os.path.join(run_dir, "checkpoints", "step_00000002"), "--val"])
        check(printed_loss(step2) is not None and printed_loss(step2) == logged(run_dir, 2),
              f"data.order {order}: --ckpt step 2 --val is step 2's logged val_loss ({step2.stdout.strip()} vs "
              f"{logged(run_dir, 2)}; {step2.stderr.strip()[-200:]})")

    # A run whose micro-batch it derived (global_batch_tokens and grad_accum given): --run reads the
    # micro-batch the run ran (it read the default 4, so other windows, of 16 here).
    derived = os.path.join(work, "derived_micro")
    p = run([binary, "train", "--config", CONFIG, "--run-dir", derived, *common, "--set", "train.deterministic=true",
             "--set", "train={\"micro_batch\": null, \"grad_accum\": 2, \"global_batch_tokens\": 512}"])
    final = run([binary, "eval", "--run", derived, "--val"])
    m = PRINTED.search(final.stdout)
    check(p.returncode == 0 and printed_loss(final) is not None and printed_loss(final) == logged(derived, 4)
          and m.group(2) == "16", f"a derived micro-batch: --run --val is the logged val_loss, in its windows "
          f"({final.stdout.strip()} vs {logged(derived, 4)}; {p.stderr.strip()[-200:]})")

    # A config.json that no longer describes the model final.safetensors was trained as (edited, or a
    # later run's): refused naming the key (another head count computed another model in silence).
    edited = copy_run_with(run_dir, os.path.join(work, "edited_config"), "model", "n_head", 1)
    for command in (["eval", "--run", edited, "--val"], ["sample", "--run", edited, "--tokens", "2"]):
        p = run([binary, *command])
        lines = p.stderr.strip().splitlines()
        check(p.returncode == 2 and len(lines) == 1 and "says model.n_head = 1, but its final.safetensors was "
              "trained with 2" in lines[0], f"{command[0]} --run of an edited config.json: refused ({lines})")
    # final.safetensors' data identity with a fingerprint past 32 bits (an edit): refused naming the
    # file, as a checkpoint's is (it was printed cut to 32 bits).
    forged = copy_run_with(run_dir, os.path.join(work, "forged_identity"), "model", "n_head", 2)
    weights = os.path.join(forged, "final.safetensors")
    with open(weights, "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        data = f.read()
    identity = json.loads(header["__metadata__"]["data_identity"])
    identity.append({"path": "x.bin", "bytes": 9, "fingerprint": (1 << 32) + 5})
    header["__metadata__"]["data_identity"] = json.dumps(identity)
    text = json.dumps(header).encode()
    with open(weights, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
    p = run([binary, "eval", "--run", forged, "--val"])
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 2 and len(lines) == 1 and "final.safetensors: its data_identity is" in lines[0],
          f"eval --run of a forged data identity in final.safetensors: refused ({lines})")

    # 2 ranks at stage 3 with bf16 parameters: its checkpoint's validation loss from 1 process and
    # from 2 ranks (each scoring its share of the batches).
    sharded = os.path.join(work, "sharded")
    p = run([*launcher, "-np", "2", binary, "train", "--config", CONFIG, "--run-dir", sharded, *common, "--set",
             "train.deterministic=true", "--set", "zero.stage=3", "--set", "precision.param_dtype=bf16"], timeout=600)
    if check(p.returncode == 0, f"a 2-rank stage-3 bf16 run ({p.stderr.strip()[-300:]})"):
        ckpt = os.path.join(sharded, "checkpoints")
        one = run([binary, "eval", "--ckpt", ckpt, "--val"])
        two = run([*launcher, "-np", "2", binary, "eval", "--ckpt", ckpt, "--val"], timeout=600)
        check(printed_loss(one) is not None and printed_loss(one) == logged(sharded, 4),
              f"2 ranks at stage 3, bf16: --ckpt --val is its logged val_loss ({one.stdout.strip()} vs "
              f"{logged(sharded, 4)}; {one.stderr.strip()[-200:]})")
        check(printed_loss(two) is not None and printed_loss(two) == printed_loss(one) and
              len(PRINTED.findall(two.stdout)) == 1,
              f"... and under mpirun -np 2 the same, printed once ({two.stdout.strip()}; {two.stderr.strip()[-200:]})")
        # The folder named: which checkpoint was scored, said once (nothing named the step).
        said = f"zerotrain eval: --ckpt {ckpt}: {os.path.join(ckpt, 'step_00000004')} (after step 4)"
        check(said in one.stderr and two.stderr.count(said) == 1,
              f"--ckpt of a folder says which checkpoint it scored ({one.stderr.strip()[-200:]})")
        # Its default export holds the fp32 masters, not the bf16 weights it computed with: said.
        out32, out16 = os.path.join(work, "sharded_hf32"), os.path.join(work, "sharded_hf16")
        e32 = run([binary, "ckpt", "export", ckpt, "--format", "hf", "--out", out32])
        e16 = run([binary, "ckpt", "export", ckpt, "--format", "hf", "--out", out16, "--dtype", "bf16"])
        check(e32.returncode == 0 and "--dtype bf16 exports the weights it computed with" in e32.stderr and
              e16.returncode == 0 and "bf16 working weights" not in e16.stderr,
              f"a bf16-parameter run's fp32 export says it holds the masters, its bf16 export does not "
              f"({e32.stderr.strip()[-300:]}; {e16.stderr.strip()[-200:]})")

    # int8 gathers (zero.gather_dtype) act on several ranks, not on one rank's solo path: a 1-rank
    # stage-1 run's --val is its logged val_loss, without the note (which said it differed), and a
    # 2-rank one's checkpoint is noted.
    int8 = ["--set", "train.deterministic=true", "--set", "zero.stage=1", "--set", "zero.gather_dtype=int8"]
    solo = os.path.join(work, "int8_solo")
    p = run([binary, "train", "--config", CONFIG, "--run-dir", solo, *common, *int8])
    if check(p.returncode == 0, f"a 1-rank run with int8 gathers ({p.stderr.strip()[-300:]})"):
        for flag, where in (("--run", solo), ("--ckpt", os.path.join(solo, "checkpoints"))):
            e = run([binary, "eval", flag, where, "--val"])
            check(printed_loss(e) == logged(solo, 4) and "int8-decoded" not in e.stderr,
                  f"int8 gathers on one rank's solo path: {flag} --val is the logged val_loss, no note "
                  f"({e.stdout.strip()} vs {logged(solo, 4)}; {e.stderr.strip()[-200:]})")
    pair = os.path.join(work, "int8_pair")
    p = run([*launcher, "-np", "2", binary, "train", "--config", CONFIG, "--run-dir", pair, *common, *int8],
            timeout=600)
    if check(p.returncode == 0, f"a 2-rank run with int8 gathers ({p.stderr.strip()[-300:]})"):
        for flag, where in (("--run", pair), ("--ckpt", os.path.join(pair, "checkpoints"))):
            e = run([binary, "eval", flag, where, "--val"])
            check(e.returncode == 0 and "int8-decoded weights (zero.gather_dtype)" in e.stderr,
                  f"int8 gathers on 2 ranks: {flag} --val notes them ({e.stderr.strip()[-300:]})")

    # bf16 activations: --val computes in them unless --dtype says otherwise (then said in a note).
    bf16 = os.path.join(work, "bf16_activations")
    p = run([binary, "train", "--config", CONFIG, "--run-dir", bf16, *common, "--set", "train.deterministic=true",
             "--set", "precision.activations=bf16"])
    if check(p.returncode == 0, f"a deterministic run with bf16 activations ({p.stderr.strip()[-300:]})"):
        e = run([binary, "eval", "--run", bf16, "--val"])
        check(printed_loss(e) is not None and printed_loss(e) == logged(bf16, 4) and "--val on" not in e.stderr,
              f"bf16 activations: --val in the run's dtype is its logged val_loss bit for bit ({e.stdout.strip()} vs "
              f"{logged(bf16, 4)}; {e.stderr.strip()[-200:]})")
        f32 = run([binary, "eval", "--run", bf16, "--val", "--dtype", "f32"])
        check(f32.returncode == 0 and "its activations were bf16" in f32.stderr,
              f"... --dtype f32 scores in fp32 and says the run's were bf16 ({f32.stderr.strip()[-300:]})")
        s32 = run([binary, "sample", "--run", bf16, "--tokens", "4"])
        s16 = run([binary, "sample", "--run", bf16, "--tokens", "4", "--dtype", "bf16"])
        check(s32.returncode == 0 and "--dtype bf16 samples as the run did" in s32.stderr and
              s16.returncode == 0 and "bf16 activations" not in s16.stderr,
              f"... sample in fp32 (its default) says the run's were bf16, with --dtype bf16 nothing "
              f"({s32.stderr.strip()[-300:]}; {s16.stderr.strip()[-200:]})")

    # Without train.deterministic the run's products split as the library does, eval's in fixed
    # blocks: the same loss within rounding.
    loose = os.path.join(work, "loose")
    p = run([binary, "train", "--config", CONFIG, "--run-dir", loose, *common])
    if check(p.returncode == 0, f"a run without train.deterministic ({p.stderr.strip()[-300:]})"):
        e = run([binary, "eval", "--run", loose, "--val"])
        got, want = printed_loss(e), logged(loose, 4)
        check(got is not None and abs(float(got) - float(want)) <= 1e-5 * abs(float(want)),
              f"not deterministic: --val within 1e-5 of the logged val_loss ({got} vs {want})")

    # Refusals: pretrained weights have no run's data; a run's data that is gone is named.
    hf = os.path.join(work, "hf")
    p = run([binary, "ckpt", "export", os.path.join(loose, "checkpoints"), "--format", "hf", "--out", hf])
    e = run([binary, "eval", "--from", hf, "--val"])
    check(p.returncode == 0 and e.returncode == 2 and len(e.stderr.strip().splitlines()) == 1 and
          "--val scores a run's validation data: give its --run or --ckpt" in e.stderr,
          f"--val with --from: refused in one line ({e.stderr.strip()})")
    prepared = os.path.join(work, "prepared")
    text = os.path.join(work, "text.txt")
    with open(text, "w") as f:
        f.write("the quick brown fox jumps over the lazy dog. " * 400)
    p = run([binary, "prepare", "--text", text, "--out", prepared])
    moved = os.path.join(work, "moved")
    p2 = run([binary, "train", "--config", CONFIG, "--run-dir", moved, "--set", f"data.dataset={prepared}", "--set",
              "model.vocab_size=65", *common])
    if check(p.returncode == 0 and p2.returncode == 0, f"a run on a prepared folder ({p2.stderr.strip()[-300:]})"):
        val = os.path.join(prepared, "val.bin")
        tokens = run([binary, "eval", "--run", moved, "--tokens", val, "--windows", "2"])
        check(tokens.returncode == 0 and
              re.search(r"over 2 windows of \d+ tokens: \d+ of its \d+ tokens scored \(\d+ windows fit", tokens.stdout),
              f"--tokens says how much of the file it scored ({tokens.stdout.strip()}; {tokens.stderr.strip()[-200:]})")
        # More windows than the file holds: as many as fit, no window read twice (the windows that
        # fit are counted as sequential ones, which --tokens reads).
        fit = re.search(r"\((\d+) windows fit", tokens.stdout)
        many = run([binary, "eval", "--run", moved, "--tokens", val, "--windows", "100000"])
        at_fit = run([binary, "eval", "--run", moved, "--tokens", val, "--windows", fit.group(1) if fit else "1"])
        check(fit and many.returncode == 0 and f"over {fit.group(1)} windows of " in many.stdout and
              many.stdout == at_fit.stdout,
              f"--windows past the file's is cut to the windows that fit ({many.stdout.strip()}; "
              f"{at_fit.stdout.strip()})")
        both = run([binary, "eval", "--run", moved, "--val", "--batch-tokens", "64"])
        check(both.returncode == 2 and "--batch-tokens is read only with --tokens or --choices" in both.stderr,
              f"--batch-tokens with --val alone: refused, as its other --tokens flags are ({both.stderr.strip()})")
        # Only the validation split is read: with train.bin gone (evaluated on another machine) the
        # same loss.
        whole = run([binary, "eval", "--run", moved, "--val"])
        os.remove(os.path.join(prepared, "train.bin"))
        alone = run([binary, "eval", "--run", moved, "--val"])
        check(printed_loss(whole) is not None and printed_loss(alone) == printed_loss(whole),
              f"--val without the training file: the same val_loss ({whole.stdout.strip()}; {alone.stdout.strip()}; "
              f"{alone.stderr.strip()[-300:]})")
        # Prepared again with another split: val.bin at the same path is other data, refused by
        # --run (its final weights record the files) and --ckpt (its manifest does).
        again = run([binary, "prepare", "--text", text, "--out", prepared, "--val-fraction", "0.3"])
        for flag, where in (("--run", moved), ("--ckpt", os.path.join(moved, "checkpoints"))):
            e = run([binary, "eval", flag, where, "--val"])
            # --run's line names the other cause: a later run's config.json beside these weights.
            check(again.returncode == 0 and e.returncode == 2 and len(e.stderr.strip().splitlines()) == 1 and
                  "the validation data are not the files the run evaluated: data file " + val in e.stderr and
                  ("--ckpt of a checkpoint pairs the two" in e.stderr) == (flag == "--run"),
                  f"{flag} --val after the dataset was prepared again: refused in one line naming val.bin "
                  f"({e.stdout.strip()}; {e.stderr.strip()})")
        # Weights an earlier build wrote record no data identity: scored, with a note that the files
        # are not checked (an upgrade trial's changed val.bin was scored unsaid).
        unrecorded = os.path.join(work, "unrecorded")
        shutil.copytree(moved, unrecorded)
        weights = os.path.join(unrecorded, "final.safetensors")
        with open(weights, "rb") as f:
            header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
            data = f.read()
        del header["__metadata__"]["data_identity"]
        header_text = json.dumps(header).encode()
        with open(weights, "wb") as f:
            f.write(struct.pack("<Q", len(header_text)) + header_text + data)
        e = run([binary, "eval", "--run", unrecorded, "--val"])
        check(e.returncode == 0 and "its weights record no identity of the validation files" in e.stderr,
              f"--run --val of weights recording no data identity: scored, with a note ({e.stderr.strip()[-300:]})")
        # Shards (data.train_files) and a named vocabulary: with the training folder and the
        # vocabulary gone, --val reads the validation shard alone, the same loss.
        shards_a, shards_b = os.path.join(work, "shards_a"), os.path.join(work, "shards_b")
        os.makedirs(shards_a)
        os.makedirs(shards_b)
        shutil.copy(os.path.join(prepared, "train.bin"), os.path.join(shards_a, "s0.bin"))
        shutil.copy(os.path.join(prepared, "val.bin"), os.path.join(shards_b, "v0.bin"))
        vocab = os.path.join(work, "vocab.json")
        shutil.copy(os.path.join(prepared, "vocab.json"), vocab)
        sharded_run = os.path.join(work, "sharded_files")
        p3 = run([binary, "train", "--config", CONFIG, "--run-dir", sharded_run, "--set", "model.vocab_size=65",
                  "--set", f"data.train_files=[\"{shards_a}/*.bin\"]", "--set", f"data.val_files=[\"{shards_b}/*.bin\"]",
                  "--set", f"data.vocab_file={vocab}", *common])
        if check(p3.returncode == 0, f"a run on shards with a named vocabulary ({p3.stderr.strip()[-300:]})"):
            whole = run([binary, "eval", "--run", sharded_run, "--val"])
            shutil.rmtree(shards_a)
            os.remove(vocab)
            alone = run([binary, "eval", "--run", sharded_run, "--val"])
            check(printed_loss(whole) is not None and printed_loss(alone) == printed_loss(whole),
                  f"--val of a shard run without its training folder and vocabulary: the same val_loss "
                  f"({whole.stdout.strip()}; {alone.stdout.strip()}; {alone.stderr.strip()[-300:]})")
        shutil.rmtree(prepared)
        e = run([binary, "eval", "--run", moved, "--val"])
        check(e.returncode == 2 and len(e.stderr.strip().splitlines()) == 1 and "data.dataset" in e.stderr,
              f"--val of a run whose data is gone: one line naming data.dataset ({e.stderr.strip()})")
    # A run's relative data paths are read from where it started: from elsewhere the refusal says so.
    rel_data = os.path.join(work, "rel")
    os.makedirs(rel_data)
    p = subprocess.run([binary, "prepare", "--text", text, "--out", "data"], cwd=rel_data, capture_output=True,
                       text=True, timeout=300)
    p2 = subprocess.run([binary, "train", "--config", CONFIG, "--run-dir", "run", "--set", "data.dataset=data",
                         "--set", "model.vocab_size=65", *common], cwd=rel_data, capture_output=True, text=True,
                        timeout=300)
    if check(p.returncode == 0 and p2.returncode == 0, f"a run on a relative data path ({p2.stderr.strip()[-300:]})"):
        here = subprocess.run([binary, "eval", "--run", "run", "--val"], cwd=rel_data, capture_output=True, text=True,
                              timeout=300)
        elsewhere = run([binary, "eval", "--run", os.path.join(rel_data, "run"), "--val"])
        check(printed_loss(here) is not None and elsewhere.returncode == 2 and
              "relative to the directory it started in" in elsewhere.stderr,
              f"relative data paths: --val from the run's start directory, and a refusal elsewhere that says why "
              f"({here.stdout.strip()}; {elsewhere.stderr.strip()[-250:]})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
