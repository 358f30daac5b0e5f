#!/usr/bin/env python3
"""Multiple-choice evaluation (data.choice_file, llm.c's eval file format as HellaSwag's) end to
end through the real binary, on tinyshakespeare prepared by character:

  * 40 examples cut from the validation split (a context, its true continuation and three spans
    from elsewhere), written as llm.c's write_evalfile lays them out; a run scores them at each
    evaluation (the eval records and the summary carry the accuracy, the run prints it), and the
    trained model prefers the true continuations above chance;
  * the run's last score is Hugging Face transformers' on the checkpoint's export: each completion's
    mean cross-entropy given its context, the lowest the answer, counted against the labels;
  * `zerotrain eval --choices` gives that score from the run's final weights, its checkpoint and the
    export, and `--tokens` the loss transformers computes on windows of the validation split; under
    mpirun (2 and 3 ranks, rows and windows split unevenly) rank 0 alone prints the same score and
    the same loss, ranks given different files are refused in one line, and a file only one rank
    cannot read ends every rank at once, naming that rank;
  * in deterministic mode with a fixed global batch, 2 ranks at stage 3 and 3 ranks at stage 2
    (rows split unevenly, padding forwards) score exactly as 1 rank at its first evaluation (they
    train that far);
  * a file whose longest example passes model.block_size, and a damaged file, are refused before
    training in one line naming data.choice_file's file.

usage: choice_eval_test.py MPIRUN [MPIRUN FLAGS...] -- PATH/TO/zerotrain   (run with .venv-hf's python)
"""
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402
from shared_corpus import require_tiny_shakespeare  # noqa: E402
from choice_file_util import write_choice_file  # noqa: E402
from run_dir_util import train_records  # noqa: E402

from hf_env import require_hf  # noqa: E402

require_hf()
import torch  # noqa: E402
import transformers  # noqa: E402

TEXT = require_tiny_shakespeare()  # exits 77 (skipped) where the shared corpus is absent


def main():
    split = sys.argv.index("--")
    launcher, binary = sys.argv[1:split], sys.argv[split + 1]
    checks = Checks()
    check = checks.check
    work = checks.work_folder("zt_choice_")
    data = os.path.join(work, "data")
    p = subprocess.run([binary, "prepare", "--text", TEXT, "--out", data], capture_output=True, text=True, timeout=300)
    if not check(p.returncode == 0, f"prepare tinyshakespeare ({p.stderr.strip()[-300:]})"):
        return checks.finish()
    with open(os.path.join(data, "val.bin"), "rb") as f:
        f.read(1024)
        val = np.frombuffer(f.read(), dtype=np.uint16).astype(int).tolist()
    rng = random.Random(7)
    examples = []
    for _ in range(40):
        at = rng.randrange(0, len(val) - 64)
        c_len, e_len = rng.randrange(16, 25), rng.randrange(6, 13)
        context, truth = val[at:at + c_len], val[at + c_len:at + c_len + e_len]
        completions = []
        for _ in range(3):
            other = rng.randrange(0, len(val) - 16)
            completions.append(val[other:other + rng.randrange(6, 13)])
        label = rng.randrange(4)
        completions.insert(label, truth)
        examples.append((label, context, completions))
    choices = os.path.join(work, "choices.bin")
    write_choice_file(choices, examples)

    config = os.path.join(work, "config.json")
    with open(config, "w") as f:
        json.dump({"model": {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 64, "vocab_size": 128},
                   "data": {"dataset": data, "choice_file": choices},
                   "train": {"micro_batch": 8, "global_batch_tokens": 8 * 64 * 6, "max_steps": 150, "eval_every": 75,
                             "eval_batches": 2, "num_threads": 1, "deterministic": True},
                   # decay_steps as max_steps: the rank-count runs below stop at the first evaluation.
                   "optim": {"lr": 3e-3, "warmup_steps": 5, "decay_steps": 150},
                   "checkpoint": {"at_end": True},
                   "log": {"sample_tokens": 0, "progress": "plain"}}, f)

    def train(name, ranks, stage, extra=()):
        run_dir = os.path.join(work, name)
        p = subprocess.run(launcher + ["-np", str(ranks), binary, "train", "--config", config, "--run-dir", run_dir,
                                       "--set", f"zero.stage={stage}", *extra], capture_output=True, text=True,
                           timeout=600)
        check(p.returncode == 0, f"{name}: {ranks} rank(s) at stage {stage} train ({(p.stdout + p.stderr)[-300:]})")
        evals = [r for r in train_records(run_dir) if r["type"] == "eval"] if p.returncode == 0 else []
        return run_dir, p.stdout, evals

    run_dir, stdout, evals = train("n1", 1, 0)
    scores = [(r["step"], r.get("choice_correct"), r.get("choice_examples")) for r in evals]
    check([s for s, _, _ in scores] == [75, 150] and all(n == 40 and c is not None for _, c, n in scores),
          f"each evaluation scores the 40 examples ({scores})")
    if len(scores) != 2:
        return checks.finish()
    final = scores[-1][1]
    summary = train_records(run_dir)[-1]
    check(summary["type"] == "summary" and summary["choice_accuracy"] == final / 40 and
          summary.get("choice_correct") == final and summary.get("choice_examples") == 40 and
          f"multiple choice ({choices}): {final}/40" in stdout,
          f"the summary record and the printout carry the last score ({summary.get('choice_accuracy')})")
    # By chance 10 of 40; 16 or more by chance has probability 2%.
    check(final >= 16, f"the trained model prefers the true continuations above chance (at least 16 of 40): {final}")

    # transformers on the export: the same score.
    hf = os.path.join(work, "hf")
    p = subprocess.run([binary, "ckpt", "export", os.path.join(run_dir, "checkpoints"), "--format", "hf", "--out", hf],
                       capture_output=True, text=True, timeout=300)
    if check(p.returncode == 0, f"the checkpoint exports ({p.stderr.strip()[-300:]})"):
        model = transformers.AutoModelForCausalLM.from_pretrained(hf).eval()
        correct, margins = 0, []
        with torch.no_grad():
            for label, context, completions in examples:
                means = []
                for c in completions:
                    seq = torch.tensor([context + c])
                    logp = torch.log_softmax(model(seq[:, :-1]).logits.double(), dim=-1)[0]
                    targets = seq[0, 1:]
                    token_loss = -logp[torch.arange(len(targets)), targets]
                    means.append(token_loss[len(context) - 1:].mean().item())
                best = min(range(len(means)), key=lambda k: means[k])
                margins.append(sorted(means)[1] - sorted(means)[0])
                correct += best == label
        check(correct == final, f"transformers scores the export {correct}/40, zerotrain {final}/40 "
                                f"(smallest margin between two completions {min(margins):.2e})")

    # `zerotrain eval` on the saved weights: the run's last score from each source.
    for flags in (["--run", run_dir], ["--ckpt", os.path.join(run_dir, "checkpoints")], ["--from", hf]):
        p = subprocess.run([binary, "eval", *flags, "--choices", choices, "--batch-tokens", "100"],
                           capture_output=True, text=True, timeout=300)
        check(p.returncode == 0 and f"{choices}: {final}/40 correct" in p.stdout,
              f"zerotrain eval {flags[0]} scores {final}/40 ({p.stdout.strip()} {p.stderr.strip()[-300:]})")
    p = subprocess.run([binary, "eval", "--run", run_dir], capture_output=True, text=True, timeout=60)
    check(p.returncode == 2 and "--choices" in p.stderr, f"zerotrain eval without a file: exit 2 ({p.stderr.strip()})")
    # ... and the loss on a token file: 7 windows of 48 tokens back to back from val.bin's start, in
    # forwards of 3 windows (the last reads 1), as transformers computes it on the export.
    val_bin = os.path.join(data, "val.bin")
    p = subprocess.run([binary, "eval", "--from", hf, "--tokens", val_bin, "--seq-len", "48", "--windows", "7",
                        "--batch-tokens", "144"], capture_output=True, text=True, timeout=300)
    ours = float(p.stdout.split("loss ")[1].split()[0]) if p.returncode == 0 and "loss " in p.stdout else None
    with torch.no_grad():
        x = torch.tensor([val[48 * w:48 * w + 48] for w in range(7)])
        y = torch.tensor([val[48 * w + 1:48 * w + 49] for w in range(7)])
        logits = model(x).logits.double()
        reference = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item()
    check(ours is not None and abs(ours - reference) <= 1e-5 * reference,
          f"zerotrain eval --tokens: loss {ours} = transformers' {reference:.6f} ({p.stdout.strip()} {p.stderr.strip()[-200:]})")

    # The same from several ranks, each scoring its share.
    for ranks in (2, 3):
        p = subprocess.run(launcher + ["-np", str(ranks), binary, "eval", "--from", hf, "--choices", choices,
                                       "--tokens", val_bin, "--seq-len", "48", "--windows", "7", "--batch-tokens", "100"],
                           capture_output=True, text=True, timeout=300)
        theirs = float(p.stdout.split(": loss ")[1].split()[0]) if p.returncode == 0 and ": loss " in p.stdout else None
        check(p.returncode == 0 and p.stdout.count(f"{choices}: {final}/40 correct") == 1 and
              p.stdout.count(": loss ") == 1 and None not in (theirs, ours) and abs(theirs - ours) <= 2e-6 * ours,
              f"zerotrain eval on {ranks} ranks: rank 0 prints {final}/40 and loss {ours} once "
              f"({p.stdout.strip()} {p.stderr.strip()[-300:]})")
    p = subprocess.run(launcher + ["-np", "1", binary, "eval", "--from", hf, "--choices", choices, ":",
                                   "-np", "1", binary, "eval", "--from", hf, "--tokens", val_bin],
                       capture_output=True, text=True, timeout=120)
    lines = [line for line in p.stderr.splitlines() if "disagree" in line]
    check(p.returncode != 0 and lines and "command line" in lines[0],
          f"ranks given different arguments: refused naming the command line (exit {p.returncode}: {lines[:1]})")
    # A file only one rank cannot read: every rank ends at once naming that rank's error, rather
    # than the others waiting in a collective until its timeout.
    started = time.monotonic()
    p = subprocess.run(launcher + ["-np", "1", binary, "eval", "--from", hf, "--choices", choices, ":",
                                   "-np", "1", binary, "eval", "--from", hf, "--choices", choices + ".missing"],
                       capture_output=True, text=True, timeout=120)
    lines = [line for line in p.stderr.splitlines() if "rank 1:" in line and ".missing" in line]
    check(p.returncode != 0 and len(lines) == 1 and time.monotonic() - started < 60,
          f"one rank's missing file: both ranks refuse, the job in one line naming rank 1 ({time.monotonic() - started:.0f} s, "
          f"exit {p.returncode}: {p.stderr.strip()[-400:]})")

    # eval --ckpt of a live run's folder (a save every step, keep_last 1) on 2 ranks: rank 0 chooses
    # the checkpoint for both (each chose its own, and ranks that read different ones were refused
    # as disagreeing: about 1 call in 25).
    live_run = os.path.join(work, "live")
    live = subprocess.Popen([binary, "train", "--config", config, "--run-dir", live_run, "--set",
                             "train.max_steps=1000000", "--set", "checkpoint.every_steps=1", "--set",
                             "checkpoint.keep_last=1", "--set", "train.eval_every=0", "--set", "data.choice_file="],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and not os.path.exists(os.path.join(live_run, "checkpoints", "latest")):
        time.sleep(0.1)
    failed = []
    for _ in range(20):
        p = subprocess.run(launcher + ["-np", "2", binary, "eval", "--ckpt", os.path.join(live_run, "checkpoints"),
                                       "--choices", choices], capture_output=True, text=True, timeout=120)
        if p.returncode != 0 or p.stdout.count(" correct = ") != 1:
            failed.append(p.stderr.strip()[-200:])
    live.kill()
    live.wait()
    check(not failed, f"eval --ckpt of a live folder on 2 ranks: every call scores once ({len(failed)} failed: "
                      f"{failed[:1]})")

    # A token past the vocabulary in both ranks' windows (7 windows of 49 tokens: rank 0's first,
    # rank 1's fifth): the job's one line names the first in the file, not a line a rank.
    bad_val = os.path.join(work, "bad_val.bin")
    shutil.copy(val_bin, bad_val)
    with open(bad_val, "r+b") as f:
        for position in (2, 4 * 48 + 2):
            f.seek(1024 + 2 * position)
            f.write(struct.pack("<H", 500))
    p = subprocess.run(launcher + ["-np", "2", binary, "eval", "--from", hf, "--tokens", bad_val, "--seq-len", "48",
                                   "--windows", "7"], capture_output=True, text=True, timeout=120)
    lines = [line for line in p.stderr.splitlines() if line.startswith("zerotrain: error:")]
    check(p.returncode != 0 and len(lines) == 1 and "token 500 at position 2" in lines[0],
          f"bad tokens in both ranks' windows: one line naming the first (exit {p.returncode}: {lines})")

    # Through the first evaluation only (half the steps: these two runs were half the test's time);
    # the schedule is the 150-step run's (optim.decay_steps).
    first = scores[:1]
    for name, ranks, stage in (("n2_s3", 2, 3), ("n3_s2", 3, 2)):
        _, _, other = train(name, ranks, stage, ["--set", f"train.max_steps={first[0][0]}"])
        theirs = [(r["step"], r.get("choice_correct"), r.get("choice_examples")) for r in other]
        check(theirs == first, f"{name}: {ranks} ranks score as one at the evaluation of step {first[0][0]} "
                               f"({theirs} vs {first})")

    # Refused before training, in one line.
    for what, extra in (("its longest example passes model.block_size", ["--set", "model.block_size=32"]),
                        ("a damaged file", ["--set", f"data.choice_file={os.path.join(work, 'bad.bin')}"])):
        with open(os.path.join(work, "bad.bin"), "wb") as f:
            f.write(struct.pack("<256i", 20240520, 1, 3, *([0] * 253)))
        bad_dir = os.path.join(work, "bad_run")
        p = subprocess.run([binary, "train", "--config", config, "--run-dir", bad_dir, *extra], capture_output=True,
                           text=True, timeout=120)
        lines = [line for line in p.stderr.splitlines() if line.strip()]
        check(p.returncode == 2 and len(lines) == 1 and ("choice_file" in lines[0] or "bad.bin" in lines[0]) and
              not os.path.exists(os.path.join(bad_dir, "metrics.jsonl")),
              f"{what}: refused before training in one line (exit {p.returncode}: {lines})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
