#!/usr/bin/env python3
"""A tokenizer from end to end: a byte-level BPE trained here with the `tokenizers` library on
tinyshakespeare (nothing downloaded), tools/prepare_tokens.py turning JSONL documents into llm.c
shards with it (EOT before each document, the first shard the validation split, the tokenizer
files beside them), 2 ranks training on the shards at ZeRO stage 3 with the tokenizer found beside
them (the run directory keeps a copy, the run's sample is text), `sample --run` encoding its
prompt and decoding with it (a hot sample's stray bytes printed as U+FFFD: standard output stays
UTF-8), and `ckpt export --format hf --max-shard-size` writing shards with an
index and the tokenizer, which AutoModelForCausalLM, AutoTokenizer and a text-generation pipeline
load, with logits equal to zerotrain's own export in one file. Shards of other tokenizers, or of a
tokenizer beside a character dataset's, are refused in one run; a preparation killed during its
renames marks its folder, which a run refuses until a preparation again completes it.

usage: tokenized_corpus_test.py MPIRUN [MPIRUN FLAGS...] -- PATH/TO/zerotrain   (run with .venv-hf's python)
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
from run_dir_util import train_records  # noqa: E402

from hf_env import require_hf, train_byte_level_bpe  # noqa: E402

require_hf()
import torch  # noqa: E402
import transformers  # noqa: E402

TEXT = require_tiny_shakespeare()  # exits 77 (skipped) where the shared corpus is absent


def main():
    split = sys.argv.index("--")
    launcher, binary = sys.argv[1:split], sys.argv[split + 1]
    checks = Checks()
    work = checks.work_folder("zt_tokenized_")
    with open(TEXT, encoding="utf-8") as f:
        text = f.read()
    docs = [d for d in text.split("\n\n") if d.strip()]

    tok_dir = os.path.join(work, "tokenizer")
    os.makedirs(tok_dir)
    tok = train_byte_level_bpe(docs, 512)
    tok.save(os.path.join(tok_dir, "tokenizer.json"))
    with open(os.path.join(tok_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>",
                   "bos_token": "<|endoftext|>", "model_max_length": 64}, f)
    jsonl = os.path.join(work, "docs.jsonl")
    with open(jsonl, "w") as f:
        for d in docs:
            f.write(json.dumps({"text": d}) + "\n")

    shards = os.path.join(work, "shards")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "prepare_tokens.py"), "--tokenizer",
                        os.path.join(tok_dir, "tokenizer.json"), "--out", shards, "--name", "shakespeare",
                        "--shard-tokens", "100000", "--no-progress", jsonl], capture_output=True, text=True,
                       timeout=600)
    if not checks.check(p.returncode == 0, f"prepare_tokens writes shards ({(p.stdout + p.stderr)[-400:]})"):
        return checks.finish()
    names = sorted(os.listdir(shards))
    checks.check(names[-2:] == ["tokenizer.json", "tokenizer_config.json"] and "shakespeare_val_000000.bin" in names and
                 "shakespeare_train_000001.bin" in names, f"val shard first, train shards after, tokenizer beside ({names})")
    with open(os.path.join(shards, "shakespeare_val_000000.bin"), "rb") as f:
        header = np.frombuffer(f.read(1024), dtype=np.int32)
        first = np.frombuffer(f.read(2 * 50), dtype=np.uint16)
    eot = tok.token_to_id("<|endoftext|>")
    expected = [t for d in docs[:10] for t in [eot] + tok.encode(d).ids][:50]
    checks.check(header[0] == 20240520 and header[1] == 1 and header[2] == 100000 and
                 [int(t) for t in first] == expected,
                 f"llm.c's uint16 header; each document after an EOT, as the library encodes it "
                 f"({[int(t) for t in first][:12]} vs {expected[:12]})")
    total = sum(int(np.fromfile(os.path.join(shards, n), dtype=np.int32, count=3)[2]) for n in names if n.endswith(".bin"))
    checks.check(total == sum(len(tok.encode(d).ids) + 1 for d in docs), f"every document's tokens are in the shards ({total})")

    config = os.path.join(work, "config.json")
    with open(config, "w") as f:
        json.dump({"model": {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 64, "vocab_size": 512},
                   "data": {"train_files": f"{shards}/shakespeare_train_*.bin",
                            "val_files": f"{shards}/shakespeare_val_*.bin"},
                   "train": {"micro_batch": 8, "max_steps": 60, "eval_batches": 2, "num_threads": 1},
                   "optim": {"lr": 3e-3, "warmup_steps": 5},
                   "zero": {"stage": 3}, "checkpoint": {"at_end": True},
                   "log": {"sample_tokens": 16, "sample_prompt": "ROMEO:", "progress": "plain"}}, f)
    run_dir = os.path.join(work, "run")
    p = subprocess.run(launcher + ["-np", "2", binary, "train", "--config", config, "--run-dir", run_dir],
                       capture_output=True, text=True, timeout=600)
    if not checks.check(p.returncode == 0, f"2 ranks train on the shards at stage 3 ({(p.stdout + p.stderr)[-400:]})"):
        return checks.finish()
    checks.check(all(os.path.exists(os.path.join(run_dir, f)) for f in ("tokenizer.json", "tokenizer_config.json")),
                 "the run directory keeps the tokenizer found beside the shards")
    sample = next((r["text"] for r in train_records(run_dir) if r["type"] == "sample"), "")
    checks.check(sample.startswith("") and any(c.isalpha() for c in sample) and
                 tok.decode(tok.encode(sample).ids) == sample, f"the run's sample is the tokenizer's text ({sample!r})")
    losses = [r["loss"] for r in train_records(run_dir) if r["type"] == "train"]
    checks.check(losses[-1] < losses[0] - 1.0, f"the loss falls ({losses[0]:.2f} -> {losses[-1]:.2f})")

    p = subprocess.run([binary, "sample", "--run", run_dir, "--prompt", "JULIET:", "--tokens", "12", "--top-k", "1"],
                       capture_output=True, text=True, timeout=120)
    checks.check(p.returncode == 0 and p.stdout.startswith("JULIET:") and len(p.stdout) > len("JULIET:") + 5,
                 f"sample --run encodes its prompt and decodes with the run's tokenizer ({p.stdout[:80]!r} {p.stderr[-200:]})")

    # Drawn hot from all 512 tokens, the byte tokens past 0x7f come that make no character: printed as
    # U+FFFD as they prove so (standard output stays UTF-8), as the metrics log and Python's decode
    # with errors="replace" give them.
    p = subprocess.run([binary, "sample", "--run", run_dir, "--tokens", "300", "--temperature", "3", "--top-k", "0"],
                       capture_output=True, timeout=120)
    try:
        printed, utf8 = p.stdout.decode("utf-8"), True
    except UnicodeDecodeError as e:
        printed, utf8 = str(e), False
    checks.check(p.returncode == 0 and utf8 and "\ufffd" in printed,
                 f"a sample of stray bytes prints as UTF-8 with U+FFFD ({printed[:80]!r})")

    p = subprocess.run(launcher + ["-np", "2", binary, "sample", "--run", run_dir, "--prompt", "JULIET:", "--tokens",
                                   "4", "--top-k", "1"], capture_output=True, text=True, timeout=120)
    checks.check(p.returncode == 0 and p.stdout.count("JULIET:") == 1,
                 f"sample under mpirun -np 2: rank 0 alone prints the sample ({p.stdout!r})")

    # A tokenizer whose template puts a token past the model's vocabulary before every prompt: refused
    # before the first step, naming the key (the run trained, then failed an internal check at its
    # first sample, or sampled from a padding row).
    with open(os.path.join(shards, "tokenizer.json")) as f:
        past = json.load(f)
    past["post_processor"] = {"type": "TemplateProcessing",
                              "single": [{"SpecialToken": {"id": "<x>", "type_id": 0}},
                                         {"Sequence": {"id": "A", "type_id": 0}}],
                              "pair": [], "special_tokens": {"<x>": {"id": "<x>", "ids": [600], "tokens": ["<x>"]}}}
    past_file = os.path.join(work, "template_past_vocab.json")
    with open(past_file, "w") as f:
        json.dump(past, f)
    run_past = os.path.join(work, "run_past")
    p = subprocess.run([binary, "train", "--config", config, "--run-dir", run_past, "--set", "zero.stage=0",
                        "--set", f"data.tokenizer_file={past_file}", "--set", "train.max_steps=3"],
                       capture_output=True, text=True, timeout=300)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    steps = [r for r in train_records(run_past) if r["type"] == "train"] if os.path.exists(os.path.join(run_past, "metrics.jsonl")) else []
    checks.check(p.returncode == 2 and len(lines) == 1 and "log.sample_prompt encodes to token 600" in lines[0]
                 and not steps, f"a prompt's template token past the vocabulary: refused before a step ({lines}, "
                 f"{len(steps)} steps)")

    ckpt = os.path.join(run_dir, "checkpoints")
    sharded, whole = os.path.join(work, "export_sharded"), os.path.join(work, "export_whole")
    p = subprocess.run([binary, "ckpt", "export", ckpt, "--format", "hf", "--out", sharded, "--max-shard-size",
                        "100KB"], capture_output=True, text=True, timeout=120)
    q = subprocess.run([binary, "ckpt", "export", ckpt, "--format", "hf", "--out", whole], capture_output=True,
                       text=True, timeout=120)
    if not checks.check(p.returncode == 0 and q.returncode == 0, f"the checkpoint exports ({p.stderr[-300:]})"):
        return checks.finish()
    files = sorted(os.listdir(sharded))
    shard_files = [f for f in files if f.startswith("model-")]
    with open(os.path.join(sharded, "model.safetensors.index.json")) as f:
        index = json.load(f)
    def shard_tensors(folder, name):
        """A safetensors file's tensors as (name, bytes), in the order the file holds their data."""
        with open(os.path.join(folder, name), "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
        header.pop("__metadata__", None)
        return [(k, v["data_offsets"][1] - v["data_offsets"][0])
                for k, v in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])]

    sizes = [[b for _, b in shard_tensors(sharded, f)] for f in shard_files]
    checks.check(len(shard_files) > 1 and sorted(set(index["weight_map"].values())) == shard_files and
                 "tokenizer.json" in files and "tokenizer_config.json" in files,
                 f"--max-shard-size 100KB: {len(shard_files)} shards, the index names them, the tokenizer copied ({files})")
    checks.check(all(sum(t) <= 100_000 or len(t) == 1 for t in sizes),
                 f"each shard holds at most 100 KB of tensors, or one larger tensor alone ({[sum(t) for t in sizes]})")
    flat = [n for t in sizes for n in t]  # the tensors' bytes in the order the shards hold them
    checks.check(all(sum(a) + b[0] > 100_000 for a, b in zip(sizes, sizes[1:])),
                 f"a shard is cut only where its next tensor would pass 100 KB ({[sum(t) for t in sizes]})")
    exact = os.path.join(work, "export_exact")
    p = subprocess.run([binary, "ckpt", "export", ckpt, "--format", "hf", "--out", exact, "--max-shard-size",
                        str(flat[0] + flat[1])], capture_output=True, text=True, timeout=120)
    held = []
    if p.returncode == 0:
        with open(os.path.join(exact, "model.safetensors.index.json")) as f:
            first = sorted(json.load(f)["weight_map"].values())[0]
        held = [k for k, _ in shard_tensors(exact, first)]
    checks.check(p.returncode == 0 and len(held) == 2,
                 f"--max-shard-size of exactly the first two tensors' bytes: the first shard holds both ({held})")
    model = transformers.AutoModelForCausalLM.from_pretrained(sharded)
    reference = transformers.AutoModelForCausalLM.from_pretrained(whole)
    hf_tok = transformers.AutoTokenizer.from_pretrained(sharded)
    ids = torch.tensor([hf_tok("ROMEO: What say you?")["input_ids"]])
    with torch.no_grad():
        same = torch.equal(model(ids).logits, reference(ids).logits)
    checks.check(same and hf_tok("ROMEO:")["input_ids"] == tok.encode("ROMEO:").ids,
                 "the sharded folder loads with AutoModelForCausalLM and AutoTokenizer; logits equal the one-file export's")
    generated = transformers.pipeline("text-generation", model=model, tokenizer=hf_tok)(
        "ROMEO:", max_new_tokens=8, do_sample=False)[0]["generated_text"]
    checks.check(isinstance(generated, str) and generated.startswith("ROMEO:") and len(generated) > 6,
                 f"a text-generation pipeline runs on it ({generated!r})")
    # The usual call, generate(**tokenizer(text)): the run's tokenizer_config.json (the generic fast
    # class, which returns token_type_ids) goes out naming the inputs a causal LM takes.
    with torch.no_grad():
        out = model.generate(**hf_tok("ROMEO:", return_tensors="pt"), max_new_tokens=4, do_sample=False)
    checks.check(out.shape[1] > len(hf_tok("ROMEO:")["input_ids"]),
                 f"generate(**tokenizer(text)) runs on the export ({out.tolist()})")
    # generate stops at the tokenizer's end of text, not at GPT2Config's default 50256 (out of this
    # 512-token vocabulary): config.json numbers the tokenizer's special tokens.
    end = tok.token_to_id("<|endoftext|>")
    checks.check(model.config.eos_token_id == end and model.config.bos_token_id == end
                 and model.generation_config.eos_token_id == end,
                 f"config.json's bos/eos ids are the tokenizer's <|endoftext|> ({end}): "
                 f"{model.config.bos_token_id}, {model.config.eos_token_id}, generate's "
                 f"{model.generation_config.eos_token_id}")

    # An empty prompt starts a document, as the shards' documents start: greedy from <|endoftext|>,
    # here a tokenizer's last id (as GPT-2's 50256) in a model whose first draw depends on it.
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    last = Tokenizer(models.BPE())
    last.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    last.decoder = decoders.ByteLevel()
    last.train_from_iterator(docs[:300], trainers.BpeTrainer(vocab_size=300, show_progress=False,
                                                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    last.add_special_tokens(["<|endoftext|>"])
    last_eot = last.token_to_id("<|endoftext|>")
    torch.manual_seed(1)
    sharp = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=last.get_vocab_size(), n_positions=32,
                                                                 n_embd=32, n_layer=1, n_head=2)).eval()
    with torch.no_grad():
        for param in sharp.parameters():
            param.mul_(30)  # sharp distributions: greedy draws that depend on the start
    sharp_dir = os.path.join(work, "sharp")
    sharp.save_pretrained(sharp_dir)
    last.save(os.path.join(sharp_dir, "tokenizer.json"))
    greedy = {}
    with torch.no_grad():
        for first in (0, last_eot):
            start = torch.tensor([[first]])
            greedy[first] = sharp.generate(start, attention_mask=torch.ones_like(start), max_new_tokens=6,
                                           do_sample=False, eos_token_id=None, pad_token_id=0)[0, 1:].tolist()
    p = subprocess.run([binary, "sample", "--from", sharp_dir, "--prompt", "", "--tokens", "6", "--top-k", "1"],
                       capture_output=True, timeout=120)

    def text_bytes(ids):  # the bytes a byte-level tokenizer's ids stand for (they need not be UTF-8)
        byte_of = {}  # GPT-2's map: printable bytes stand for themselves, the others for 256 + n
        shifted = 0
        for b in range(256):
            if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255:
                byte_of[chr(b)] = b
            else:
                byte_of[chr(256 + shifted)] = b
                shifted += 1
        return bytes(byte_of[c] for i in ids for c in last.id_to_token(i))

    def printed(ids):  # as standard output carries them: invalid UTF-8 as U+FFFD
        return text_bytes(ids).decode("utf-8", errors="replace").encode("utf-8")

    checks.check(greedy[0] != greedy[last_eot] and p.returncode == 0
                 and p.stdout.rstrip(b"\n") == printed(greedy[last_eot]),
                 f"sample --prompt '' continues <|endoftext|> (id {last_eot}) as transformers does, not id 0 "
                 f"({p.stdout!r} vs {printed(greedy[last_eot])!r}; from 0: {printed(greedy[0])!r})")
    # A tokenizer that is not the model's: a prompt id past the vocabulary is refused, not embedded.
    big = train_byte_level_bpe(docs[:300], 1000)
    big_path = os.path.join(work, "big_tokenizer.json")
    big.save(big_path)
    wide = docs[1][:100]
    p = subprocess.run([binary, "sample", "--run", run_dir, "--tokenizer", big_path, "--prompt", wide, "--tokens", "2"],
                       capture_output=True, text=True, timeout=120)
    lines = p.stderr.strip().splitlines()
    checks.check(max(big.encode(wide).ids) >= 512 and p.returncode == 2 and len(lines) == 1
                 and "outside the model's vocabulary of 512" in lines[0],
                 f"a prompt id past the model's vocabulary is refused in one line ({lines})")

    def refused_input(path, out="x"):
        """prepare_tokens on `path`: its stderr lines."""
        p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "prepare_tokens.py"), "--tokenizer",
                            os.path.join(tok_dir, "tokenizer.json"), "--out", os.path.join(work, out), "--no-progress",
                            path], capture_output=True, text=True, timeout=60)
        return p.returncode, p.stderr.strip().splitlines()

    code, lines = refused_input(os.path.join(work, "missing.jsonl"))
    checks.check(code != 0 and len(lines) == 1 and "missing.jsonl" in lines[0],
                 f"prepare_tokens refuses a missing input in one line ({lines})")
    fifo = os.path.join(work, "fifo.jsonl")
    os.mkfifo(fifo)
    code, lines = refused_input(fifo)
    checks.check(code != 0 and len(lines) == 1 and "fifo.jsonl: not a regular file" in lines[0],
                 f"prepare_tokens names a FIFO input as one, not as missing ({lines})")
    latin = os.path.join(work, "latin1.txt")
    with open(latin, "wb") as f:
        f.write("café au lait\n".encode("latin-1"))
    code, lines = refused_input(latin, out="y")
    checks.check(code != 0 and len(lines) == 1 and "latin1.txt: not UTF-8" in lines[0],
                 f"prepare_tokens refuses an input that is not UTF-8 in one line ({lines})")
    checks.check(not os.path.exists(os.path.join(work, "y")), "... and leaves no folder of its own behind")

    # Prepared again into the same folder: the new set replaces the earlier one whole, so the
    # README's glob finds no earlier shard past the new set's last.
    def prepare(out, tokenizer, text, *flags):
        source = os.path.join(work, f"doc_{len(os.listdir(work))}.txt")
        with open(source, "w", encoding="utf-8") as f:
            f.write(text)
        return subprocess.run([sys.executable, os.path.join(ROOT, "tools", "prepare_tokens.py"), "--tokenizer",
                               tokenizer, "--out", out, "--no-progress", "--shard-tokens", "500", *flags, source],
                              capture_output=True, text=True, timeout=120)

    again = os.path.join(work, "again")
    with open(TEXT, encoding="utf-8") as f:
        corpus = f.read()
    first = prepare(again, os.path.join(tok_dir, "tokenizer.json"), corpus[:40000])
    before = sorted(f for f in os.listdir(again) if f.startswith("data_train_"))
    second = prepare(again, os.path.join(tok_dir, "tokenizer.json"), corpus[:3000])
    after = sorted(f for f in os.listdir(again) if f.startswith("data_train_"))
    checks.check(first.returncode == 0 and second.returncode == 0 and len(before) > len(after) >= 1
                 and "replacing" in second.stdout and not any(f.endswith(".tmp") for f in os.listdir(again)),
                 f"a second preparation into the folder replaces the first's shards ({len(before)} -> {len(after)})")
    # The folder's own tokenizer.json given again (the same file): the set is prepared and exits 0
    # (it ended in shutil.SameFileError, exit 1, the new shards already in place).
    same = prepare(again, os.path.join(again, "tokenizer.json"), corpus[:3000])
    checks.check(same.returncode == 0 and "shards in" in same.stdout,
                 f"--tokenizer OUT/tokenizer.json itself: prepared, exit 0 ({(same.stdout + same.stderr)[-300:]})")
    # Another tokenizer into a folder whose other set (data_*) is the first's: refused before
    # anything is written (it replaced tokenizer.json, and data_* no longer trained).
    spec_other = json.loads(tok.to_str())
    spec_other["model"]["vocab"] = {t: i for t, i in list(spec_other["model"]["vocab"].items())[:300]}
    spec_other["model"]["merges"] = []
    other_tok = os.path.join(work, "other_tokenizer.json")
    with open(other_tok, "w", encoding="utf-8") as f:
        json.dump(spec_other, f)
    with open(os.path.join(again, "tokenizer.json"), "rb") as f:
        kept = f.read()
    listing = sorted(os.listdir(again))
    other = prepare(again, other_tok, corpus[:3000], "--name", "other")
    lines = [line for line in other.stderr.splitlines() if line.strip()]
    with open(os.path.join(again, "tokenizer.json"), "rb") as f:
        checks.check(other.returncode == 2 and len(lines) == 1 and "another tokenizer" in lines[0] and
                     "data" in lines[0] and f.read() == kept and sorted(os.listdir(again)) == listing,
                     f"another tokenizer for a second set in the folder: refused, the folder as it was ({lines})")
    # Shards of two corpora made with different tokenizers in one run: refused in one line naming both
    # tokenizer.json files (it trained, one set's ids read as the other's tokens).
    other_dir = os.path.join(work, "other_corpus")
    made = prepare(other_dir, other_tok, corpus[:3000], "--name", "other")
    mixed = subprocess.run([binary, "train", "--config", config, "--run-dir", os.path.join(work, "mixed"),
                            "--set", "train.max_steps=1", "--set",
                            f'data.train_files=["{shards}/shakespeare_train_*.bin", "{other_dir}/other_train_*.bin"]'],
                           capture_output=True, text=True, timeout=120)
    lines = [line for line in mixed.stderr.splitlines() if line.strip()]
    checks.check(made.returncode == 0 and mixed.returncode == 2 and len(lines) == 1 and
                 "different tokenizers" in lines[0] and os.path.join(other_dir, "tokenizer.json") in lines[0],
                 f"shards of two tokenizers in one run: refused naming both ({lines})")
    # ... and a zerotrain prepare dataset's (a character vocabulary.json) beside them, listed first:
    # refused too (no tokenizer.json beside the first shard, so nothing was compared).
    chars = os.path.join(work, "chars")
    subprocess.run([binary, "prepare", "--text", TEXT, "--out", chars], check=True, capture_output=True)
    mixed = subprocess.run([binary, "train", "--config", config, "--run-dir", os.path.join(work, "mixed_chars"),
                            "--set", "train.max_steps=1", "--set",
                            f'data.train_files=["{chars}/train.bin", "{shards}/shakespeare_train_*.bin"]'],
                           capture_output=True, text=True, timeout=120)
    lines = [line for line in mixed.stderr.splitlines() if line.strip()]
    checks.check(mixed.returncode == 2 and len(lines) == 1 and "different vocabularies" in lines[0] and
                 os.path.join(chars, "vocab.json") in lines[0] and os.path.join(shards, "tokenizer.json") in lines[0],
                 f"a character dataset's shard beside a tokenizer's: refused naming both ({lines})")
    # data.vocab_file named leaves the two tokenizers' shards refused (samples still decode through the
    # first shard's tokenizer.json) ...
    mixed = subprocess.run([binary, "train", "--config", config, "--run-dir", os.path.join(work, "mixed_named"),
                            "--set", "train.max_steps=1", "--set", f"data.vocab_file={chars}/vocab.json", "--set",
                            f'data.train_files=["{shards}/shakespeare_train_*.bin", "{other_dir}/other_train_*.bin"]'],
                           capture_output=True, text=True, timeout=120)
    lines = [line for line in mixed.stderr.splitlines() if line.strip()]
    checks.check(mixed.returncode == 2 and len(lines) == 1 and "different tokenizers" in lines[0],
                 f"shards of two tokenizers with data.vocab_file named: still refused ({lines})")
    # ... and a Hugging Face vocab.json (GPT-2's token map beside merges.txt) is the tokenizer in another
    # form, not a vocabulary of its own: its folder's shards train beside the tokenizer.json's.
    hf_form = os.path.join(work, "hf_form")
    os.makedirs(hf_form)
    with open(os.path.join(hf_form, "vocab.json"), "w") as f:
        json.dump({t: i for t, i in tok.get_vocab().items()}, f)
    with open(os.path.join(hf_form, "merges.txt"), "w") as f:
        f.write("#version: 0.2\n")
    with open(os.path.join(shards, "shakespeare_train_000001.bin"), "rb") as src, \
            open(os.path.join(hf_form, "part_000000.bin"), "wb") as dst:
        dst.write(src.read())
    beside = subprocess.run([binary, "train", "--config", config, "--run-dir", os.path.join(work, "hf_form_run"),
                             "--set", "train.max_steps=1", "--set",
                             f'data.train_files=["{shards}/shakespeare_train_*.bin", "{hf_form}/part_*.bin"]'],
                            capture_output=True, text=True, timeout=120)
    checks.check(beside.returncode == 0, f"a Hugging Face vocab.json beside shards is not taken for another "
                                         f"vocabulary ({beside.stderr.strip()[-300:]})")
    # A preparation killed during its renames (the process ends after the second, as a SIGKILL or
    # a power loss there would) leaves new shards beside the earlier set's of the same names, which
    # look whole: the folder is marked, a run refuses it naming the marker, and a preparation again
    # completes the set and takes the marker away.
    cut = os.path.join(work, "cut")
    first = prepare(cut, os.path.join(tok_dir, "tokenizer.json"), corpus[:40000])
    source = os.path.join(work, "cut_source.txt")
    with open(source, "w", encoding="utf-8") as f:
        f.write(corpus[:20000])
    killer = ("import os, sys; sys.path.insert(0, sys.argv[1]); import prepare_tokens; count = [0]\n"
              "def replace(*a, real=os.replace):\n"
              "    if count[0] == 2: os._exit(137)\n"
              "    count[0] += 1; return real(*a)\n"
              "os.replace = replace; prepare_tokens.main(sys.argv[2:])")
    killed = subprocess.run([sys.executable, "-c", killer, os.path.join(ROOT, "tools"), "--tokenizer",
                             os.path.join(tok_dir, "tokenizer.json"), "--out", cut, "--no-progress", "--shard-tokens",
                             "500", source], capture_output=True, text=True, timeout=120)
    marker = os.path.join(cut, ".zt-incomplete-output")

    def train_on_cut(name):
        return subprocess.run([binary, "train", "--config", config, "--run-dir", os.path.join(work, name), "--set",
                               "train.max_steps=1", "--set", f"data.train_files={cut}/data_train_*.bin", "--set",
                               f"data.val_files={cut}/data_val_*.bin"], capture_output=True, text=True, timeout=120)
    refused = train_on_cut("cut_run")
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    checks.check(first.returncode == 0 and killed.returncode == 137 and os.path.exists(marker) and
                 refused.returncode == 2 and len(lines) == 1 and f"{marker} is there" in lines[0],
                 f"a preparation killed during its renames marks the folder, and a run refuses it (exit "
                 f"{killed.returncode}, {lines})")
    redone = prepare(cut, os.path.join(tok_dir, "tokenizer.json"), corpus[:20000])
    trained = train_on_cut("cut_run_again")
    checks.check(redone.returncode == 0 and not os.path.exists(marker) and trained.returncode == 0,
                 f"a preparation again completes the set and unmarks it ({trained.stderr.strip()[-200:]})")
    # A --name with a folder in it or with glob characters (the run's NAME_train_*.bin would read
    # another set: "[x]" is "x"), and a shard size past llm.c's int32 count: one line, exit 2.
    for flags, named in ((["--name", "sub/set"], "--name"), (["--name", "[x]"], "--name"), (["--name", "a*"], "--name"),
                         (["--shard-tokens", str(2**40)], "--shard-tokens")):
        p = prepare(os.path.join(work, "bad_flags"), os.path.join(tok_dir, "tokenizer.json"), "a b c", *flags)
        lines = [line for line in p.stderr.splitlines() if line.strip()]
        checks.check(p.returncode == 2 and len(lines) == 1 and named in lines[0],
                     f"prepare_tokens {' '.join(flags)}: refused in one line ({lines})")
    # A tokenizer whose ids skip numbers (here all above 65,535, with 512 entries): uint32 shards
    # holding the ids themselves (Llama 3's header: magic 20240801, version 7). The width follows the
    # largest id: 65,535 still fits uint16 (llm.c's GPT-2 header, magic 20240520, version 1), 65,536
    # does not.
    def shifted(offset):
        spec = json.loads(tok.to_str())
        spec["model"]["vocab"] = {t: i + offset for t, i in spec["model"]["vocab"].items()}
        for added in spec["added_tokens"]:
            added["id"] += offset
        path = os.path.join(work, f"shifted_{offset}_tokenizer.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(spec, f)
        return path

    largest = max(tok.get_vocab(with_added_tokens=True).values())
    eot_id = tok.token_to_id("<|endoftext|>")
    for offset, header_words in ((70000, (20240801, 7)), (65536 - largest, (20240801, 7)),
                                 (65535 - largest, (20240520, 1))):
        out = os.path.join(work, f"shifted_{offset}")
        p = prepare(out, shifted(offset), corpus[:3000])
        with open(os.path.join(out, "data_val_000000.bin"), "rb") as f:
            header = np.frombuffer(f.read(1024), dtype=np.int32)
            ids = np.frombuffer(f.read(), dtype=np.uint32 if header[0] == 20240801 else np.uint16)
        checks.check(p.returncode == 0 and tuple(header[:2]) == header_words and ids[0] == offset + eot_id and
                     ids.min() >= offset,
                     f"ids {offset} to {offset + largest}: shards with header {header_words} holding the ids "
                     f"(header {header[:2].tolist()}, first ids {ids[:3].tolist()}; {p.stderr.strip()[-200:]})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
