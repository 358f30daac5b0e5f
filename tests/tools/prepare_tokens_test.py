#!/usr/bin/env python3
"""tools/prepare_tokens.py's shards and folder against the tokenizers library and llm.c's format:

  * a document holding its tokenizer's delimiter as text ("<|endoftext|>") gets one delimiter, at
    its start: its own is encoded as text (llm.c's fineweb.py encodes with encode_ordinary), and its
    tokens decode back to the document;
  * a set whose globs would take another set's shards (NAME "d" beside "d_val", "data" beside
    "data_train") is refused in one line, every shard kept (preparing "data" after "data_train"
    deleted data_train's); sets whose globs do not overlap live side by side;
  * another tokenizer without a tokenizer_config.json replacing the folder's: the earlier one's
    config goes too (it stayed, and runs read their special tokens from it); the same tokenizer again
    keeps it;
  * a flag argparse refuses, and a JSONL text holding an unpaired surrogate (written as U+FFFD), are
    one line, exit 2.

usage: prepare_tokens_test.py   (under .venv-hf's python; skipped, exit 77, without tokenizers)
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
from hf_env import require_hf, train_byte_level_bpe  # noqa: E402

TOOL = os.path.join(ROOT, "tools", "prepare_tokens.py")
CORPUS = ["the quick brown fox jumps over the lazy dog", "pack my box with five dozen liquor jugs",
          "how vexingly quick daft zebras jump", "sphinx of black quartz, judge my vow"] * 8


def read_shard(path):
    """llm.c's shard: 256 int32 header (magic, version, count), then the tokens."""
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype=np.int32)
        tokens = np.frombuffer(f.read(), dtype=np.uint32 if header[0] == 20240801 else np.uint16)
    assert header[2] == len(tokens), f"{path}: header count {header[2]} for {len(tokens)} tokens"
    return tokens.tolist()


def main():
    require_hf("tokenizers")
    checks = Checks()
    check = checks.check
    work = checks.work_folder("zt_prepare_tokens_")
    tok = train_byte_level_bpe(CORPUS, 300)
    tok_a, tok_b = os.path.join(work, "a", "tokenizer.json"), os.path.join(work, "b", "tokenizer.json")
    os.makedirs(os.path.dirname(tok_a))
    os.makedirs(os.path.dirname(tok_b))
    tok.save(tok_a)
    with open(os.path.join(work, "a", "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>"}, f)
    other = json.loads(tok.to_str())  # another tokenizer: fewer merges, no config beside it
    other["model"]["merges"] = other["model"]["merges"][:10]
    with open(tok_b, "w") as f:
        json.dump(other, f)
    eot = tok.token_to_id("<|endoftext|>")

    def prepare(out, *args, tokenizer=tok_a):
        return subprocess.run([sys.executable, TOOL, "--tokenizer", tokenizer, "--out", out, "--no-progress",
                               "--shard-tokens", "40", *args], capture_output=True, text=True, timeout=120)

    def one_line(p):
        return [line for line in p.stderr.splitlines() if line.strip()]

    # The delimiter's text inside documents.
    docs = ["plain words first", "quoting <|endoftext|> inside a document", "<|endoftext|>", "last one"]
    jsonl = os.path.join(work, "docs.jsonl")
    with open(jsonl, "w") as f:
        f.writelines(json.dumps({"text": d}) + "\n" for d in docs)
    out = os.path.join(work, "shards")
    p = prepare(out, "--name", "set", jsonl)
    if check(p.returncode == 0, f"prepares ({p.stderr.strip()[-200:]})"):
        names = sorted(f for f in os.listdir(out) if f.endswith(".bin"))
        tokens = [t for name in [n for n in names if "_val_" in n] + [n for n in names if "_train_" in n]
                  for t in read_shard(os.path.join(out, name))]
        starts = [i for i, t in enumerate(tokens) if t == eot]
        pieces = [tokens[a + 1:b] for a, b in zip(starts, starts[1:] + [len(tokens)])]
        check(len(starts) == len(docs) and starts[0] == 0,
              f"one delimiter a document, at its start ({len(starts)} for {len(docs)} documents)")
        check([tok.decode(ids, skip_special_tokens=False) for ids in pieces] == docs,
              f"each document's tokens decode to it ({[tok.decode(ids) for ids in pieces]})")

    # Sets whose globs overlap, either way round; and two that do not.
    for first, second in (("data_train", "data"), ("d", "d_val")):
        folder = os.path.join(work, f"sets_{first}")
        q = prepare(folder, "--name", first, jsonl)
        before = sorted(os.listdir(folder))
        p = prepare(folder, "--name", second, jsonl)
        lines = one_line(p)
        check(q.returncode == 0 and p.returncode == 2 and len(lines) == 1 and f"set {first}" in lines[0]
              and sorted(os.listdir(folder)) == before,
              f"--name {second} beside set {first}: refused in one line, the folder as it was ({lines})")
    folder = os.path.join(work, "sets_apart")
    q, p = prepare(folder, "--name", "train_a", jsonl), prepare(folder, "--name", "train_b", jsonl)
    sets = {f.split("_val_")[0].split("_train_")[0] for f in os.listdir(folder) if f.endswith(".bin")}
    check(q.returncode == 0 and p.returncode == 0 and sets == {"train_a", "train_b"},
          f"sets train_a and train_b side by side ({sorted(sets)}; {p.stderr.strip()[-200:]})")

    # The folder's tokenizer replaced: the earlier one's tokenizer_config.json with it.
    folder = os.path.join(work, "retokenized")
    config = os.path.join(folder, "tokenizer_config.json")
    p = prepare(folder, jsonl)
    kept = p.returncode == 0 and os.path.exists(config)
    p = prepare(folder, jsonl)  # the same tokenizer again: its config stays
    check(kept and p.returncode == 0 and os.path.exists(config), "the same tokenizer again keeps its config")
    p = prepare(folder, jsonl, tokenizer=tok_b)
    check(p.returncode == 0 and not os.path.exists(config),
          f"another tokenizer without a config removes the earlier one's ({p.stderr.strip()[-200:]})")

    # Bad input in one line.
    surrogate = os.path.join(work, "surrogate.jsonl")
    with open(surrogate, "w") as f:
        f.write('{"text": "fine"}\n{"text": "ab\\ud800cd"}\n')
    for what, args, named in (("--shard-tokens abc", ["--shard-tokens", "abc", jsonl], "--shard-tokens"),
                              ("an unpaired surrogate", [surrogate], "surrogate.jsonl:2")):
        p = prepare(os.path.join(work, "bad"), *args)
        lines = one_line(p)
        check(p.returncode == 2 and len(lines) == 1 and named in lines[0] and not os.path.exists(os.path.join(work, "bad")),
              f"{what}: one line, exit 2, no folder ({lines})")
    # A training run's directory or a model folder as --out: their tokenizer would be replaced.
    for what, files, said in (("a run's directory", {"metrics.jsonl": "", "tokenizer.json": "the run's"},
                               "is a training run's directory (it holds metrics.jsonl)"),
                              ("a model folder", {"config.json": "{}", "model.safetensors": "",
                                                  "tokenizer.json": "its own", "tokenizer_config.json": "{}"},
                               "is a model folder (config.json beside model.safetensors)")):
        theirs = os.path.join(work, "theirs_" + what.split()[1].strip("'s"))
        os.makedirs(theirs)
        for name, text in files.items():
            with open(os.path.join(theirs, name), "w") as f:
                f.write(text)
        p = prepare(theirs, jsonl)
        lines = one_line(p)
        kept = sorted(os.listdir(theirs)) == sorted(files) and all(
            open(os.path.join(theirs, n)).read() == t for n, t in files.items())
        check(p.returncode == 2 and len(lines) == 1 and said in lines[0] and kept,
              f"--out {what}: one line, exit 2, its files untouched ({lines})")
    p = subprocess.run([sys.executable, TOOL, "--out", os.path.join(work, "bad"), jsonl], capture_output=True,
                       text=True, timeout=60)
    lines = one_line(p)
    check(p.returncode == 2 and len(lines) == 1 and "--tokenizer" in lines[0],
          f"no --tokenizer: one line, exit 2 ({lines})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
