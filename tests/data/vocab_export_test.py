#!/usr/bin/env python3
"""A character- and a byte-level run (`zerotrain prepare`, its own vocab.json, no tokenizer) exported
to Hugging Face carry their vocabulary as a tokenizer.json:

  * AutoTokenizer loads the export and numbers a text (multi-byte characters included) as the
    run's vocab.json does, and decodes the ids back to the text;
  * transformers' model from the export, greedy, continues a prompt; AutoTokenizer decodes it to
    text (the ids were all it had);
  * `zerotrain sample --from` the export prints the same text as `sample --run` (it printed ids).

usage: vocab_export_test.py ZEROTRAIN   (under .venv-hf's python; skipped, exit 77, without it)
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402
from hf_env import require_hf  # noqa: E402

TEXT = ("Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich. 中文字符 and plain words, "
        "the quick brown fox jumps over the lazy dog; numbers 0123456789.\n") * 40
CONFIG = {
    "model": {"n_layer": 1, "n_head": 2, "n_embd": 32, "block_size": 32},
    "train": {"micro_batch": 4, "max_steps": 6, "eval_batches": 1, "num_threads": 1},
    "optim": {"lr": 3e-3, "warmup_steps": 1, "decay_steps": 6},
    "checkpoint": {"at_end": True},
    "log": {"sample_tokens": 8, "progress": "plain"},
}


def vocab_ids(vocab_path, text):
    """The ids of `text` by a zerotrain vocab.json (its docs: char tokens in id order, or bytes)."""
    with open(vocab_path) as f:
        vocab = json.load(f)
    if vocab["kind"] == "byte":
        return list(text.encode("utf-8"))
    index = {c: i for i, c in enumerate(vocab["tokens"])}
    return [index[c] for c in text]


def main():
    require_hf("torch", "transformers", "tokenizers")
    import torch
    import transformers

    zerotrain = sys.argv[1]
    checks = Checks()
    check = checks.check
    work = checks.work_folder("zt_vocab_export_")
    text_path = os.path.join(work, "text.txt")
    with open(text_path, "w", encoding="utf-8") as f:
        f.write(TEXT)

    def run(*args):
        return subprocess.run([zerotrain, *args], capture_output=True, encoding="utf-8", errors="replace", timeout=300)

    # A Llama from a transformers folder whose config numbers Llama 2's <s> and </s> (1 and 2).
    llama_init = os.path.join(work, "llama_init")
    transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=32, bos_token_id=1, eos_token_id=2)).save_pretrained(llama_init)
    cases = (("char", "gpt2", {}), ("byte", "gpt2", {}), ("char", "llama", {"arch": "llama", "n_kv_head": 1}),
             ("char", "llama from transformers", {"init_from": llama_init}))
    for level, arch, model_keys in cases:
        name = f"{level}, {arch}"
        data = os.path.join(work, f"data_{level}")
        p = run("prepare", "--text", text_path, "--out", data, "--level", level)
        if not check(p.returncode == 0, f"{name}: prepare exits 0 ({p.stderr.strip()[-200:]})"):
            continue
        config = json.loads(json.dumps(CONFIG))
        config["data"] = {"dataset": data}
        config["model"]["vocab_size"] = 256 if level == "byte" else 64
        config["model"].update({k: v for k, v in model_keys.items() if k != "init_from"})
        if "init_from" in model_keys:
            config["model"] = {}
            config["train"]["init_from"] = model_keys["init_from"]
        config_path = os.path.join(work, f"{level}_{len(arch)}.json")
        with open(config_path, "w") as f:
            json.dump(config, f)
        run_dir = os.path.join(work, f"run_{level}_{len(arch)}")
        p = run("train", "--config", config_path, "--run-dir", run_dir)
        if not check(p.returncode == 0, f"{name}: train exits 0 ({p.stderr.strip()[-300:]})"):
            continue
        out = os.path.join(work, f"hf_{level}_{len(arch)}")
        p = run("ckpt", "export", os.path.join(run_dir, "checkpoints"), "--format", "hf", "--out", out)
        check(p.returncode == 0 and os.path.exists(os.path.join(out, "tokenizer.json")),
              f"{name}: the export writes tokenizer.json ({p.stdout.strip()} {p.stderr.strip()[-200:]})")

        with open(os.path.join(out, "config.json")) as f:
            hf = json.load(f)
        # transformers' defaults (GPT-2's 50256, Llama's 1 and 2) or train.init_from's ids would be
        # ordinary characters here, at which generate stops.
        check(hf.get("bos_token_id", "absent") is None and hf.get("eos_token_id", "absent") is None,
              f"{name}: config.json numbers no bos or eos ({hf.get('bos_token_id', 'absent')}, "
              f"{hf.get('eos_token_id', 'absent')})")
        tokenizer = transformers.AutoTokenizer.from_pretrained(out)
        probe = "Zwölf Boxkämpfer über 中文 the fox.\n"
        want = vocab_ids(os.path.join(run_dir, "vocab.json"), probe)
        got = tokenizer(probe)["input_ids"]
        check(got == want, f"{name}: AutoTokenizer numbers a text as the run's vocab.json ({got[:12]} vs {want[:12]})")
        check(tokenizer.decode(want) == probe, f"{name}: AutoTokenizer decodes the ids to the text "
                                               f"({tokenizer.decode(want)!r})")

        model = transformers.AutoModelForCausalLM.from_pretrained(out)
        inputs = tokenizer("the ", return_tensors="pt")
        with torch.no_grad():  # the usual call: the tokenizer's whole output into generate
            ids = model.generate(**inputs, max_new_tokens=20, do_sample=False, pad_token_id=0)[0].tolist()
        continued = tokenizer.decode(ids)
        check(continued.startswith("the ") and len(ids) == inputs["input_ids"].shape[1] + 20,
              f"{name}: transformers' generate(**tokenizer(text)) makes its 20 tokens, decoded to text "
              f"({continued!r})")

        from_export = run("sample", "--from", out, "--tokens", "20", "--prompt", "the ")
        from_run = run("sample", "--run", run_dir, "--tokens", "20", "--prompt", "the ")
        check(from_export.returncode == 0 and from_export.stdout == from_run.stdout
              and "printing token ids" not in from_export.stderr,
              f"{name}: sample --from the export prints the run's text ({from_export.stdout!r} vs "
              f"{from_run.stdout!r}; {from_export.stderr.strip()[-200:]})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
