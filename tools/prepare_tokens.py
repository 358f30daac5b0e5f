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
(their tokenizer.json is theirs). Every file is written under a staging name first
(NAME_train_000001.bin.tmp, NAME_tokenizer.json.tmp) and renamed once all are written, tokenizer.json
last, so a failed run (a full disk: one line, exit 1), a Ctrl-C or a kill (one line; the process
ends by the signal, 130 or 143 in a shell) leaves OUT as it was; a later run removes the staging
files of NAME that a SIGKILL left (a second run into OUT at once is refused). A SIGKILL or a power
loss during the renames leaves OUT/.zt-incomplete-output, naming the set, and zerotrain then reads
no shard there (new shards beside old ones of NAME would look whole) until a run of that set
completes; a run of another set into OUT meanwhile is refused, so as not to take the mark away. A character the
tokenizer has no token for (a character vocabulary's, without byte fallback) is left out of the
shards, and counted in one line. Bad input: one line, exit 2. Needs the `tokenizers` package
(tools/setup.sh installs it in .venv-hf).

usage: prepare_tokens.py --tokenizer tokenizer.json --out DIR [--name NAME] [--shard-tokens N]
                         [--jsonl-key text] [--eot TOKEN] [--max-document-chars N] [--no-progress]
                         INPUT [INPUT ...]
  INPUT: .txt files (each one document, its bytes as they are: CRLF line ends kept) or .jsonl files
  (one document per line, under --jsonl-key). A tokenizer.json's truncation, padding and BPE dropout
  are turned off (said in a note). A document past --max-document-chars is encoded in pieces cut
  where its tokens stay the whole's (tools/document_pieces.py).
"""
import contextlib
import functools
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import document_pieces  # noqa: E402
import tokenizer_outputs  # noqa: E402
from result_paths import OneLineParser  # noqa: E402
from tokenizer_outputs import (Interrupted, Staging, StopSignals, characters_left_out, copy_synced,  # noqa: E402
                               end_by_signal, fail_on_write_error, lock_folder, synced_file)
from shard_folder import (LONGEST_STAGING_SUFFIX, check_name_globs, check_tokenizer_of_out,  # noqa: E402
                          earlier_shards, refuse_run_or_model_folder, remove_stale_staging, same_file,
                          same_tokenizer, tokenizer_staging_path)

TOOL = "prepare_tokens"  # what its lines start with
fail = functools.partial(tokenizer_outputs.fail, TOOL)

# The first the tokenizer has: Llama 3's tokenizer has both <|begin_of_text|> and <|end_of_text|>.
EOT_CANDIDATES = ["<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>", "</s>"]
SHARD_TOKENS = 100_000_000  # --shard-tokens' default: llm.c's fineweb shards
# A call encodes its text at about 220 bytes of memory a character (tokenizers 0.19): one of 45 MB
# aborted the process in the library ("memory allocation ... failed"), a 100 MB text needed 22 GB.
# A longer document is encoded in pieces (document_pieces.py).
MAX_DOCUMENT_CHARS = 32_000_000


def documents(paths, key):
    """Yields (where it is, text, bytes read so far) for every document of every input; an input
    that is not UTF-8 ends the run in one line naming it (convert it first, e.g. iconv -f latin1 -t
    utf-8), and so does one that cannot be read."""
    done = 0
    for path in paths:
        try:
            for where, text, size in documents_of(path, key):
                done += size
                yield where, text, done
        except UnicodeDecodeError as e:
            fail(f"{path}: not UTF-8 (byte 0x{e.object[e.start]:02x} is no UTF-8 sequence; "
                     f"convert it first, e.g. iconv -f latin1 -t utf-8)")
        except OSError as e:
            fail(f"{path}: cannot be read ({e.strerror})")


def documents_of(path, key):
    """Yields (where it is, text, the bytes read for it) for every document of one input."""
    if not path.endswith(".jsonl"):
        with open(path, encoding="utf-8", newline="") as f:  # line ends as written (the default made CRLF LF)
            text = f.read()
        yield path, text, len(text.encode("utf-8"))
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
            except RecursionError:  # nested past Python's stack (a traceback, exit 1)
                fail(f"{path}:{n}: JSON nested too deep to be a document")
            if not isinstance(doc, dict) or not isinstance(doc.get(key), str):
                fail(f"{path}:{n}: no string under \"{key}\" (--jsonl-key)")
            try:  # a \ud800 escape alone is JSON but no text: the tokenizer wrote it as U+FFFD
                doc[key].encode("utf-8")
            except UnicodeEncodeError as e:
                fail(f"{path}:{n}: the text under \"{key}\" holds an unpaired surrogate "
                     f"(\\u{ord(e.object[e.start]):04x}), which no UTF-8 text can")
            yield f"{path}:{n}", doc[key], skipped + len(line.encode("utf-8"))
            skipped = 0


def write_shard(tmp, tokens, wide):
    """The shard under its staging name `tmp`, on disk before it is renamed (so a full disk fails
    here, before anything in OUT is replaced, and a power loss after the renames finds its bytes)."""
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = (20240801, 7, len(tokens)) if wide else (20240520, 1, len(tokens))
    with synced_file(tmp) as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype=np.uint32 if wide else np.uint16).tobytes())


def describe_char(c):
    return f"U+{ord(c):04X} {c!r}"


def main(argv=None):
    signals = StopSignals()
    try:
        return run(argv, signals)
    except Interrupted as e:
        signals.holding = True  # a second Ctrl-C waits for the line, then the first signal ends it
        end_by_signal(TOOL, e)


def run(argv, signals):
    ap = OneLineParser("prepare_tokens", description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", required=True, help="a Hugging Face tokenizer.json (required)")
    ap.add_argument("--out", required=True,
                    help="the folder the shards and the tokenizer's files go into, made if missing (required)")
    ap.add_argument("--name", default="data", help="shard name prefix, NAME_train_000001.bin (default: %(default)s)")
    ap.add_argument("--shard-tokens", type=int, default=SHARD_TOKENS,
                    help=f"tokens per shard, llm.c's size; the first shard is the validation split, so the corpus "
                    f"must fill more than one (default: {SHARD_TOKENS:,})")
    ap.add_argument("--jsonl-key", default="text",
                    help="the key of each .jsonl line's document text (default: %(default)s)")
    ap.add_argument("--eot", default=None,
                    help="the token each document starts with (default: the first of " + ", ".join(EOT_CANDIDATES)
                    + " the tokenizer has)")
    ap.add_argument("--max-document-chars", type=int, default=MAX_DOCUMENT_CHARS,
                    help="the most characters encoded at once: a longer document is encoded in pieces, cut where its "
                    "tokens stay those of the whole (a document with no such cut is refused); the tokenizers "
                    f"library takes about 220 bytes of memory a character (default: {MAX_DOCUMENT_CHARS:,}, "
                    "about 7 GB)")
    ap.add_argument("--no-progress", action="store_true",
                    help="no progress bar on stderr (default: a bar, where the tqdm package is installed)")
    ap.add_argument("inputs", nargs="+", metavar="INPUT",
                    help=".txt files (each one document) or .jsonl files (one document per line, under --jsonl-key)")
    args = ap.parse_args(argv)
    try:
        from tokenizers import Tokenizer
    except ImportError:
        fail("needs the tokenizers package (run it with .venv-hf/bin/python; tools/setup.sh)")
    if args.max_document_chars < 1:
        fail(f"--max-document-chars must be 1 or more (got {args.max_document_chars})")
    if not 2 <= args.shard_tokens <= 2**31 - 1:  # llm.c's header counts a shard's tokens in an int32
        fail(f"--shard-tokens must be in [2, {2**31 - 1}] (got {args.shard_tokens})")
    if not args.name or "/" in args.name or args.name in (".", ".."):
        fail(f"--name {args.name!r}: a file name prefix, without '/'")
    # A run reads the set by the glob OUT/NAME_train_*.bin: a pattern character in NAME would match
    # other names ("[x]" matches set "x"'s shards, not its own).
    if any(ch in args.name for ch in "*?[]\\"):
        fail(f"--name {args.name!r}: the glob that reads the set (NAME_train_*.bin) would take it as a pattern; "
             "give a name without * ? [ ] or \\")
    if len(os.fsencode(args.name + LONGEST_STAGING_SUFFIX)) > 255:
        fail(f"--name: {len(os.fsencode(args.name))} bytes, too long for the set's file names "
             f"(NAME{LONGEST_STAGING_SUFFIX} must fit a file name's 255 bytes)")
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
    # What a tokenizer.json may set for batches of model inputs, not for a corpus: truncation cut
    # each document to its length and padding filled short ones with pad ids (an id the delimiter's
    # too, once), both in silence, and BPE dropout drew other tokens each run. Turned off, and said.
    turned_off = []
    if tok.truncation is not None:
        turned_off.append(f"truncation to {tok.truncation['max_length']} tokens")
        tok.no_truncation()
    if tok.padding is not None:
        turned_off.append("padding")
        tok.no_padding()
    if getattr(tok.model, "dropout", None):
        turned_off.append(f"BPE dropout {tok.model.dropout:g}")
        tok.model.dropout = None
    if turned_off:
        print(f"note: {args.tokenizer}'s {', '.join(turned_off)} turned off: every document is encoded whole, "
              "the same tokens each run")
    # Ids, not entries: a tokenizer's ids may skip numbers, and the shard's dtype must hold its largest.
    vocab = max(tok.get_vocab(with_added_tokens=True).values(), default=-1) + 1
    eot_name = args.eot or next((t for t in EOT_CANDIDATES if tok.token_to_id(t) is not None), None)
    if args.eot is not None and tok.token_to_id(args.eot) is None:
        added = [t.content for _, t in sorted(tok.get_added_tokens_decoder().items())]
        fail(f"--eot {args.eot}: not a token in {args.tokenizer}'s vocabulary"
             + (f" (its added tokens: {', '.join(added[:8])}{', ...' if len(added) > 8 else ''})" if added else ""))
    if eot_name is None:
        fail(f"{args.tokenizer}: no document delimiter (none of {', '.join(EOT_CANDIDATES)}); name one with --eot")
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
        held = lock_folder(TOOL, args.out)
        stale = remove_stale_staging(args.out, args.name)
    except OSError as e:
        fail(f"--out {args.out}: {e.strerror}")
    staging = Staging(args.out, f"{TOOL} --name {args.name}")
    if (cut := staging.foreign_marker()) is not None:
        os.close(held)
        fail(f"--out {args.out}: {staging.marker} is there: another output into it was cut before it ended "
             f"({cut.split(':')[0] if cut.startswith(TOOL + ' --name') else 'a zerotrain prepare or ckpt export'})"
             ", and its files there may be mixed; run that one again first")
    signals.outcome = f"; --out {args.out} is left as it was"
    try:
        return prepare(args, tok, vocab, eot_name, eot, wide, staging, replacing, stale, signals)
    finally:  # a failure or a stop leaves OUT as it was: no staged file, no folder of ours
        with signals.held():
            staging.remove()
            if created and not os.listdir(args.out):
                os.rmdir(args.out)
            os.close(held)


def prepare(args, tok, vocab, eot_name, eot, wide, staging, replacing, stale_staging, signals):
    """Tokenizes the inputs into staged shards, stages the tokenizer files, then replaces NAME's
    earlier shards in OUT with them (and OUT's tokenizer files, where `replacing`)."""
    total_bytes = sum(os.path.getsize(p) for p in args.inputs)
    progress = None
    if not args.no_progress:
        try:
            from tqdm import tqdm
            progress = tqdm(total=total_bytes, unit="B", unit_scale=True, desc="tokenizing")
        except ImportError:
            pass
    if progress is None:
        return tokenize_and_commit(args, tok, vocab, eot_name, eot, wide, staging, replacing, stale_staging,
                                   signals, progress)
    try:
        with contextlib.redirect_stderr(LinesAfterBar(progress, sys.stderr)):
            return tokenize_and_commit(args, tok, vocab, eot_name, eot, wide, staging, replacing, stale_staging,
                                       signals, progress)
    finally:  # a stop's line after it starts a line of its own
        progress.close()


class LinesAfterBar:
    """sys.stderr while the bar is drawn (to the stream it was made with): a line written, such as any
    check's failure, closes the bar first, so the line starts a line of its own and no bar is drawn
    after it (it was glued on, `tokenizing: 100%|###| ...prepare_tokens: ...`, the bar redrawn below)."""

    def __init__(self, bar, stream):
        self.bar, self.stream, self.flush = bar, stream, stream.flush

    def write(self, text):
        self.bar.close()  # a closed bar draws nothing more
        return self.stream.write(text)


def tokenize_and_commit(args, tok, vocab, eot_name, eot, wide, staging, replacing, stale_staging, signals,
                        progress):
    """prepare's work, within its progress bar: the shards staged as they fill, the tokenizer's
    files staged after them, then every one put in place (Staging.commit)."""
    try:
        shard = np.empty(args.shard_tokens, dtype=np.uint32)
    except MemoryError:
        fail(f"--shard-tokens {args.shard_tokens}: a shard of that many tokens does not fit in memory "
             f"({4 * args.shard_tokens / 2**30:.1f} GiB as it is gathered)")
    filled, index, last = 0, 0, 0
    n_docs = n_tokens = n_chars = 0
    shards = []  # (path, tokens) of each staged shard
    left_out, first_left_out, alone = 0, None, {}
    # A write that fails (a full disk: exit 1) is one line; the staged files go on the way out.
    left_as_it_was = f"; --out {args.out} is left as it was"

    def flush():
        nonlocal filled, index
        split = "val" if index == 0 else "train"
        path = os.path.join(args.out, f"{args.name}_{split}_{index:06d}.bin")
        shards.append((path, filled))
        tmp = staging.stage(path + ".tmp", path)
        with fail_on_write_error(TOOL, path, left_as_it_was):
            write_shard(tmp, shard[:filled], wide)
        filled, index = 0, index + 1

    # A document's own "<|endoftext|>" is its text, not a delimiter: encoded as ordinary text, as
    # llm.c's fineweb.py encodes documents (tiktoken's encode_ordinary).
    tok.encode_special_tokens = True
    cutter = document_pieces.Cutter(tok)
    for where, text, done in documents(args.inputs, args.jsonl_key):
        # Past --max-document-chars a document is encoded a piece at a time (the library aborted
        # the process past its memory), cut where the tokens stay the whole's (document_pieces).
        parts = document_pieces.pieces(cutter, text, args.max_document_chars)
        if parts is None:
            fail(f"{where}: a document of {len(text):,} characters, past --max-document-chars "
                 f"{args.max_document_chars:,}, with no place the tokenizer can cut it without changing its tokens "
                 "(the tokenizers library takes about 220 bytes of memory a character encoded at once): split it "
                 "into documents (a JSONL line each) or raise the bound where the memory is there" + left_as_it_was)
        n_docs += 1
        n_chars += len(text)
        for k, part in enumerate(parts):
            encoding = tok.encode(part, add_special_tokens=False)
            count, first = characters_left_out(tok, part, encoding, alone)
            if count:
                left_out += count
                first_left_out = first_left_out or (part[first], where)
            ids = [eot] + encoding.ids if k == 0 else encoding.ids
            n_tokens += len(ids)
            at = 0  # a document that overflows the shard continues in the next one, as in llm.c
            while at < len(ids):  # (an index, not ids[take:]: a long document was copied once a shard)
                take = min(len(ids) - at, args.shard_tokens - filled)
                shard[filled:filled + take] = ids[at:at + take]
                filled += take
                at += take
                if filled == args.shard_tokens:
                    flush()
        if progress is not None:
            progress.update(done - last)
            last = done
    if filled > 0:
        flush()
    if progress is not None:  # every input read: what is printed from here on starts a line of its own
        progress.close()
    if len(shards) < 2:
        smaller = max(2, n_tokens // 10 + 1)  # about 10 shards, the first (a tenth) for validation
        fail(f"{n_tokens} tokens fill only one shard of --shard-tokens {args.shard_tokens}: the first shard is the "
             "validation split, so a training split needs a smaller --shard-tokens"
             + (f", e.g. --shard-tokens {smaller} ({-(-n_tokens // smaller)} shards)" if n_tokens > 2
                else "; this corpus is too small for two shards of 2 or more tokens"))
    # The tokenizer's files, staged after the shards (tokenizer_config.json, then tokenizer.json: the
    # renames follow this order); --tokenizer given from OUT itself is in place already.
    beside = os.path.join(os.path.dirname(os.path.abspath(args.tokenizer)), "tokenizer_config.json")
    config = os.path.join(args.out, "tokenizer_config.json")
    target = os.path.join(args.out, "tokenizer.json")
    for source, final in ((beside, config), (args.tokenizer, target)):
        if os.path.exists(source) and not same_file(source, final):
            tmp = staging.stage(tokenizer_staging_path(args.out, args.name, final), final)
            with fail_on_write_error(TOOL, final, left_as_it_was):
                copy_synced(source, tmp)
    # Another tokenizer's files go before the new shards take their names (its tokenizer_config.json
    # with it, even where --tokenizer has none: its special tokens are not this one's), unless that
    # config is --tokenizer's own, beside it in OUT.
    earlier = [p for p in (config, target)
               if replacing and os.path.lexists(p) and not (p == config and same_file(beside, config))]
    # The new set replaces the whole earlier one: a glob over NAME_train_*.bin must not find an
    # earlier preparation's shards past the new set's last (another corpus, or another tokenizer).
    stale = [p for p in earlier_shards(args.out, args.name) if p not in {path for path, _ in shards}]
    # The earlier tokenizer files and NAME's earlier shards go first, then the new shards take their
    # names, and the tokenizer files theirs, tokenizer.json the very last: a kill part way leaves
    # shards beside no tokenizer.json, never beside an earlier tokenizer's.
    try:
        staging.commit(earlier + stale, signals, f"; the new set was in place in {args.out} already")
    except OSError as e:
        fail(f"--out {args.out}: the new set cannot be put in place ({e.filename}: {e.strerror}); "
             f"set {args.name} there may be incomplete: run again", status=1)
    print(f"{n_docs} documents, {n_tokens} tokens ({'uint32' if wide else 'uint16'}, vocabulary {vocab}, "
          f"documents start with {eot_name} = {eot}) -> {len(shards)} shards in {args.out}: "
          f"val {shards[0][1]} tokens, train {sum(n for _, n in shards[1:])}"
          + (f" (replacing {len(stale)} earlier shards of {args.name} there)" if stale else "")
          + (f" (removed {stale_staging} staging files an interrupted run of {args.name} left)"
             if stale_staging else ""))
    if left_out:
        char, where = first_left_out
        print(f"prepare_tokens: note: {left_out} of the corpus's {n_chars} characters have no token in "
              f"{args.tokenizer} and are left out of the shards (a tokenizer without byte fallback drops them; "
              f"the first: {describe_char(char)} in {where})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
