#!/usr/bin/env python3
"""tools/prepare_tokens.py's shards and folder against the tokenizers library and llm.c's format:

  * a document holding its tokenizer's delimiter as text ("<|endoftext|>") gets one delimiter, at
    its start: its own is encoded as text (llm.c's fineweb.py encodes with encode_ordinary), and its
    tokens decode back to the document;
  * a document past --max-document-chars is encoded in pieces and its shards are the whole's, byte
    for byte (a byte-level BPE's and a character vocabulary's); a tokenizer whose tokens cross a
    space is cut only where they do not, and a document it cannot cut is refused in one line; a
    normaliser that strips a text's ends is never cut beside a long whitespace run; a
    tokenizer.json's truncation, padding and BPE dropout are turned off and said; a .txt keeps its
    CRLF and CR line ends;
  * a set whose globs would take another set's shards (NAME "d" beside "d_val", "data" beside
    "data_train") is refused in one line, every shard kept (preparing "data" after "data_train"
    deleted data_train's); sets whose globs do not overlap live side by side;
  * another tokenizer without a tokenizer_config.json replacing the folder's: the earlier one's
    config goes too (it stayed, and runs read their special tokens from it); the same tokenizer again
    keeps it;
  * a flag argparse refuses, and a JSONL text holding an unpaired surrogate (written as U+FFFD), are
    one line, exit 2;
  * a write that fails (a file size limit, RLIMIT_FSIZE, standing in for a full disk), at a shard or
    at the tokenizer's copy once every shard is written, is one line, exit 1, the folder as it was
    (the tokenizer was copied in place after the shards' renames: a full disk left the new shards
    beside a truncated tokenizer.json, with a traceback); the renames go earlier tokenizer files
    out, then shards in, then tokenizer.json last;
  * a folder another output's cut left marked (.zt-incomplete-output, zerotrain prepare's or another
    set's) refuses a run of this set, the mark kept; the set's own mark its run takes away;
  * staging files that a killed run of the set left (NAME_train_000007.bin.tmp,
    NAME_tokenizer.json.tmp) are removed by the next run, other names' kept (they piled up run after
    run); SIGINT and SIGTERM mid-run end it by the signal with one line, no traceback, nothing
    staged left, the folder as it was;
  * a character a character vocabulary has no token for is counted in one line (it was dropped
    silently); a byte-level BPE's text of any characters never is;
  * --help gives every flag a meaning and its default (--shard-tokens' 100,000,000 was not shown);
  * a refusal while the progress bar is drawn (a torn JSONL line, a corpus that fills one shard)
    starts a line of its own, the last (it was glued onto the bar, which was drawn again after it);
    the one-shard refusal names a --shard-tokens that splits the corpus, which then prepares;
  * an --eot the vocabulary lacks is named as that, with the tokenizer's file (it said "no document
    delimiter ...; name one with --eot" to a user who had named one).

usage: prepare_tokens_test.py   (under .venv-hf's python; skipped, exit 77, without tokenizers)
"""
import hashlib
import importlib.util
import json
import os
import re
import resource
import signal
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402
from tool_run_util import flag_help  # noqa: E402
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


def listing(folder):
    """The folder's files and their bytes' hashes: what "left as it was" compares."""
    hashes = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            hashes[name] = hashlib.sha256(f.read()).hexdigest()
    return hashes


def file_size_limit(limit_bytes):
    """A preexec_fn: no file of the child's may grow past limit_bytes (its writes fail with EFBIG,
    Python ignoring SIGXFSZ), a full disk without root or a mount."""
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))


def character_tokenizer(chars):
    """A character vocabulary as `zerotrain ckpt export --format hf` writes a char-level run's (a BPE
    without merges, pre-tokenizer or byte fallback), with <|endoftext|> added as the delimiter."""
    from tokenizers import Tokenizer
    return Tokenizer.from_str(json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "normalizer": None, "pre_tokenizer": None,
        "post_processor": None, "decoder": {"type": "Fuse"},
        "added_tokens": [{"id": len(chars), "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}],
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {c: i for i, c in enumerate(chars)}, "merges": []}}))


# The tokenizers library warns in each child forked after its threads ran (a preexec_fn forks):
# the tests' tokenizers run on one thread.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")



def signals_as_in_a_terminal():
    """A preexec_fn: SIGINT as a terminal delivers it. Started in the background of a script (ctest
    &), the tests inherit SIGINT ignored, which the tool rightly keeps ignoring."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


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

    # A .txt document past --max-document-chars (one call's text: the library aborted the process
    # on a 45 MB one, and such a document was refused) is encoded in pieces, cut where the tokens
    # stay the whole's: the shards are those of the document encoded whole, byte for byte.
    long_txt = os.path.join(work, "long.txt")
    with open(long_txt, "w") as f:
        f.write("\n".join(f"{line}  {k}\t{line.upper()}" for k, line in enumerate(CORPUS * 3)) + "\n")
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import document_pieces
    with open(long_txt) as f:
        long_text = f.read()
    cut = document_pieces.pieces(document_pieces.Cutter(tok), long_text, 60)
    chars = os.path.join(work, "pieces_chars", "tokenizer.json")
    os.makedirs(os.path.dirname(chars))
    character_tokenizer(sorted(set(long_text))).save(chars)
    for name, tokenizer in (("byte-level BPE", tok_a), ("characters", chars)):
        whole, pieced = os.path.join(work, f"whole_{name[0]}"), os.path.join(work, f"pieced_{name[0]}")
        p = prepare(whole, "--name", "doc", "--shard-tokens", "2000", long_txt, tokenizer=tokenizer)
        q = prepare(pieced, "--name", "doc", "--shard-tokens", "2000", "--max-document-chars", "60", long_txt,
                    tokenizer=tokenizer)
        bins = sorted(f for f in os.listdir(whole) if f.endswith(".bin")) if p.returncode == 0 else []
        same = bins and q.returncode == 0 and bins == sorted(f for f in os.listdir(pieced) if f.endswith(".bin")) and all(
            open(os.path.join(whole, b), "rb").read() == open(os.path.join(pieced, b), "rb").read() for b in bins)
        check(same and cut and len(cut) > 50 and "".join(cut) == long_text and
              all(len(c) <= 60 for c in cut), f"{name}: a document encoded in {len(cut or [])} pieces of 60 "
              f"characters or fewer gives the whole's shards ({q.stderr.strip()[-200:]})")

    # A tokenizer without a pre-tokenizer whose merges cross a space ("a b" one token, spaces
    # normalised to U+0120): no cut anywhere (its merges may also hang on context further back than
    # any window: "a" * 257 + " b" cut after the a's passed a 256-character check and changed a
    # token), so a long document is refused. A run of whitespace longer than the checks allowed
    # is passed in one step (5000 spaces: refused, each one a check, though a cut before them was sound).
    from tokenizers import Tokenizer
    crossing = Tokenizer.from_str(json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "pre_tokenizer": None, "post_processor": None,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u0120"},
        "decoder": {"type": "Fuse"}, "added_tokens": [],
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {"a": 0, "\u0120": 1, "b": 2, "a\u0120": 3, "a\u0120b": 4},
                  "merges": ["a \u0120", "a\u0120 b"]}}))
    # The same merges behind a pre-tokenizer that splits on whitespace, which the normaliser has
    # replaced: the raw text's boundary is none (a cut there took "a" + U+0120's merge apart).
    normalised = json.loads(crossing.to_str())
    normalised["pre_tokenizer"] = {"type": "WhitespaceSplit"}
    normalised["model"]["vocab"]["aa"] = 5
    normalised["model"]["merges"] = ["a a"] + normalised["model"]["merges"]
    behind = Tokenizer.from_str(json.dumps(normalised))
    check(document_pieces.pieces(document_pieces.Cutter(behind), "b" * 300 + " " + "a" * 301 + " " + "b" * 300,
                                 700) is None, "no cut where the normaliser took the pre-tokenizer's boundary away")
    # A vocabulary of single characters is cut at the piece's length, whitespace or not (CJK).
    chars_only = character_tokenizer(["a", "b", "c"])
    cut_chars = document_pieces.pieces(document_pieces.Cutter(chars_only), "abc" * 100, 50)
    check(cut_chars is not None and [len(c) for c in cut_chars] == [50] * 6,
          f"a character vocabulary cut without whitespace ({[len(c) for c in cut_chars or []]})")
    spaced = "word " * 800 + " " * 5000 + "word " * 400  # a cut at 6000 falls 2000 spaces into the run
    runs = document_pieces.pieces(document_pieces.Cutter(tok), spaced, 6000)
    check(document_pieces.pieces(document_pieces.Cutter(crossing), "a b" * 20, 10) is None and
          document_pieces.pieces(document_pieces.Cutter(crossing), "a bb " * 20, 12) is None and
          runs is not None and "".join(runs) == spaced,
          f"no cut where merges may cross spaces; a long whitespace run passed ({[len(r) for r in runs or []]})")

    def shard_tokens(folder):  # in the order written: the validation shard first
        names = sorted((f for f in os.listdir(folder) if f.endswith(".bin")), key=lambda f: f.split("_")[-1]) \
            if os.path.isdir(folder) else []
        return [t for n in names for t in read_shard(os.path.join(folder, n))]

    # A normaliser that strips a text's ends (Strip) beside a whitespace run longer than the window
    # at a cut: the window reaches past the run, so that cut is refused and the shards are the
    # whole's (both halves of a window inside the run read the same, and the piece after the cut
    # lost its 300 spaces).
    stripping = json.loads(tok.to_str())
    stripping["normalizer"] = {"type": "Strip", "strip_left": True, "strip_right": True}
    strip_tok = os.path.join(work, "strip", "tokenizer.json")
    os.makedirs(os.path.dirname(strip_tok))
    with open(strip_tok, "w") as f:
        json.dump(stripping, f)
    strip_doc = os.path.join(work, "strip_doc.txt")
    with open(strip_doc, "w") as f:
        f.write("word " * 60 + "end" + " " * 300 + "next")
    p = prepare(os.path.join(work, "strip_whole"), "--shard-tokens", "20", strip_doc, tokenizer=strip_tok)
    q = prepare(os.path.join(work, "strip_pieced"), "--shard-tokens", "20", "--max-document-chars", "400", strip_doc,
                tokenizer=strip_tok)
    whole_ids, pieced_ids = shard_tokens(os.path.join(work, "strip_whole")), shard_tokens(os.path.join(work, "strip_pieced"))
    check(p.returncode == 0 and (q.returncode == 2 or (whole_ids and pieced_ids == whole_ids)),
          f"a stripping normaliser: pieced shards the whole's, or refused ({len(whole_ids)} vs {len(pieced_ids)} "
          f"tokens; {q.stderr.strip()[-200:]})")
    # Truncation, padding and BPE dropout set in a tokenizer.json act on model inputs, not a corpus:
    # turned off and said (each document was cut to the truncation's length, or padded, in silence).
    batched = json.loads(tok.to_str())
    batched["truncation"] = {"direction": "Right", "max_length": 8, "strategy": "LongestFirst", "stride": 0}
    batched["padding"] = {"strategy": {"Fixed": 64}, "direction": "Right", "pad_to_multiple_of": None, "pad_id": 0,
                          "pad_type_id": 0, "pad_token": "<|endoftext|>"}
    batched["model"]["dropout"] = 0.5
    batched_tok = os.path.join(work, "batched", "tokenizer.json")
    os.makedirs(os.path.dirname(batched_tok))
    with open(batched_tok, "w") as f:
        json.dump(batched, f)
    p = prepare(os.path.join(work, "batched_out"), jsonl, tokenizer=batched_tok)
    q = prepare(os.path.join(work, "plain_out"), jsonl)
    check(p.returncode == 0 and q.returncode == 0 and
          shard_tokens(os.path.join(work, "batched_out")) == shard_tokens(os.path.join(work, "plain_out")) and
          "truncation to 8 tokens, padding, BPE dropout 0.5 turned off" in p.stdout,
          f"truncation, padding and dropout turned off and said ({p.stdout.strip()[:300]})")
    # A .txt document's line ends as written: CRLF and CR were read as LF.
    crlf = os.path.join(work, "crlf.txt")
    with open(crlf, "wb") as f:
        f.write(b"line one\r\nline two\rthree\r\n" * 20)
    p = prepare(os.path.join(work, "crlf_out"), crlf)
    ids = shard_tokens(os.path.join(work, "crlf_out"))
    check(p.returncode == 0 and tok.decode([t for t in ids if t != eot]) == "line one\r\nline two\rthree\r\n" * 20,
          f"a .txt document's CRLF and CR kept ({tok.decode(ids)[:60]!r})")

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
    deep = os.path.join(work, "deep.jsonl")  # nested past Python's stack: a traceback, exit 1
    with open(deep, "w") as f:
        f.write('{"text": "fine"}\n' + "[" * 100000 + "]" * 100000 + "\n")
    for what, args, named in (("--shard-tokens abc", ["--shard-tokens", "abc", jsonl], "--shard-tokens"),
                              ("an unpaired surrogate", [surrogate], "surrogate.jsonl:2"),
                              ("JSON nested 100000 deep", [deep], "deep.jsonl:2: JSON nested too deep"),
                              # the library aborted the process on a long one (45 MB: 'memory allocation failed')
                              ("a document past --max-document-chars", ["--max-document-chars", "3", surrogate],
                               "surrogate.jsonl:1: a document of 4 characters, past --max-document-chars 3")):
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
    # An --eot the tokenizer lacks: said as that, not as a delimiter the user should name.
    p = prepare(os.path.join(work, "bad"), "--eot", "<|nonexist|>", jsonl)
    lines = one_line(p)
    check(p.returncode == 2 and len(lines) == 1 and f"--eot <|nonexist|>: not a token in {tok_a}'s vocabulary"
          in lines[0] and "name one with --eot" not in lines[0] and not os.path.exists(os.path.join(work, "bad")),
          f"an --eot not in the vocabulary: one line naming the tokenizer file, exit 2 ({lines})")

    # --help: every flag's meaning, and the defaults of those that have one.
    p = subprocess.run([sys.executable, TOOL, "--help"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, COLUMNS="100"))
    helps = {flag: flag_help(p.stdout, flag) for flag in ("--tokenizer", "--out", "--name", "--shard-tokens",
                                                          "--jsonl-key", "--eot", "--max-document-chars",
                                                          "--no-progress")}
    defaults = {"--name": "(default: data)", "--shard-tokens": "(default: 100,000,000)",
                "--jsonl-key": "(default: text)", "--no-progress": "(default: a bar"}
    check(p.returncode == 0 and all(len(h.split()) > 3 for h in helps.values())
          and all(said in helps[flag] for flag, said in defaults.items()),
          f"--help gives each flag a meaning and its default ({helps})")

    # Refusals while the progress bar is drawn (text mode reads its \r as a line's end): the line
    # starts a row of its own, the last (no bar drawn after it). A corpus that fills only one shard
    # at the default --shard-tokens is refused naming a --shard-tokens that splits it.
    def refused_under_bar(folder, *args):
        p = subprocess.run([sys.executable, TOOL, "--tokenizer", tok_a, "--out", folder, *args], capture_output=True,
                           text=True, timeout=120)
        rows = p.stderr.rstrip("\n").split("\n")
        drawn = "tokenizing" in p.stderr or importlib.util.find_spec("tqdm") is None
        alone = [i for i, row in enumerate(rows) if "prepare_tokens" in row] == [len(rows) - 1]
        return p.returncode == 2 and drawn and alone and rows[-1].startswith("prepare_tokens: "), rows
    torn = os.path.join(work, "torn.jsonl")
    with open(torn, "w") as f:
        f.write(json.dumps({"text": CORPUS[0]}) + "\n{not json\n")
    ok, rows = refused_under_bar(os.path.join(work, "torn"), "--shard-tokens", "40", torn)
    check(ok and "torn.jsonl:2: not JSON" in rows[-1], f"a line refused mid-input starts its own line ({rows})")
    folder = os.path.join(work, "one_shard")
    ok, rows = refused_under_bar(folder, jsonl)
    suggested = re.search(r"--shard-tokens (\d+) \((\d+) shards\)", rows[-1])
    check(ok and "fill only one shard" in rows[-1] and suggested is not None and not os.path.exists(folder),
          f"one shard's worth: refused on a line of its own after the bar, naming a --shard-tokens ({rows})")
    if suggested:
        p = subprocess.run([sys.executable, TOOL, "--tokenizer", tok_a, "--out", folder, "--no-progress",
                            "--shard-tokens", suggested.group(1), jsonl], capture_output=True, text=True, timeout=120)
        check(p.returncode == 0 and f" {suggested.group(2)} shards in " in p.stdout,
              f"the --shard-tokens the refusal names splits the corpus ({p.stdout.strip()} {p.stderr.strip()})")

    # A write that fails: the file size limit stops the first shard (1,104 bytes: the header and 40
    # uint16 tokens), or only the tokenizer.json copied after every shard. The folder holds another
    # tokenizer's set, which must stay whole.
    tokenizer_bytes = os.path.getsize(tok_a)
    for what, limit, named in (("a shard", 1100, "data_val_000000.bin"),
                               ("the tokenizer's copy", 2000, "tokenizer.json")):
        folder = os.path.join(work, "full_at_" + named.split(".")[0])
        q = prepare(folder, jsonl, tokenizer=tok_b)
        before = listing(folder)
        p = subprocess.run([sys.executable, TOOL, "--tokenizer", tok_a, "--out", folder, "--no-progress",
                            "--shard-tokens", "40", jsonl], capture_output=True, text=True, timeout=120,
                           preexec_fn=file_size_limit(limit))
        lines = one_line(p)
        check(q.returncode == 0 and tokenizer_bytes > limit and p.returncode == 1 and len(lines) == 1
              and os.path.join(folder, named) in lines[0] and "cannot be written" in lines[0]
              and listing(folder) == before,
              f"a write failing at {what}: one line naming it, exit 1, the folder as it was ({lines})")
    # The renames' order, seen through os.replace and os.remove: another tokenizer's files out first,
    # then the shards in, tokenizer.json the last.
    folder = os.path.join(work, "order")
    q = prepare(folder, jsonl, tokenizer=tok_b)
    watch = ("import json, os, sys; sys.path.insert(0, sys.argv[1]); import prepare_tokens; seen = []\n"
             "for name in ('replace', 'remove'):\n"
             "    def wrap(*a, real=getattr(os, name), name=name): seen.append((name, os.path.basename(a[-1]))); "
             "return real(*a)\n"
             "    setattr(os, name, wrap)\n"
             "prepare_tokens.main(sys.argv[2:]); print(json.dumps(seen))")
    p = subprocess.run([sys.executable, "-c", watch, os.path.join(ROOT, "tools"), "--tokenizer", tok_a, "--out", folder,
                        "--no-progress", "--shard-tokens", "40", jsonl], capture_output=True, text=True, timeout=120)
    seen = [tuple(step) for step in json.loads(p.stdout.splitlines()[-1])] if p.returncode == 0 else []
    renamed = [target for step, target in seen if step == "replace"]
    check(q.returncode == 0 and seen[:1] == [("remove", "tokenizer.json")] and renamed[-2:] ==
          ["tokenizer_config.json", "tokenizer.json"] and all(t.endswith(".bin") for t in renamed[:-2]) and
          len(renamed) > 3, f"earlier tokenizer out, shards in, tokenizer.json last ({seen} {p.stderr.strip()[-300:]})")

    # Staging files a killed run left: the set's own removed, other names kept.
    folder = os.path.join(work, "stale")
    q = prepare(folder, "--name", "set", jsonl)
    own = ["set_train_000007.bin.tmp", "set_val_000000.bin.tmp", "set_tokenizer.json.tmp"]
    others = ["other_train_000001.bin.tmp", "set_train_1.bin.tmp", "notes.tmp"]
    for name in own + others:
        with open(os.path.join(folder, name), "w") as f:
            f.write("left")
    p = prepare(folder, "--name", "set", jsonl)
    left = sorted(n for n in os.listdir(folder) if n.endswith(".tmp"))
    check(q.returncode == 0 and p.returncode == 0 and left == sorted(others) and "removed 3 staging files" in p.stdout,
          f"a killed run's staging files of the set removed, other names kept ({left}; {p.stdout.strip()[-200:]})")

    # A folder another output's cut left marked (.zt-incomplete-output: zerotrain prepare's, or another
    # set's): a run of this set is refused, the mark kept (its commit took the mark away, and zerotrain
    # then trained on the other output's mixed files); this set's own mark is taken away by its run.
    folder = os.path.join(work, "marked")
    q = prepare(folder, "--name", "a", jsonl)
    marker = os.path.join(folder, ".zt-incomplete-output")
    for text, refused in (("an output being replaced here was cut before it was whole: run its command again\n",
                           "a zerotrain prepare or ckpt export"),
                          ("prepare_tokens --name a: an output being replaced here was cut\n", "prepare_tokens --name a")):
        with open(marker, "w") as f:
            f.write(text)
        p = prepare(folder, "--name", "b", jsonl)
        lines = one_line(p)
        check(q.returncode == 0 and p.returncode == 2 and len(lines) == 1 and f"{marker} is there" in lines[0] and
              f"({refused})" in lines[0] and os.path.exists(marker) and
              not any(n.startswith("b_") for n in os.listdir(folder)),
              f"another output's mark ({refused}): a run of set b is refused, the mark kept ({lines})")
    p = prepare(folder, "--name", "a", jsonl)
    check(p.returncode == 0 and not os.path.exists(marker), f"a set's own mark is taken away by its run ({one_line(p)})")

    # SIGINT and SIGTERM mid-run, once it has staged a shard (a long input; a 40-token shard a few
    # documents): ended by the signal, one line, nothing staged left, the earlier set whole.
    long_input = os.path.join(work, "long.jsonl")
    with open(long_input, "w") as f:
        f.writelines(json.dumps({"text": f"{d} {i}"}) + "\n" for i, d in enumerate(CORPUS * 1000))
    folder = os.path.join(work, "stopped")
    q = prepare(folder, jsonl)
    before = listing(folder)
    for sig in (signal.SIGINT, signal.SIGTERM):
        p = subprocess.Popen([sys.executable, TOOL, "--tokenizer", tok_a, "--out", folder, "--no-progress",
                              "--shard-tokens", "40", long_input], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, preexec_fn=signals_as_in_a_terminal)
        deadline = time.monotonic() + 60
        while (p.poll() is None and time.monotonic() < deadline
               and not any(n.endswith(".tmp") for n in os.listdir(folder))):
            time.sleep(0.005)
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
        lines = [line for line in err.splitlines() if line.strip()]
        check(q.returncode == 0 and p.returncode == -sig and len(lines) == 1 and f"stopped by {sig.name}" in lines[0]
              and listing(folder) == before,
              f"{sig.name} mid-run: ended by it, one line, no staging file, the folder as it was "
              f"(exit {p.returncode}, {lines[-3:]})")

    # A character vocabulary (as zerotrain exports a char-level run's) drops characters it has no
    # token for: counted in one line; a byte-level BPE has a token for every byte.
    chars = sorted(set("".join(CORPUS) + "\n"))
    char_tok = os.path.join(work, "chars", "tokenizer.json")
    os.makedirs(os.path.dirname(char_tok))
    character_tokenizer(chars).save(char_tok)
    accents = os.path.join(work, "accents.txt")
    text = "the fox says ça va, naïve café \U0001F600\n" * 3
    with open(accents, "w", encoding="utf-8") as f:
        f.write(text)
    dropped = sum(c not in chars for c in text)  # ç, ï, é and the emoji, three times
    p = prepare(os.path.join(work, "chars_out"), "--shard-tokens", "20", accents, tokenizer=char_tok)
    lines = one_line(p)
    check(p.returncode == 0 and len(lines) == 1 and f"{dropped} of the corpus's {len(text)} characters have no token"
          in lines[0] and "U+00E7 'ç'" in lines[0] and "accents.txt" in lines[0]
          and f"{1 + len(text) - dropped} tokens" in p.stdout,
          f"a character vocabulary: the {dropped} characters it drops counted in one line "
          f"({lines}; {p.stdout.strip()})")
    p = prepare(os.path.join(work, "bytes_out"), "--shard-tokens", "20", accents)
    check(p.returncode == 0 and not one_line(p), f"a byte-level BPE: no character left out ({one_line(p)})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
