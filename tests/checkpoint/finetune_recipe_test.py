#!/usr/bin/env python3
"""The README's fine-tuning recipe (configs/gpt2_finetune_shakespeare.json), run on a small model
made here instead of the downloaded GPT-2 124M: a GPT2LMHeadModel that transformers creates and
save_pretrained's with a byte-level BPE tokenizer trained by the library beside it (the files a
Hugging Face download has), tools/prepare_tokens.py on tinyshakespeare with that tokenizer, then
the recipe's train command (its config, with the paths and sizes set for the small model), sample
and export. The fine-tuned export, loaded by transformers, has a lower loss on the validation
shard than the model it started from.

usage: finetune_recipe_test.py -- PATH/TO/zerotrain   (run with .venv-hf's python)
"""
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402
from recipe_steps import export_hf, prepare_tokens, sample, validation_tokens  # noqa: E402
from shared_corpus import require_tiny_shakespeare  # noqa: E402
from run_dir_util import train_records  # noqa: E402

from hf_env import require_hf, train_byte_level_bpe  # noqa: E402

require_hf()
import torch  # noqa: E402
import transformers  # noqa: E402

T = 32


def val_loss(model, tokens):
    windows = [tokens[i:i + T + 1] for i in range(0, 64 * T, T)]
    x = torch.tensor(np.stack([w[:-1] for w in windows]).astype(np.int64))
    y = torch.tensor(np.stack([w[1:] for w in windows]).astype(np.int64))
    with torch.no_grad():
        logits = model.eval()(x).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item()


def main():
    corpus = require_tiny_shakespeare()  # exits 77 (skipped) where the shared corpus is absent
    binary = sys.argv[sys.argv.index("--") + 1]
    checks = Checks()
    work = checks.work_folder("zt_recipe_")
    gpt2 = os.path.join(work, "gpt2")  # stands in for the downloaded folder
    with open(corpus, encoding="utf-8") as f:
        text = f.read()
    tok = train_byte_level_bpe([text[i:i + 5000] for i in range(0, len(text), 5000)], 512)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=512, n_positions=64, n_embd=64, n_layer=2,
                                                                 n_head=2))
    model.save_pretrained(gpt2)
    tok.save(os.path.join(gpt2, "tokenizer.json"))

    # The README's steps, from the project's root.
    data = os.path.join(work, "shakespeare_gpt2")
    p = prepare_tokens(f"{gpt2}/tokenizer.json", data)
    if not checks.check(p.returncode == 0, f"prepare_tokens with the model's tokenizer ({p.stderr[-300:]})"):
        return checks.finish()
    run_dir = os.path.join(work, "run")

    def train(steps, *flags):
        return subprocess.run([binary, "train", "--config", "configs/gpt2_finetune_shakespeare.json", "--run-dir",
                               run_dir, "--set", f"train.init_from={gpt2}",
                               "--set", f"data.train_files={data}/shakespeare_train_*.bin",
                               "--set", f"data.val_files={data}/shakespeare_val_*.bin",
                               "--set", f"train.seq_len={T}", "--set", f"train.max_steps={steps}",
                               "--set", "train.eval_every=20", "--set", "optim.lr=1e-3", "--set", "log.sample_tokens=16",
                               "--set", "log.progress=plain", "--set", "train.num_threads=1", *flags],
                              capture_output=True, text=True, timeout=600, cwd=ROOT)

    p = train(40)
    if not checks.check(p.returncode == 0, f"the recipe's train command runs ({(p.stdout + p.stderr)[-500:]})"):
        return checks.finish()
    checks.check("weights from" in p.stdout and "GPT2LMHeadModel" not in p.stderr,
                 "the run starts from the folder's weights")
    recs = train_records(run_dir)
    evals = [r["val_loss"] for r in recs if r["type"] == "eval"]
    checks.check(len(evals) >= 2 and evals[-1] < evals[0], f"the validation loss falls ({evals})")
    p = sample(binary, run_dir, 20)
    checks.check(p.returncode == 0 and p.stdout.startswith("ROMEO:"), f"sample continues the prompt ({p.stdout[:60]!r})")
    out = os.path.join(work, "gpt2_shakespeare")
    p = export_hf(binary, run_dir, out)
    if checks.check(p.returncode == 0, f"the run exports ({p.stderr[-300:]})"):
        tuned = transformers.AutoModelForCausalLM.from_pretrained(out)
        val = validation_tokens(data)
        before, after = val_loss(model, val), val_loss(tuned, val)
        checks.check(after < before - 0.5 and transformers.AutoTokenizer.from_pretrained(out) is not None,
                     f"transformers loads the export, and it fits the validation text better ({before:.3f} -> {after:.3f})")

    # The pretrained folder gone (cleaned up, or another machine): the run's own files suffice to
    # sample from it and to train it for longer (at a constant LR, not a change to allow).
    os.rename(gpt2, gpt2 + "_moved")
    p = sample(binary, run_dir, 8)
    checks.check(p.returncode == 0 and p.stdout.startswith("ROMEO:"),
                 f"sample --run without the pretrained folder ({p.stderr[-300:]})")
    # eval's windows: the run's train.seq_len (32, under the model's 64 positions) from the run and
    # from its checkpoint alike, so both give the same loss.
    evals = [subprocess.run([binary, "eval", *source, "--tokens", f"{data}/shakespeare_val_*.bin", "--windows", "4"],
                            capture_output=True, text=True, timeout=120).stdout.strip()
             for source in (["--run", run_dir], ["--ckpt", os.path.join(run_dir, "checkpoints")])]
    checks.check(evals[0] == evals[1] and f"windows of {T} tokens" in evals[0],
                 f"eval --run and --ckpt read windows of the run's seq_len ({evals})")
    p = train(44, "--resume", "latest")
    summary = train_records(run_dir)[-1]
    checks.check(p.returncode == 0 and summary["first_step"] == 41 and summary["last_step"] == 44,
                 f"the run trains on to step 44 without the pretrained folder ({summary}, {p.stderr[-300:]})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
