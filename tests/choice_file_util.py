"""llm.c's multiple-choice eval files (dev/data/data_common.py's write_evalfile layout), written by
the tests that feed data.choice_file and `zerotrain eval --choices` examples of their own."""
import struct


def write_choice_file(path, examples):
    """examples: (label, context tokens, [completion tokens, ...]) each. A 256-int32 header (magic
    20240522, version 1, the count, the longest example's bytes), then each example's uint16 words:
    65535, its bytes, its index, the label, the number of completions, the context's length and
    tokens, each completion's length and tokens."""
    words, longest = [], 0
    for i, (label, context, completions) in enumerate(examples):
        ex = [65535, 0, i, label, len(completions), len(context), *context]
        for c in completions:
            ex += [len(c), *c]
        ex[1] = 2 * len(ex)
        longest = max(longest, ex[1])
        words += ex
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240522, 1, len(examples), longest, *([0] * 252)))
        f.write(struct.pack(f"<{len(words)}H", *words))
