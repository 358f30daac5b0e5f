#!/usr/bin/env python3
"""Multiple-choice examples (HellaSwag's JSONL: "ctx", "endings", "label") into llm.c's eval file
format, which `data.choice_file` and `zerotrain eval --choices` read, with a Hugging Face
tokenizer.json: the context as the tokenizer encodes a prompt (the tokens its template puts before a
text, such as a Llama-style <|begin_of_text|>, then the text's: what `zerotrain sample` feeds a
model; tokens the template puts after a text are left out), each ending with a space before it (as
llm.c's dev/data/hellaswag.py renders them for GPT-2's tokenizer, so a word of the ending is one
of the tokenizer's space-led words). The file: a header of 256 int32 (magic 20240522, version 1,
the number of examples, the longest example's bytes), then each example as uint16 words (65535,
its bytes, its index, the label, the number of endings, the context's length and tokens, each
ending's length and tokens). uint16 tokens, so the tokenizer's vocabulary must be below 65,535
(GPT-2's is; Llama 3's is not). zerotrain reads 2 or more endings an example and any number of
examples (indices past 65,535 wrap, as uint16 words do); llm.c's own loader takes exactly 4 endings
and fewer than 65,536 examples, so keep to those for a file it also reads. A character the tokenizer
has no token for (a character vocabulary's, without byte fallback, would drop it) is refused, naming
the example, its field and the character: the example as scored would not be its text. Written to
a temporary name and renamed, so a failure, a Ctrl-C or a kill leaves no partial file (a stop: one
line, the process ending by the signal); an --out that is an input, or an existing file other than
an earlier choice file, is refused (a typo loses nothing). Needs the `tokenizers` package
(tools/setup.sh installs it in .venv-hf); nothing is downloaded: get hellaswag_val.jsonl yourself.

usage: prepare_choices.py --tokenizer tokenizer.json --out hellaswag_val.bin [--context-key ctx]
                          [--endings-key endings] [--label-key label] INPUT.jsonl
"""
import functools
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenizer_outputs  # noqa: E402
from result_paths import OneLineParser  # noqa: E402
from tokenizer_outputs import (Interrupted, StopSignals, characters_left_out, end_by_signal,  # noqa: E402
                               fail_on_write_error)

TOOL = "prepare_choices"  # what its lines start with
fail = functools.partial(tokenizer_outputs.fail, TOOL)

MAGIC, VERSION, START = 20240522, 1, 65535


def refuse_characters_left_out(where, field, text, encoding, tok, alone, led_by_space=False):
    """An example whose text would lose characters to the tokenizer is refused (the example scored
    would not be its text; `zerotrain sample` refuses such a prompt): one line naming the example,
    the field and the first character. `led_by_space`: `text` is an ending after its space."""
    count, first = characters_left_out(tok, text, encoding, alone)
    if not count:
        return
    what = ("the space put before each ending" if led_by_space and first == 0
            else f"character U+{ord(text[first]):04X} {text[first]!r} (at character {first - led_by_space})")
    fail(f"{where}: {field}: {what} has no token in the tokenizer, which would leave it out of the example "
         "(a tokenizer without byte fallback, such as a character vocabulary); remove it or use another tokenizer")


def template_prefix(tok, text):
    """The tokens the tokenizer's post-processor puts before `text` (none for GPT-2's; a BOS for a
    Llama-style template), as zerotrain's Tokenizer::encode_prompt prefixes a prompt."""
    with_special = tok.encode(text).ids
    plain = tok.encode(text, add_special_tokens=False).ids
    for k in range(len(with_special) - len(plain) + 1):
        if with_special[k:k + len(plain)] == plain:
            return with_special[:k]
    return []


def examples(path, keys):
    """Yields (line number, context, endings, label) for each non-blank line."""
    context_key, endings_key, label_key = keys
    with open(path, encoding="utf-8") as f:
        try:
            lines = list(f)
        except UnicodeDecodeError as e:
            fail(f"{path}: not UTF-8 text (byte {e.start})")
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except json.JSONDecodeError as e:
                fail(f"{path}:{n}: not JSON ({e.msg})")
            except RecursionError:  # nested past Python's stack (a traceback, exit 1)
                fail(f"{path}:{n}: JSON nested too deep to be an example")
            if not isinstance(doc, dict):
                fail(f"{path}:{n}: not a JSON object")
            for key, flag in ((context_key, "--context-key"), (endings_key, "--endings-key"),
                              (label_key, "--label-key")):
                if key not in doc:
                    fail(f"{path}:{n}: the example has no key \"{key}\" ({flag}); its keys: "
                         + (", ".join(f'"{k}"' for k in doc) or "none"))
            context, endings, label = doc[context_key], doc[endings_key], doc[label_key]
            if not isinstance(context, str) or not context:
                fail(f"{path}:{n}: no text under \"{context_key}\" (--context-key)")
            if not isinstance(endings, list) or len(endings) < 2 or not all(isinstance(e, str) for e in endings):
                fail(f"{path}:{n}: \"{endings_key}\" is not a list of two or more texts (--endings-key)")
            empty = [i for i, e in enumerate(endings) if not e]
            if empty:  # a completion of nothing: a hole in the data, not an answer to score
                fail(f"{path}:{n}: ending {empty[0]} of \"{endings_key}\" is empty (--endings-key)")
            for text in (context, *endings):  # a \ud800 escape alone is JSON but no text: encoded as U+FFFD
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as e:
                    fail(f"{path}:{n}: an example's text holds an unpaired surrogate "
                         f"(\\u{ord(e.object[e.start]):04x}), which no UTF-8 text can")
            # HellaSwag's test split keeps labels as text; ASCII digits alone ("²" is a digit to
            # isdigit, and int() refuses it).
            if isinstance(label, str) and label.isascii() and label.isdigit():
                label = int(label)
            if not isinstance(label, int) or isinstance(label, bool) or not 0 <= label < len(endings):
                fail(f"{path}:{n}: \"{label_key}\" is not the index of one of its {len(endings)} endings (--label-key)")
            yield n, context, endings, label


def example_words(index, label, context, endings):
    words = [START, 0, index % 65536, label, len(endings), len(context), *context]
    for ending in endings:
        words += [len(ending), *ending]
    words[1] = 2 * len(words)
    return words


def file_bytes(words, count, longest):
    """The file: the header (magic, version, the count, the longest example's bytes), then the
    examples' words (example_words each, joined)."""
    return struct.pack("<256i", MAGIC, VERSION, count, longest, *([0] * 252)) + struct.pack(f"<{len(words)}H", *words)


def refuse_out_of_another_kind(out, inputs):
    """--out is replaced whole: refused where it is an input, or an existing file of another kind (a
    token shard, a tokenizer, the JSONL itself under another name), so a typo loses nothing. An
    earlier choice file (llm.c's eval magic) is replaced."""
    if os.path.isdir(out):
        fail(f"--out {out}: a folder, not a file name")
    if not os.path.lexists(out):
        return
    if not os.path.isfile(out):  # a FIFO would block the read below; a device is nobody's output
        fail(f"--out {out}: exists and is not a regular file")
    for path in inputs:
        if os.path.samefile(out, path):
            fail(f"--out {out} is an input of this command ({path}): give another --out")
    try:
        with open(out, "rb") as f:
            head = f.read(4)
    except OSError as e:
        fail(f"--out {out}: cannot be read to tell what it is ({e.strerror})")
    if len(head) < 4 or struct.unpack("<i", head)[0] != MAGIC:
        fail(f"--out {out} exists and is not a multiple-choice file (the command would replace it); "
             "remove it or choose another --out")


def main():
    # From the first stop on, a second Ctrl-C waits: it must not cut the temporary file's removal.
    StopSignals("; --out is left as it was", hold_after_stop=True)
    try:
        run()
    except Interrupted as e:
        end_by_signal(TOOL, e)


def run():
    parser = OneLineParser("prepare_choices", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer", required=True, help="a Hugging Face tokenizer.json (required)")
    parser.add_argument("--out", required=True,
                        help="the eval file to write, e.g. hellaswag_val.bin; replaces an earlier one (required)")
    parser.add_argument("--context-key", default="ctx",
                        help="the key of each example's context text (default: %(default)s)")
    parser.add_argument("--endings-key", default="endings",
                        help="the key of each example's list of candidate endings (default: %(default)s)")
    parser.add_argument("--label-key", default="label",
                        help="the key of the correct ending's index, a number or its digits (default: %(default)s)")
    parser.add_argument("input", metavar="INPUT.jsonl", help="the examples, one JSON object a line")
    args = parser.parse_args()
    for path in (args.tokenizer, args.input):
        if not os.path.isfile(path):
            fail(f"{path}: " + ("a folder, not a file" if os.path.isdir(path) else
                                "not a regular file (a FIFO or a device)" if os.path.exists(path) else "no such file"))
    refuse_out_of_another_kind(args.out, (args.tokenizer, args.input))
    try:
        from tokenizers import Tokenizer
    except ImportError:
        fail("the `tokenizers` package is not installed (tools/setup.sh puts it in .venv-hf)")
    try:
        tok = Tokenizer.from_file(args.tokenizer)
    except Exception as e:  # the library's own error types vary by version
        fail(f"{args.tokenizer}: not a tokenizer.json ({str(e).splitlines()[0]})")
    if tok.get_vocab_size() >= START:
        fail(f"{args.tokenizer}: {tok.get_vocab_size()} tokens, too many for the format's uint16 tokens (below {START})")

    alone = {}  # whether each character met encodes to no token alone (characters_left_out)
    words, count, longest = [], 0, 0
    for n, context, endings, label in examples(args.input, (args.context_key, args.endings_key, args.label_key)):
        where = f"{args.input}:{n}"
        encoding = tok.encode(context, add_special_tokens=False)
        refuse_characters_left_out(where, f'"{args.context_key}"', context, encoding, tok, alone)
        ctx = template_prefix(tok, context) + encoding.ids
        ends = []
        for k, e in enumerate(endings):
            encoding = tok.encode(" " + e, add_special_tokens=False)
            refuse_characters_left_out(where, f'"{args.endings_key}"[{k}]', " " + e, encoding, tok, alone,
                                       led_by_space=True)
            ends.append(encoding.ids)
        if not ctx or not all(ends):
            fail(f"{args.input}:{n}: the context or an ending encodes to no tokens")
        ex = example_words(count, label, ctx, ends)
        if max(ex[4:]) >= START or ex[1] >= 65536:
            fail(f"{args.input}:{n}: the example is too long for the format ({ex[1]} bytes; at most 65,535)")
        words += ex
        longest = max(longest, ex[1])
        count += 1
    if count == 0:
        fail(f"{args.input}: no examples")
    tmp = args.out + ".tmp"
    try:
        with fail_on_write_error(TOOL, args.out):
            with open(tmp, "wb") as f:
                f.write(file_bytes(words, count, longest))
            os.replace(tmp, args.out)
    finally:  # a failure or a stop leaves no partial file
        if os.path.lexists(tmp):
            os.remove(tmp)
    print(f"wrote {count} examples ({len(words) * 2 + 1024} bytes, longest {longest} bytes) to {args.out}")


if __name__ == "__main__":
    main()
