#!/usr/bin/env python3
"""tools/prepare_choices.py: HellaSwag-style JSONL into llm.c's eval file with a tokenizer.json
(a byte-level BPE trained here on tinyshakespeare; nothing downloaded):

  * each example's words as llm.c's write_evalfile lays them out, the context as the tokenizer
    encodes it and each ending with a space before it (llm.c's hellaswag.py rendering), a label
    given as text read as its index; with a template that puts a BOS before a text (and an EOS
    after it), the context starts with the BOS, as `zerotrain sample` prompts, and has no EOS;
  * `zerotrain eval --from` a random GPT2LMHeadModel scores the file as llm.c's hellaswag.py's
    acc_norm does with transformers (each ending's mean loss given its context, the lowest the
    answer);
  * a line without endings, a label past them (or "²", a digit to str.isdigit that int() refuses:
    it was a ValueError traceback) and a missing input are refused in one line, leaving no output
    file; so is an --out that is an input or an existing file of another kind (an earlier choice
    file is replaced); a key the example lacks (--label-key nope) is named as missing, with the line
    and the keys the example has (it said "nope" was no index of one of its endings);
  * --help gives every flag a meaning and its default;
  * a character that a character vocabulary (as zerotrain exports a char-level run's) has no token
    for, in a context or an ending, is refused in one line naming the example, the field and the
    character (it was dropped silently, and eval scored the altered text); a byte-level BPE's text
    of accents, emoji, spaces and newlines passes, also with RoBERTa's trimmed offsets;
  * SIGINT and SIGTERM end the run by the signal in one line, no traceback, the earlier file whole
    and no temporary file left; so does a write that fails (a file size limit standing in for a full
    disk), in one line, exit 1.

usage: prepare_choices_test.py PATH/TO/zerotrain   (run with .venv-hf's python)
"""
import json
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402
from shared_corpus import require_tiny_shakespeare  # noqa: E402
from hf_env import require_hf, train_byte_level_bpe  # noqa: E402
from prepare_tokens_test import character_tokenizer  # noqa: E402
from tool_run_util import flag_help  # noqa: E402

require_hf("torch", "transformers", "tokenizers")
import torch  # noqa: E402
import transformers  # noqa: E402

TEXT = require_tiny_shakespeare()  # exits 77 (skipped) where the shared corpus is absent
SCRIPT = os.path.join(ROOT, "tools", "prepare_choices.py")
EXAMPLES = [
    {"ctx": "ROMEO: But soft, what light", "endings": ["through yonder window breaks.", "is the sun.",
                                                       "my lord, I pray you.", "and the night."], "label": 0},
    {"ctx": "JULIET: O Romeo, Romeo,", "endings": ["wherefore art thou Romeo?", "good night.",
                                                   "the king is dead.", "come hither."], "label": "0"},
    {"ctx": "First Citizen: Before we proceed any further,", "endings": ["hear me speak.", "all: speak, speak.",
                                                                          "you are all resolved.", "let us kill him."],
     "label": 2},
    {"ctx": "KING HENRY:", "endings": ["Once more unto the breach", "What say you?", "Ay, my lord."], "label": 1},
]


def read_choice_file(path):
    with open(path, "rb") as f:
        header = struct.unpack("<256i", f.read(1024))
        body = f.read()
    words = list(struct.unpack(f"<{len(body) // 2}H", body))
    out, at = [], 0
    for _ in range(header[2]):
        start, nbytes, index, label, n = words[at:at + 5]
        at += 5
        ctx = words[at + 1:at + 1 + words[at]]
        at += 1 + len(ctx)
        ends = []
        for _ in range(n):
            ends.append(words[at + 1:at + 1 + words[at]])
            at += 1 + len(ends[-1])
        out.append({"start": start, "bytes": nbytes, "index": index, "label": label, "ctx": ctx, "endings": ends})
    return header, out, at == len(words)


def holds_open(pid, path):
    """Whether process `pid` has `path` open (Linux's /proc); False once it has ended."""
    try:
        fds = f"/proc/{pid}/fd"
        return any(os.path.realpath(os.path.join(fds, n)) == os.path.realpath(path) for n in os.listdir(fds))
    except OSError:
        return False


# The tokenizers library warns in each child forked after its threads ran (a preexec_fn forks):
# the tests' tokenizers run on one thread.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def signals_as_in_a_terminal():
    """A preexec_fn: SIGINT as a terminal delivers it. Started in the background of a script (ctest
    &), the tests inherit SIGINT ignored, which the tool rightly keeps ignoring."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def main():
    binary = sys.argv[1]
    checks = Checks()
    check = checks.check
    work = checks.work_folder("zt_choices_")
    with open(TEXT, encoding="utf-8") as f:
        docs = [d for d in f.read().split("\n\n") if d.strip()]
    tok = train_byte_level_bpe(docs, 400)
    tok_path = os.path.join(work, "tokenizer.json")
    tok.save(tok_path)
    jsonl = os.path.join(work, "hellaswag_val.jsonl")
    with open(jsonl, "w") as f:
        for ex in EXAMPLES:
            f.write(json.dumps(ex) + "\n\n")
    out = os.path.join(work, "choices.bin")
    p = subprocess.run([sys.executable, SCRIPT, "--tokenizer", tok_path, "--out", out, jsonl], capture_output=True,
                       text=True, timeout=120)
    if not check(p.returncode == 0 and os.path.exists(out), f"prepare_choices writes the file ({p.stdout}{p.stderr})"):
        return checks.finish()
    header, got, whole = read_choice_file(out)
    want = [{"ctx": tok.encode(ex["ctx"]).ids, "endings": [tok.encode(" " + e).ids for e in ex["endings"]],
             "label": int(ex["label"])} for ex in EXAMPLES]
    check(header[:4] == (20240522, 1, 4, max(g["bytes"] for g in got)) and whole,
          f"llm.c's header (magic, version, count, longest example) and nothing after the examples ({header[:4]})")
    check(all(g["start"] == 65535 and g["index"] == i and
              g["bytes"] == 2 * (6 + len(g["ctx"]) + sum(1 + len(e) for e in g["endings"])) for i, g in enumerate(got)),
          "each example starts with 65535, its bytes and its index")
    check([{k: g[k] for k in ("ctx", "endings", "label")} for g in got] == want,
          "the context as the tokenizer encodes it, each ending after a space, the label (text or number) as its index")

    # A Llama-style template (a BOS before each text; an EOS after it, which a context must not end
    # with): the contexts start with the BOS, the endings carry neither.
    from tokenizers import processors
    bos = tok.token_to_id("<|endoftext|>")
    templated = tok.__class__.from_str(tok.to_str())
    templated.post_processor = processors.TemplateProcessing(
        single="<|endoftext|> $A <|endoftext|>", special_tokens=[("<|endoftext|>", bos)])
    templated_path = os.path.join(work, "templated.json")
    templated.save(templated_path)
    templated_out = os.path.join(work, "templated.bin")
    p = subprocess.run([sys.executable, SCRIPT, "--tokenizer", templated_path, "--out", templated_out, jsonl],
                       capture_output=True, text=True, timeout=120)
    got_templated = read_choice_file(templated_out)[1] if p.returncode == 0 else []
    check([{k: g[k] for k in ("ctx", "endings")} for g in got_templated] ==
          [{"ctx": [bos] + w["ctx"], "endings": w["endings"]} for w in want],
          f"a template's BOS starts each context, as a sample's prompt; no EOS after it ({p.stderr.strip()[-200:]})")

    # zerotrain eval on a random GPT-2 against llm.c's acc_norm computed with transformers.
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=400, n_positions=64, n_embd=32,
                                                                 n_layer=2, n_head=2)).eval()
    folder = os.path.join(work, "gpt2")
    model.save_pretrained(folder, safe_serialization=True)
    shutil.copy(tok_path, folder)
    correct = 0
    with torch.no_grad():
        for w in want:
            means = []
            for e in w["endings"]:
                seq = torch.tensor([w["ctx"] + e])
                losses = torch.nn.functional.cross_entropy(model(seq).logits[0, :-1].double(), seq[0, 1:],
                                                           reduction="none")
                means.append(losses[len(w["ctx"]) - 1:].mean().item())
            correct += min(range(len(means)), key=lambda k: means[k]) == w["label"]
    p = subprocess.run([binary, "eval", "--from", folder, "--choices", out], capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 0 and f"{out}: {correct}/4 correct" in p.stdout,
          f"zerotrain eval scores {correct}/4 as llm.c's acc_norm on transformers ({p.stdout.strip()} {p.stderr.strip()})")

    for what, line in (("no endings", {"ctx": "A man", "label": 0}),
                       ("a label past the endings", {"ctx": "A man", "endings": ["a", "b"], "label": 2}),
                       ("a label '²'", {"ctx": "a", "endings": ["b", "c"], "label": "²"}),
                       # it said the list was no list of two or more texts
                       ("an empty ending", {"ctx": "a", "endings": ["b", ""], "label": 0}),
                       # written as U+FFFD: the example scored was not its text
                       ("an unpaired surrogate", {"ctx": "a\ud800", "endings": ["b", "c"], "label": 0})):
        bad = os.path.join(work, "bad.jsonl")
        with open(bad, "w") as f:
            f.write(json.dumps(EXAMPLES[0]) + "\n" + json.dumps(line) + "\n")
        bad_out = os.path.join(work, "bad.bin")
        p = subprocess.run([sys.executable, SCRIPT, "--tokenizer", tok_path, "--out", bad_out, bad],
                           capture_output=True, text=True, timeout=120)
        lines = p.stderr.strip().splitlines()
        check(p.returncode == 2 and len(lines) == 1 and f"{bad}:2" in lines[0] and not os.path.exists(bad_out)
              and ("endings" not in line or '"label" is not the index of one of its 2 endings' in lines[0]
                   or 'ending 1 of "endings" is empty' in lines[0] or "unpaired surrogate" in lines[0]),
              f"{what}: refused in one line naming the line, no file written ({lines})")
    # A key the example lacks (a --*-key naming none of its keys): said as missing, with its keys.
    for flag in ("--label-key", "--endings-key", "--context-key"):
        bad_out = os.path.join(work, "bad.bin")
        p = subprocess.run([sys.executable, SCRIPT, "--tokenizer", tok_path, "--out", bad_out, flag, "nope", jsonl],
                           capture_output=True, text=True, timeout=120)
        lines = p.stderr.strip().splitlines()
        check(p.returncode == 2 and lines == [f'prepare_choices: {jsonl}:1: the example has no key "nope" ({flag}); '
                                              'its keys: "ctx", "endings", "label"'] and not os.path.exists(bad_out),
              f"{flag} nope: the key named as missing from line 1, with the keys it has ({lines})")
    p = subprocess.run([sys.executable, SCRIPT, "--help"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, COLUMNS="100"))
    helps = {flag: flag_help(p.stdout, flag) for flag in ("--tokenizer", "--out", "--context-key", "--endings-key",
                                                          "--label-key")}
    check(p.returncode == 0 and all(len(h.split()) > 3 for h in helps.values())
          and all(f"(default: {key})" in helps[f"--{what}-key"]
                  for what, key in (("context", "ctx"), ("endings", "endings"), ("label", "label"))),
          f"--help gives each flag a meaning and its default ({helps})")
    p = subprocess.run([sys.executable, SCRIPT, "--tokenizer", tok_path, "--out", os.path.join(work, "x.bin"),
                        os.path.join(work, "missing.jsonl")], capture_output=True, text=True, timeout=60)
    lines = p.stderr.strip().splitlines()
    check(p.returncode != 0 and len(lines) == 1 and "missing.jsonl" in lines[0],
          f"a missing input is refused in one line ({lines})")
    unwritable = os.path.join(work, "no_such_dir", "x.bin")
    p = subprocess.run([sys.executable, SCRIPT, "--tokenizer", tok_path, "--out", unwritable, jsonl],
                       capture_output=True, text=True, timeout=60)
    lines = p.stderr.strip().splitlines()
    check(p.returncode != 0 and len(lines) == 1 and unwritable in lines[0],
          f"an --out that cannot be written is refused in one line ({lines})")
    # --out over an input, or over an existing file of another kind (a token shard): refused in one
    # line, the file untouched; over an earlier choice file: replaced.
    shard = os.path.join(work, "val_000000.bin")
    with open(shard, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, 3, *([0] * 253)) + struct.pack("<3H", 1, 2, 3))
    for what, target, said in (("the JSONL input", jsonl, "is an input"), ("the tokenizer", tok_path, "is an input"),
                               ("a token shard", shard, "is not a multiple-choice file")):
        before = open(target, "rb").read()
        p = subprocess.run([sys.executable, SCRIPT, "--tokenizer", tok_path, "--out", target, jsonl],
                           capture_output=True, text=True, timeout=60)
        lines = p.stderr.strip().splitlines()
        check(p.returncode != 0 and len(lines) == 1 and said in lines[0] and open(target, "rb").read() == before,
              f"--out {what}: refused in one line, the file untouched ({lines})")
    fifo = os.path.join(work, "out.fifo")
    os.mkfifo(fifo)
    p = subprocess.run([sys.executable, SCRIPT, "--tokenizer", tok_path, "--out", fifo, jsonl], capture_output=True,
                       text=True, timeout=60)
    lines = p.stderr.strip().splitlines()
    check(p.returncode != 0 and len(lines) == 1 and "not a regular file" in lines[0],
          f"--out a FIFO: refused in one line, not read ({lines})")
    p = subprocess.run([sys.executable, SCRIPT, "--tokenizer", tok_path, "--out", out, jsonl], capture_output=True,
                       text=True, timeout=60)
    check(p.returncode == 0, f"--out an earlier choice file replaces it ({p.stderr.strip()[-200:]})")

    # A character vocabulary drops what it has no token for: refused, naming the example, the field
    # and the character.
    chars = sorted(set("".join(d for d in docs[:50])) | {" "})
    char_path = os.path.join(work, "chars.json")
    character_tokenizer(chars).save(char_path)
    accents = {"ctx": "Ça va, naïve café", "endings": ["très bien", "mal"], "label": 0}
    plain = {"ctx": "ROMEO: But soft", "endings": ["what light", "très bien"], "label": 0}
    for what, example, said in (("a context", accents, '"ctx": character U+00C7 \'Ç\' (at character 0)'),
                                ("an ending", plain, '"endings"[1]: character U+00E8 \'è\' (at character 2)')):
        bad = os.path.join(work, "unencoded.jsonl")
        with open(bad, "w", encoding="utf-8") as f:
            f.write(json.dumps(EXAMPLES[0]) + "\n" + json.dumps(example, ensure_ascii=False) + "\n")
        bad_out = os.path.join(work, "unencoded.bin")
        p = subprocess.run([sys.executable, SCRIPT, "--tokenizer", char_path, "--out", bad_out, bad],
                           capture_output=True, text=True, timeout=60)
        lines = p.stderr.strip().splitlines()
        check(p.returncode == 2 and len(lines) == 1 and f"{bad}:2: {said}" in lines[0] and not os.path.exists(bad_out),
              f"{what} with characters a character vocabulary lacks: refused in one line ({lines})")
    # A byte-level BPE has a token for every byte: accents, an emoji, runs of spaces and newlines pass,
    # also where a post-processor trims the spaces out of the tokens' spans (RoBERTa's).
    from tokenizers import processors
    roberta = tok.__class__.from_str(tok.to_str())
    roberta.post_processor = processors.RobertaProcessing(("<|endoftext|>", bos), ("<|endoftext|>", bos),
                                                          trim_offsets=True)
    roberta_path = os.path.join(work, "roberta.json")
    roberta.save(roberta_path)
    unicode_example = {"ctx": "Ça va,  naïve\n\ncafé \U0001F600 <|endoftext|> x",
                       "endings": ["  très  bien\n", "mal"], "label": 0}
    wide = os.path.join(work, "unicode.jsonl")
    with open(wide, "w", encoding="utf-8") as f:
        f.write(json.dumps(unicode_example) + "\n")
    for what, path, prefix in (("a byte-level BPE", tok_path, []),
                               ("one with RoBERTa's trimmed offsets (and its <s> before a text)", roberta_path, [bos])):
        wide_out = os.path.join(work, "unicode.bin")
        p = subprocess.run([sys.executable, SCRIPT, "--tokenizer", path, "--out", wide_out, wide],
                           capture_output=True, text=True, timeout=60)
        got = read_choice_file(wide_out)[1] if p.returncode == 0 else []
        want_wide = (prefix + tok.encode(unicode_example["ctx"]).ids,
                     [tok.encode(" " + e).ids for e in unicode_example["endings"]])
        check([(g["ctx"], g["endings"]) for g in got] == [want_wide],
              f"{what}: accents, an emoji, spaces and newlines pass, as the tokenizer encodes them "
              f"({p.stderr.strip()[-300:]})")

    # A write that fails (RLIMIT_FSIZE: a full disk without root): one line, exit 1, the earlier file whole.
    before = open(out, "rb").read()
    p = subprocess.run([sys.executable, SCRIPT, "--tokenizer", tok_path, "--out", out, jsonl], capture_output=True,
                       text=True, timeout=60,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (1030, 1030)))
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 1 and len(lines) == 1 and f"{out}: cannot be written (File too large)" in lines[0]
          and open(out, "rb").read() == before and not os.path.exists(out + ".tmp"),
          f"a write that fails: one line, exit 1, the earlier file whole ({lines})")

    # SIGINT and SIGTERM once the run reads its examples (its input open: the handlers are in place).
    many = os.path.join(work, "many.jsonl")
    with open(many, "w") as f:
        f.writelines(json.dumps(dict(EXAMPLES[0], ctx=f"{EXAMPLES[0]['ctx']} {i}")) + "\n" for i in range(20000))
    before = open(out, "rb").read()
    for sig in (signal.SIGINT, signal.SIGTERM):
        p = subprocess.Popen([sys.executable, SCRIPT, "--tokenizer", tok_path, "--out", out, many],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=signals_as_in_a_terminal)
        deadline = time.monotonic() + 60
        while p.poll() is None and time.monotonic() < deadline and not holds_open(p.pid, many):
            time.sleep(0.005)
        p.send_signal(sig)
        _, err = p.communicate(timeout=60)
        lines = err.strip().splitlines()
        check(p.returncode == -sig and len(lines) == 1 and f"stopped by {sig.name}" in lines[0]
              and open(out, "rb").read() == before and not os.path.exists(out + ".tmp"),
              f"{sig.name}: ended by it in one line, the earlier file whole (exit {p.returncode}, {lines[-3:]})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
