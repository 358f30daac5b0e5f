#!/usr/bin/env python3
"""Text or JSONL documents into llm.c token shards with a Hugging Face tokenizer.json (GPT-2's
byte-level BPE, Llama 3's, or one trained with the `tokenizers` library), as llm.c's fineweb.py
writes them: each document starts with the tokenizer's document delimiter (GPT-2's <|endoftext|>;
Llama 3's <|begin_of_text|>, 128000, as llm.c's Llama 3 scripts write it and as Llama 3 saw its
documents begin; a document's own "<|endoftext|>" is encoded as its text, as llm.c's
encode_ordinary does, never as a second delimiter), the first shard is the validation
split (NAME_val_000000.bin) and the rest the training split (NAME_train_000001.bin, ...), each
with llm.c's 256 x int32 header; uint16 tokens (magic 20240520) for vocabularies up to 65,536,
uint32 (magic 20240801) where an id passes 65,535. The tokenizer's files are copied beside the shards, so a run that
reads them (data.train_files = "OUT/NAME_train_*.bin" and data.val_files = "OUT/NAME_val_*.bin", the
tokenizer.json beside the first shard found without data.tokenizer_file) samples and exports with
the same tokenizer (a tokenizer_config.json beside --tokenizer is copied too; an earlier
tokenizer's is removed). Run again into the same OUT, the new set replaces NAME's earlier shards
(none of them is left for a glob to find), and no other set's; a NAME whose globs would match
another set's shards in OUT (set "d" beside set "d_val"), or holding a glob's pattern characters
(* ? [ ] \\), is refused, and so is an OUT that is a training run's directory or a model folder
(their tokenizer.json is theirs); a failed run leaves OUT as it was. Bad input: one line, exit 2.
Needs the `tokenizers` package (tools/setup.sh installs it in .venv-hf).

usage: prepare_tokens.py --tokenizer tokenizer.json --out DIR [--name NAME] [--shard-tokens N]
                         [--jsonl-key text] [--eot TOKEN] [--no-progress] INPUT [INPUT ...]
  INPUT: .txt files (each one document) or .jsonl files (one document per line, under --jsonl-key)
"""
import argparse
import glob
import json
import os
import re
import shutil
import sys

import numpy as np

# The first the tokenizer has: Llama 3's tokenizer has both <|begin_of_text|> and <|end_of_text|>.
EOT_CANDIDATES = ["<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>", "</s>"]


def fail(message):
    """Bad input: one line naming it, exit 2 (as zerotrain's)."""
    print(f"prepare_tokens: {message}", file=sys.stderr)
    sys.exit(2)


class OneLineParser(argparse.ArgumentParser):
    """argparse's usage errors in fail's one line (it printed the usage above them)."""

    def error(self, message):
        fail(f"{message} (see --help)")


def documents(paths, key):
    """Yields (text, bytes read so far) for every document of every input; an input that is not
    UTF-8 ends the run in one line naming it (convert it first, e.g. iconv -f latin1 -t utf-8)."""
    done = 0
    for path in paths:
        try:
            for text, size in documents_of(path, key):
                done += size
                yield text, done
        except UnicodeDecodeError as e:
            fail(f"{path}: not UTF-8 (byte 0x{e.object[e.start]:02x} is no UTF-8 sequence; "
                     f"convert it first, e.g. iconv -f latin1 -t utf-8)")


def documents_of(path, key):
    """Yields (text, the bytes read for it) for every document of one input."""
    if not path.endswith(".jsonl"):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        yield text, len(text.encode("utf-8"))
        return
    with open(path, encoding="utf-8") as f:
        skipped = 0
        for n, line in enumerate(f, 1):
            if not line.strip():
                skipped += len(line.encode("utf-8"))
                continue
            try:
                doc = json.loads(line)
            except json.JSONDecodeError as e:
                fail(f"{path}:{n}: not JSON ({e.msg})")
            if not isinstance(doc, dict) or not isinstance(doc.get(key), str):
                fail(f"{path}:{n}: no string under \"{key}\" (--jsonl-key)")
            try:  # a \ud800 escape alone is JSON but no text: the tokenizer wrote it as U+FFFD
                doc[key].encode("utf-8")
            except UnicodeEncodeError as e:
                fail(f"{path}:{n}: the text under \"{key}\" holds an unpaired surrogate "
                     f"(\\u{ord(e.object[e.start]):04x}), which no UTF-8 text can")
            yield doc[key], skipped + len(line.encode("utf-8"))
            skipped = 0


def write_shard(path, tokens, wide):
    """The shard as path + ".tmp": the set takes its names only once every shard is written."""
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = (20240801, 7, len(tokens)) if wide else (20240520, 1, len(tokens))
    with open(path + ".tmp", "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype=np.uint32 if wide else np.uint16).tobytes())


SHARD_NAME = re.compile(r"(.+)_(train|val)_\d{6}\.bin")


def shard_sets(out):
    """The sets of shards in OUT: {NAME: [paths]}, by llm.c's names NAME_(train|val)_NNNNNN.bin."""
    sets = {}
    for p in glob.glob(os.path.join(glob.escape(out), "*.bin")):
        m = SHARD_NAME.fullmatch(os.path.basename(p))
        if m:
            sets.setdefault(m.group(1), []).append(p)
    return sets


def earlier_shards(out, name):
    """NAME's shards already in OUT (an earlier preparation's), which the new set replaces: its own
    names alone (NAME_train_*.bin would also match set NAME_train's NAME_train_train_000001.bin)."""
    return sorted(shard_sets(out).get(name, []))


def check_name_globs(args):
    """The globs a run reads a set by (OUT/NAME_train_*.bin, OUT/NAME_val_*.bin) must find NAME's
    shards alone: set "d" beside set "d_val" would train or validate on the other's too."""
    for other in sorted(set(shard_sets(args.out)) - {args.name}):
        for a, b in ((args.name, other), (other, args.name)):
            if any(f"{b}_".startswith(f"{a}_{split}_") for split in ("train", "val")):
                fail(f"--name {args.name}: --out {args.out} holds set {other}, and the glob {a}_train_*.bin or "
                     f"{a}_val_*.bin would also match {b}'s shards; give another --name or --out")


def copy_unless_same(source, target):
    """Copies source to target, unless target is that file (--tokenizer given from OUT itself)."""
    if not (os.path.exists(target) and os.path.samefile(source, target)):
        shutil.copyfile(source, target)


def same_tokenizer(a, b):
    """Whether tokenizer.json files a and b are one tokenizer (the same file, or the same JSON saved
    again in another key order or spacing); False where a is missing or unreadable."""
    try:
        if os.path.samefile(a, b):
            return True
        with open(a, encoding="utf-8") as fa, open(b, encoding="utf-8") as fb:
            return json.load(fa) == json.load(fb)
    except (OSError, ValueError):
        return False


RUN_FILES = ("metrics.jsonl", "RUN_LOCK", "checkpoints", "final.safetensors")
MODEL_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                 "pytorch_model.bin.index.json")


def refuse_run_or_model_folder(out):
    """OUT's tokenizer.json is replaced and its tokenizer_config.json may go: not where they are a
    training run's (its samples and exports decode through them) or a model folder's (config.json
    beside its weights)."""
    if not os.path.isdir(out):
        return
    held = next((f for f in RUN_FILES if os.path.lexists(os.path.join(out, f))), None)
    if held:
        fail(f"--out {out} is a training run's directory (it holds {held}): its tokenizer is the run's, "
             "which samples and exports decode through; give another --out")
    weights = next((f for f in MODEL_WEIGHTS if os.path.lexists(os.path.join(out, f))), None)
    if weights and os.path.exists(os.path.join(out, "config.json")):
        fail(f"--out {out} is a model folder (config.json beside {weights}): its tokenizer is the model's; "
             "give another --out")


def check_tokenizer_of_out(args, replacing):
    """OUT's tokenizer.json is its shards' (training finds it beside them): another set's there, of
    other names than NAME, must not be replaced (`replacing`: --tokenizer is not that one) by
    another tokenizer, whose ids would then decode (or be refused against) that set's tokens."""
    if not os.path.isfile(os.path.join(args.out, "tokenizer.json")) or not replacing:
        return
    others = sorted(set(shard_sets(args.out)) - {args.name})
    if others:
        fail(f"--out {args.out}: its tokenizer.json is another tokenizer, that of its shards {', '.join(others)}; "
             "give another --out (each folder holds one tokenizer)")


def main(argv=None):
    ap = OneLineParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", required=True, help="a Hugging Face tokenizer.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", default="data", help="shard name prefix (NAME_train_000001.bin)")
    ap.add_argument("--shard-tokens", type=int, default=100_000_000)
    ap.add_argument("--jsonl-key", default="text")
    ap.add_argument("--eot", default=None,
                    help="the token each document starts with (default: the first of " + ", ".join(EOT_CANDIDATES)
                    + " the tokenizer has)")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("inputs", nargs="+")
    args = ap.parse_args(argv)
    try:
        from tokenizers import Tokenizer
    except ImportError:
        fail("needs the tokenizers package (run it with .venv-hf/bin/python; tools/setup.sh)")
    if not 2 <= args.shard_tokens <= 2**31 - 1:  # llm.c's header counts a shard's tokens in an int32
        fail(f"--shard-tokens must be in [2, {2**31 - 1}] (got {args.shard_tokens})")
    if not args.name or "/" in args.name or args.name in (".", ".."):
        fail(f"--name {args.name!r}: a file name prefix, without '/'")
    # A run reads the set by the glob OUT/NAME_train_*.bin: a pattern character in NAME would match
    # other names ("[x]" matches set "x"'s shards, not its own).
    if any(ch in args.name for ch in "*?[]\\"):
        fail(f"--name {args.name!r}: the glob that reads the set (NAME_train_*.bin) would take it as a pattern; "
             "give a name without * ? [ ] or \\")
    for p in args.inputs:
        if not os.path.isfile(p):
            fail(f"{p}: " + ("a folder, not a text or JSONL file" if os.path.isdir(p)
                             else "no such file" if not os.path.exists(p)
                             else "not a regular file (a FIFO or a device), not a text or JSONL file"))
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        fail(f"--out {args.out}: exists and is not a folder")
    refuse_run_or_model_folder(args.out)
    try:
        tok = Tokenizer.from_file(args.tokenizer)
    except Exception as e:  # the library raises its own exception types
        fail(f"{args.tokenizer}: not a tokenizer.json ({str(e).splitlines()[0]})")
    # Ids, not entries: a tokenizer's ids may skip numbers, and the shard's dtype must hold its largest.
    vocab = max(tok.get_vocab(with_added_tokens=True).values(), default=-1) + 1
    eot_name = args.eot or next((t for t in EOT_CANDIDATES if tok.token_to_id(t) is not None), None)
    if eot_name is None or tok.token_to_id(eot_name) is None:
        fail(f"{args.tokenizer}: no document delimiter ({args.eot or ', '.join(EOT_CANDIDATES)}); "
                 "name one with --eot")
    eot = tok.token_to_id(eot_name)
    wide = vocab > 65536
    # Read once: whether OUT's tokenizer.json (if any) is another than --tokenizer.
    replacing = not same_tokenizer(os.path.join(args.out, "tokenizer.json"), args.tokenizer)
    check_tokenizer_of_out(args, replacing)
    if os.path.isdir(args.out):
        check_name_globs(args)
    created = not os.path.isdir(args.out)
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        fail(f"--out {args.out}: {e.strerror}")
    written = []
    try:
        return prepare(args, tok, vocab, eot_name, eot, wide, written, replacing)
    finally:  # a failure or an interrupt leaves OUT as it was: no partial set, no folder of ours
        for path, _ in written:
            if os.path.exists(path + ".tmp"):
                os.remove(path + ".tmp")
        if created and not os.listdir(args.out):
            os.rmdir(args.out)


def prepare(args, tok, vocab, eot_name, eot, wide, written, replacing):
    """Tokenizes the inputs into shards (`written`: each one's path and tokens), then replaces
    NAME's earlier shards in OUT with them (and OUT's tokenizer files, where `replacing`)."""
    total_bytes = sum(os.path.getsize(p) for p in args.inputs)
    progress = None
    if not args.no_progress:
        try:
            from tqdm import tqdm
            progress = tqdm(total=total_bytes, unit="B", unit_scale=True, desc="tokenizing")
        except ImportError:
            pass

    try:
        shard = np.empty(args.shard_tokens, dtype=np.uint32)
    except MemoryError:
        fail(f"--shard-tokens {args.shard_tokens}: a shard of that many tokens does not fit in memory "
             f"({4 * args.shard_tokens / 2**30:.1f} GiB as it is gathered)")
    filled, index, last = 0, 0, 0
    n_docs = n_tokens = 0

    def flush():
        nonlocal filled, index
        split = "val" if index == 0 else "train"
        path = os.path.join(args.out, f"{args.name}_{split}_{index:06d}.bin")
        written.append((path, filled))  # before the write: an interrupted one's .tmp is cleaned up too
        write_shard(path, shard[:filled], wide)
        filled, index = 0, index + 1

    # A document's own "<|endoftext|>" is its text, not a delimiter: encoded as ordinary text, as
    # llm.c's fineweb.py encodes documents (tiktoken's encode_ordinary).
    tok.encode_special_tokens = True
    for text, done in documents(args.inputs, args.jsonl_key):
        ids = [eot] + tok.encode(text, add_special_tokens=False).ids
        n_docs += 1
        n_tokens += len(ids)
        while ids:  # a document that overflows the shard continues in the next one, as in llm.c
            take = min(len(ids), args.shard_tokens - filled)
            shard[filled:filled + take] = ids[:take]
            filled += take
            ids = ids[take:]
            if filled == args.shard_tokens:
                flush()
        if progress is not None:
            progress.update(done - last)
            last = done
    if filled > 0:
        flush()
    if progress is not None:
        progress.close()
    if len(written) < 2:
        fail(f"{n_tokens} tokens fill only one shard of --shard-tokens {args.shard_tokens}: "
                 "the first shard is the validation split, so a training split needs a smaller --shard-tokens")
    # The new set replaces the whole earlier one: a glob over NAME_train_*.bin must not find an
    # earlier preparation's shards past the new set's last (another corpus, or another tokenizer).
    stale = [p for p in earlier_shards(args.out, args.name) if p not in {path for path, _ in written}]
    for p in stale:
        os.remove(p)
    for path, _ in written:
        os.replace(path + ".tmp", path)
    copy_unless_same(args.tokenizer, os.path.join(args.out, "tokenizer.json"))
    beside = os.path.join(os.path.dirname(os.path.abspath(args.tokenizer)), "tokenizer_config.json")
    config = os.path.join(args.out, "tokenizer_config.json")
    if os.path.exists(beside):
        copy_unless_same(beside, config)
    elif replacing and os.path.exists(config):  # the earlier tokenizer's: its special tokens are not this one's
        os.remove(config)
    print(f"{n_docs} documents, {n_tokens} tokens ({'uint32' if wide else 'uint16'}, vocabulary {vocab}, "
          f"documents start with {eot_name} = {eot}) -> {len(written)} shards in {args.out}: "
          f"val {written[0][1]} tokens, train {sum(n for _, n in written[1:])}"
          + (f" (replacing {len(stale)} earlier shards of {args.name} there)" if stale else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
