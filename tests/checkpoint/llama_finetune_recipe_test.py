#!/usr/bin/env python3
"""The README's Llama 3.2 fine-tuning recipe (configs/llama3_2_1b_finetune_shakespeare.json), run on
the CPU on a small model made here in place of the downloaded Llama-3.2-1B folder: what such a
folder holds -- a LlamaForCausalLM (transformers' random init, tied head, RoPE base 500000) whose
config.json carries Llama 3.2's llama3 rope_scaling, its 131072-position context and its
special tokens' ids, and a byte-level BPE tokenizer with Llama 3's pre-tokenizer pattern and
<|begin_of_text|> / <|end_of_text|> -- then the recipe's commands: tools/prepare_tokens.py on
tinyshakespeare, the train command (its config; ZeRO stage 3 on 2 ranks, bf16; paths and sizes
set for the small model), sample and export. The export keeps the scaling and numbers the
tokenizer's special tokens, and the parity tests' plain-PyTorch Llama (float64) on the exported
weights fits the validation text better than on the starting ones. (transformers 4.40 here
predates rope_type llama3, so the reference is the plain-PyTorch Llama.)

usage: llama_finetune_recipe_test.py MPIRUN [MPIRUN FLAGS...] -- PATH/TO/zerotrain  (.venv-hf's python)
"""
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "parity"))
from check_report import Checks  # noqa: E402
from recipe_steps import export_hf, prepare_tokens, sample, validation_tokens  # noqa: E402
from shared_corpus import require_tiny_shakespeare  # noqa: E402
from run_dir_util import train_records  # noqa: E402

from hf_env import require_hf  # noqa: E402

require_hf()
import llama_reference  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402

T = 32
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")
ROPE_SCALING = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192}


def make_folder(folder, text):
    """A Llama 3.2-like Hugging Face folder: config.json, model.safetensors, tokenizer files."""
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([text[i:i + 5000] for i in range(0, len(text), 5000)],
                            trainers.BpeTrainer(vocab_size=512, special_tokens=["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"],
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                show_progress=False))
    bos = tok.token_to_id("<|begin_of_text|>")  # Llama 3's template: <|begin_of_text|> before a sequence
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, rope_theta=500000.0,
        rms_norm_eps=1e-5, tie_word_embeddings=True))
    model.save_pretrained(folder, safe_serialization=True)
    with open(os.path.join(folder, "config.json")) as f:
        hf = json.load(f)
    # What Llama 3.2's config.json has that transformers 4.40 cannot write (it refuses llama3 scaling).
    hf.update({"rope_scaling": ROPE_SCALING, "max_position_embeddings": 131072,
               "bos_token_id": tok.token_to_id("<|begin_of_text|>"),
               # As Llama 3's instruct models list them: every token a turn may end with.
               "eos_token_id": [tok.token_to_id("<|end_of_text|>"), tok.token_to_id("<|eot_id|>")]})
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(hf, f)
    # generation_config.json as Llama 3.2's: the same ids (save_pretrained wrote LlamaConfig's
    # defaults there, which generate, and zerotrain's init_from, read before config.json's).
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": hf["bos_token_id"], "eos_token_id": hf["eos_token_id"],
                   "transformers_version": transformers.__version__}, f)
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|begin_of_text|>",
                   "eos_token": "<|end_of_text|>", "model_max_length": 131072}, f)
    return tok, {n: t.detach().double() for n, t in model.state_dict().items()}


def val_loss(params, config_text, tokens):
    """The float64 reference's mean loss over 64 consecutive windows of the validation tokens."""
    cfg = llama_reference.LlamaConfig.from_hf(config_text)
    windows = [tokens[i:i + T + 1] for i in range(0, 64 * T, T)]
    x = torch.tensor(np.stack([w[:-1] for w in windows]).astype(np.int64))
    y = torch.tensor(np.stack([w[1:] for w in windows]).astype(np.int64))
    with torch.no_grad():
        return llama_reference.forward(params, x, y, cfg)[1].item()


def main():
    corpus = require_tiny_shakespeare()  # exits 77 (skipped) where the shared corpus is absent
    split = sys.argv.index("--")
    launcher, binary = sys.argv[1:split], sys.argv[split + 1]
    checks = Checks()
    work = checks.work_folder("zt_llama_recipe_")
    folder = os.path.join(work, "Llama-3.2-1B")  # stands in for the downloaded folder
    with open(corpus, encoding="utf-8") as f:
        text = f.read()
    tok, start = make_folder(folder, text)
    with open(os.path.join(folder, "config.json")) as f:
        start_config = f.read()

    # The README's steps, from the project's root.
    data = os.path.join(work, "shakespeare_llama3")
    p = prepare_tokens(f"{folder}/tokenizer.json", data)
    if not checks.check(p.returncode == 0, f"prepare_tokens with the model's tokenizer ({p.stderr[-300:]})"):
        return checks.finish()
    bos = tok.token_to_id("<|begin_of_text|>")
    val = validation_tokens(data)
    checks.check(val[0] == bos and "documents start with <|begin_of_text|>" in p.stdout,
                 f"documents start with <|begin_of_text|> ({bos}), as Llama 3 and llm.c's Llama 3 files begin them "
                 f"(first token {val[0]}; {p.stdout.strip()[-160:]})")
    run_dir = os.path.join(work, "run")
    p = subprocess.run(launcher + ["-np", "2", binary, "train", "--config",
                                   "configs/llama3_2_1b_finetune_shakespeare.json", "--run-dir", run_dir,
                                   "--set", "device=cpu", "--set", f"train.init_from={folder}",
                                   "--set", f"data.train_files={data}/shakespeare_train_*.bin",
                                   "--set", f"data.val_files={data}/shakespeare_val_*.bin",
                                   "--set", f"train.seq_len={T}", "--set", "train.micro_batch=4",
                                   "--set", "train.max_steps=40", "--set", "train.eval_every=20",
                                   "--set", "optim.lr=1e-3", "--set", "optim.min_lr=1e-4", "--set", "optim.warmup_steps=0",
                                   "--set", "log.sample_tokens=16", "--set", "log.progress=plain",
                                   "--set", "train.num_threads=1"], capture_output=True, text=True, timeout=600,
                       cwd=ROOT)
    if not checks.check(p.returncode == 0, f"the recipe's train command runs ({(p.stdout + p.stderr)[-500:]})"):
        return checks.finish()
    checks.check("weights from" in p.stdout and "RoPE llama3-scaled x32 from 8192" in p.stdout
                 and "context 131072" in p.stdout,
                 "the run starts from the folder's weights, its scaling and its context")
    recs = train_records(run_dir)
    evals = [r["val_loss"] for r in recs if r["type"] == "eval"]
    checks.check(len(evals) >= 2 and evals[-1] < evals[0], f"the validation loss falls ({evals})")
    p = sample(binary, run_dir, 20)
    checks.check(p.returncode == 0 and p.stdout.startswith("ROMEO:") and len(p.stdout) > 10,
                 f"sample continues the prompt with the run's tokenizer ({p.stdout[:60]!r} {p.stderr[-200:]})")

    out = os.path.join(work, "llama_shakespeare")
    p = export_hf(binary, run_dir, out)
    if not checks.check(p.returncode == 0, f"the run exports ({p.stderr[-300:]})"):
        return checks.finish()
    with open(os.path.join(out, "config.json")) as f:
        out_config = f.read()
    hf = json.loads(out_config)
    checks.check(hf["rope_scaling"] == ROPE_SCALING and hf["max_position_embeddings"] == 131072
                 and hf["bos_token_id"] == tok.token_to_id("<|begin_of_text|>")
                 and hf["eos_token_id"] == [tok.token_to_id("<|end_of_text|>"), tok.token_to_id("<|eot_id|>")]
                 and hf["tie_word_embeddings"],
                 f"the export's config.json keeps the scaling, the context, the tie and the special tokens' ids, the "
                 f"source's list of end tokens (which holds the tokenizer's) over the tokenizer's one ({hf})")
    checks.check(all(os.path.exists(os.path.join(out, f)) for f in ("tokenizer.json", "tokenizer_config.json")),
                 "the export carries the tokenizer")
    # Its checkpoint is format version 2, which builds from before rope_scaling refuse instead of
    # exporting or sampling the model unscaled; this build read it for the export above.
    with open(os.path.join(run_dir, "checkpoints", "latest")) as f:
        latest = f.read().strip()
    with open(os.path.join(run_dir, "checkpoints", latest, "manifest.json")) as f:
        version = json.load(f)["format_version"]
    checks.check(version == 2, f"the scaled model's checkpoint is format version 2 ({version})")
    tuned = {n: t.double() for n, t in load_file(os.path.join(out, "model.safetensors")).items()}
    before, after = val_loss(start, start_config, val), val_loss(tuned, out_config, val)
    checks.check(after < before - 0.5, f"the exported weights fit the validation text better ({before:.3f} -> {after:.3f})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
