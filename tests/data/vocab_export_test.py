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
import tempfile

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
    work = tempfile.mkdtemp(prefix="zt_vocab_export_")
    text_path = os.path.join(work, "text.txt")
    with open(text_path, "w", encoding="utf-8") as f:
        f.write(TEXT)

    def run(*args):
        return subprocess.run([zerotrain, *args], capture_output=True, encoding="utf-8", errors="replace", timeout=300)

    for level in ("char", "byte"):
        data = os.path.join(work, f"data_{level}")
        p = run("prepare", "--text", text_path, "--out", data, "--level", level)
        if not check(p.returncode == 0, f"{level}: prepare exits 0 ({p.stderr.strip()[-200:]})"):
            continue
        config = json.loads(json.dumps(CONFIG))
        config["data"] = {"dataset": data}
        config["model"]["vocab_size"] = 256 if level == "byte" else 64
        config_path = os.path.join(work, f"{level}.json")
        with open(config_path, "w") as f:
            json.dump(config, f)
        run_dir = os.path.join(work, f"run_{level}")
        p = run("train", "--config", config_path, "--run-dir", run_dir)
        if not check(p.returncode == 0, f"{level}: train exits 0 ({p.stderr.strip()[-300:]})"):
            continue
        out = os.path.join(work, f"hf_{level}")
        p = run("ckpt", "export", os.path.join(run_dir, "checkpoints"), "--format", "hf", "--out", out)
        check(p.returncode == 0 and os.path.exists(os.path.join(out, "tokenizer.json")),
              f"{level}: the export writes tokenizer.json ({p.stdout.strip()} {p.stderr.strip()[-200:]})")

        tokenizer = transformers.AutoTokenizer.from_pretrained(out)
        probe = "Zwölf Boxkämpfer über 中文 the fox.\n"
        want = vocab_ids(os.path.join(run_dir, "vocab.json"), probe)
        got = tokenizer(probe)["input_ids"]
        check(got == want, f"{level}: AutoTokenizer numbers a text as the run's vocab.json ({got[:12]} vs {want[:12]})")
        check(tokenizer.decode(want) == probe, f"{level}: AutoTokenizer decodes the ids to the text "
                                               f"({tokenizer.decode(want)!r})")

        model = transformers.AutoModelForCausalLM.from_pretrained(out)
        prompt = tokenizer("the ", return_tensors="pt")["input_ids"]
        with torch.no_grad():
            ids = model.generate(prompt, max_new_tokens=10, do_sample=False, pad_token_id=0)[0].tolist()
        continued = tokenizer.decode(ids)
        check(continued.startswith("the ") and len(ids) == prompt.shape[1] + 10,
              f"{level}: transformers' greedy continuation decodes to text ({continued!r})")

        from_export = run("sample", "--from", out, "--tokens", "20", "--prompt", "the ")
        from_run = run("sample", "--run", run_dir, "--tokens", "20", "--prompt", "the ")
        check(from_export.returncode == 0 and from_export.stdout == from_run.stdout
              and "printing token ids" not in from_export.stderr,
              f"{level}: sample --from the export prints the run's text ({from_export.stdout!r} vs "
              f"{from_run.stdout!r}; {from_export.stderr.strip()[-200:]})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
