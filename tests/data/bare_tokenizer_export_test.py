#!/usr/bin/env python3
"""A Llama trained on shards of a tokenizer.json that came alone (the `tokenizers` library's save:
no tokenizer_config.json), exported to Hugging Face: the export writes a tokenizer_config.json
naming the generic fast tokenizer and the document delimiters config.json numbers. Without it,
AutoTokenizer took the model type's LlamaTokenizerFast, whose default <s> and </s> this byte-level
BPE lacks, added them as new ids past the model's vocabulary, and generate failed with an index
error. Here AutoTokenizer adds no token, starts a text with the template's <|begin_of_text|> (as
`zerotrain sample` prompts and tools/prepare_tokens.py starts documents), and generate runs.

usage: bare_tokenizer_export_test.py PATH/TO/zerotrain   (run with .venv-hf's python)
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402
from shared_corpus import require_tiny_shakespeare  # noqa: E402
from hf_env import require_hf  # noqa: E402

require_hf("torch", "transformers", "tokenizers")
import torch  # noqa: E402
import transformers  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402

TEXT = require_tiny_shakespeare()  # exits 77 (skipped) where the shared corpus is absent


def llama_style_tokenizer(docs):
    """A byte-level BPE with Llama 3's delimiters and a template that puts the BOS before a text."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(docs, trainers.BpeTrainer(vocab_size=300, show_progress=False,
                                                      special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                       special_tokens=[("<|begin_of_text|>", bos)])
    return tok


def main():
    binary = sys.argv[1]
    checks = Checks()
    check = checks.check
    work = checks.work_folder("zt_bare_tok_")
    with open(TEXT, encoding="utf-8") as f:
        docs = [d for d in f.read().split("\n\n") if d.strip()][:400]
    tok = llama_style_tokenizer(docs)
    tok_path = os.path.join(work, "tokenizer.json")
    tok.save(tok_path)
    jsonl = os.path.join(work, "docs.jsonl")
    with open(jsonl, "w") as f:
        for d in docs:
            f.write(json.dumps({"text": d}) + "\n")
    shards = os.path.join(work, "shards")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "prepare_tokens.py"), "--tokenizer", tok_path,
                        "--out", shards, "--name", "s", "--shard-tokens", "20000", "--no-progress", jsonl],
                       capture_output=True, text=True, timeout=300)
    if not check(p.returncode == 0 and not os.path.exists(os.path.join(shards, "tokenizer_config.json")),
                 f"prepare_tokens writes shards and the tokenizer.json alone ({p.stderr.strip()[-300:]})"):
        return checks.finish()
    run_dir = os.path.join(work, "run")
    vocab = tok.get_vocab_size()
    p = subprocess.run([binary, "train", "--config", os.path.join(ROOT, "configs", "llama_tiny_debug.json"),
                        "--run-dir", run_dir, "--set", f"model.vocab_size={vocab}", "--set",
                        f"data.train_files={shards}/s_train_*.bin", "--set", f"data.val_files={shards}/s_val_*.bin",
                        "--set", "train.max_steps=2", "--set", "train.num_threads=1", "--set", "train.eval_batches=1",
                        "--set", "checkpoint.at_end=true", "--set", "log.sample_tokens=0"],
                       capture_output=True, text=True, timeout=300)
    if not check(p.returncode == 0, f"a Llama trains on the shards ({p.stderr.strip()[-300:]})"):
        return checks.finish()
    hf = os.path.join(work, "hf")
    p = subprocess.run([binary, "ckpt", "export", os.path.join(run_dir, "checkpoints"), "--format", "hf", "--out", hf],
                       capture_output=True, text=True, timeout=300)
    cfg_path = os.path.join(hf, "tokenizer_config.json")
    if not check(p.returncode == 0 and os.path.exists(cfg_path),
                 f"the export writes a tokenizer_config.json beside the run's tokenizer.json ({p.stdout} {p.stderr})"):
        return checks.finish()
    with open(cfg_path) as f:
        tok_config = json.load(f)
    with open(os.path.join(hf, "config.json")) as f:
        config = json.load(f)
    bos, eos = tok.token_to_id("<|begin_of_text|>"), tok.token_to_id("<|end_of_text|>")
    check(tok_config.get("tokenizer_class") == "PreTrainedTokenizerFast" and
          tok_config.get("bos_token") == "<|begin_of_text|>" and tok_config.get("eos_token") == "<|end_of_text|>" and
          config.get("bos_token_id") == bos and config.get("eos_token_id") == eos,
          f"it names the generic fast tokenizer and the delimiters config.json numbers ({tok_config}; "
          f"{config.get('bos_token_id')}, {config.get('eos_token_id')})")
    hf_tok = transformers.AutoTokenizer.from_pretrained(hf)
    ids = hf_tok("ROMEO: But soft").input_ids
    check(len(hf_tok) == vocab and ids[0] == bos and max(ids) < vocab and hf_tok.bos_token_id == bos and
          hf_tok.eos_token_id == eos,
          f"AutoTokenizer adds no token and starts a text with <|begin_of_text|> ({len(hf_tok)} tokens of {vocab}, "
          f"{ids[:6]}, bos {hf_tok.bos_token_id}, eos {hf_tok.eos_token_id})")
    model = transformers.AutoModelForCausalLM.from_pretrained(hf).eval()
    with torch.no_grad():
        out = model.generate(**hf_tok("ROMEO:", return_tensors="pt"), max_new_tokens=4, do_sample=False)
    check(out.shape[1] == len(hf_tok("ROMEO:").input_ids) + 4, f"generate runs on the export ({out.tolist()})")
    # A run whose tokenizer came with its own config keeps it as it was.
    own = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|begin_of_text|>", "model_max_length": 99}
    with open(os.path.join(run_dir, "tokenizer_config.json"), "w") as f:
        json.dump(own, f)
    hf_own = os.path.join(work, "hf_own")
    p = subprocess.run([binary, "ckpt", "export", os.path.join(run_dir, "checkpoints"), "--format", "hf", "--out",
                        hf_own], capture_output=True, text=True, timeout=300)
    # ... but for the inputs a causal LM takes (the generic fast class returns token_type_ids too,
    # which generate(**tokenizer(text)) refused); one naming its own keeps them.
    with open(os.path.join(hf_own, "tokenizer_config.json")) as f:
        copied = json.load(f)
    check(p.returncode == 0 and copied == {**own, "model_input_names": ["input_ids", "attention_mask"]},
          f"a run's own tokenizer_config.json is copied as it is, with the model's inputs ({copied})")
    named = {**own, "model_input_names": ["input_ids"]}
    with open(os.path.join(run_dir, "tokenizer_config.json"), "w") as f:
        json.dump(named, f)
    p = subprocess.run([binary, "ckpt", "export", os.path.join(run_dir, "checkpoints"), "--format", "hf", "--out",
                        hf_own], capture_output=True, text=True, timeout=300)
    with open(os.path.join(hf_own, "tokenizer_config.json")) as f:
        check(p.returncode == 0 and json.load(f) == named, "one naming its inputs keeps them")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
