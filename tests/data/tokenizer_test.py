#!/usr/bin/env python3
"""engine/app/data/tokenizer against the `tokenizers` library: byte-level BPE tokenizers trained
here with the library (nothing downloaded) -- GPT-2's kind (ByteLevel pre-tokenizer with its
pattern) and Llama 3's (its Split pattern, then a ByteLevel map, merges ignored for whole-vocabulary
words), each with an end-of-text added token -- encode a test corpus (tinyshakespeare's lines, and
lines of accents, CJK, emoji, digits, tabs, blank runs, capitalised contractions, the added token
inside text) to the library's ids, and decode them back to the library's text. A tokenizer of
another kind is refused in one line.

usage: tokenizer_test.py HF_PYTHON_UNUSED -- PATH/TO/zt_tokenizer_driver   (run with .venv-hf's python)
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402

from hf_env import require_hf  # noqa: E402

require_hf("tokenizers")
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXT = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt")
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
          r"\s*[\r\n]+|\s+(?!\S)|\s+")
EXTRA = ["Café déjà vu, naïve façade — «quoted» ¿qué?", "東京は日本の首都です。北京欢迎你", "emoji 🙂🚀 and ✓ marks",
         "numbers 1234567 and 3.14159, 2024-11-27", "tabs\there\t\tand  double  spaces   ", "\n\n\nlines\r\n\r\nend\n",
         "DON'T SHOUT, I'LL WE'VE they'RE", "a<|endoftext|>b <|endoftext|> c", "  leading and trailing  ",
         "mixed123abc ٣٤٥ Ⅻ ½", "'s 't 'x' '' ''s", "Ω≈ç√∫˜µ≤≥÷ åß∂ƒ©˙∆˚¬…æ"]


def train(kind, corpus):
    tok = Tokenizer(models.BPE(ignore_merges=(kind == "llama3")))
    if kind == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    if kind == "llama3":  # Llama 3's template: its begin-of-text token before every sequence
        end = tok.token_to_id("<|endoftext|>")
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="<|endoftext|> $A", pair="<|endoftext|> $A <|endoftext|> $B",
                                          special_tokens=[("<|endoftext|>", end)])])
    return tok


def main():
    driver = sys.argv[sys.argv.index("--") + 1]
    checks = Checks()
    with open(TEXT, encoding="utf-8") as f:
        shakespeare = f.read()
    lines = shakespeare.splitlines(keepends=True)
    corpus = [shakespeare[i:i + 2000] for i in range(0, 200000, 2000)] + EXTRA
    texts = lines[:3000] + EXTRA + [shakespeare[5000:9000]]
    with tempfile.TemporaryDirectory() as work:
        for kind in ("gpt2", "llama3"):
            tok = train(kind, corpus)
            path = os.path.join(work, f"{kind}.json")
            tok.save(path)
            if kind == "llama3":
                with open(path) as f:
                    saved = json.load(f)["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
                checks.check(saved == LLAMA3, "the library saves Llama 3's pattern as written")
            p = subprocess.run([driver, path], input="".join(json.dumps(t) + "\n" for t in texts),
                               capture_output=True, text=True, timeout=300)
            if not checks.check(p.returncode == 0, f"{kind}: the driver reads the library's tokenizer.json "
                                                   f"({p.stderr.strip()[:300]})"):
                continue
            ours = [json.loads(l) for l in p.stdout.splitlines()]
            theirs = [tok.encode(t, add_special_tokens=False).ids for t in texts]
            bad = [i for i, (o, t) in enumerate(zip(ours, theirs)) if o["ids"] != t]
            checks.check(len(ours) == len(texts) and not bad,
                         f"{kind}: {len(texts)} texts encode to the library's ids ({len(bad)} differ"
                         + (f"; first {texts[bad[0]]!r}: {ours[bad[0]]['ids'][:20]} vs {theirs[bad[0]][:20]})"
                            if bad else ")"))
            undecoded = [i for i, (o, t) in enumerate(zip(ours, theirs)) if o["decoded"] != tok.decode(t, skip_special_tokens=False)]
            checks.check(not undecoded, f"{kind}: and decode to the library's text ({len(undecoded)} differ)")
            checks.check(all(o["decoded"] == t for o, t in zip(ours, texts)), f"{kind}: decoding gives the text back")
            # As a prompt: what the library's encode gives with its default add_special_tokens=True
            # (Llama 3's template puts its begin-of-text token first; GPT-2's adds nothing).
            prompts = [tok.encode(t).ids for t in texts]
            off = [i for i, (o, t) in enumerate(zip(ours, prompts)) if o["prompt_ids"] != t]
            checks.check(not off and (kind == "gpt2" or all(p[0] == tok.token_to_id("<|endoftext|>") for p in prompts)),
                         f"{kind}: as prompts, the library's ids with its template's special tokens ({len(off)} differ)")
        wordpiece = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
        path = os.path.join(work, "wordpiece.json")
        wordpiece.save(path)
        p = subprocess.run([driver, path], input="", capture_output=True, text=True, timeout=60)
        lines_err = p.stderr.strip().splitlines()
        checks.check(p.returncode == 2 and len(lines_err) == 1 and "WordPiece" in lines_err[0],
                     f"another kind of tokenizer is refused in one line ({lines_err})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
