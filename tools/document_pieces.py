"""Where a document too long to encode in one call is cut (tools/prepare_tokens.py): the tokenizers
library takes about 220 bytes of memory a character of one call's text (a 45 MB text aborted the
process inside the library), so a longer document is encoded a piece at a time, and its pieces'
tokens must be the tokens of the whole.

A cut goes just before a whitespace character that follows a non-whitespace one (the start of a
" word" or of a line break, where regex pre-tokenizers such as GPT-2's and Llama 3's begin a new
pre-token and byte-pair merges never cross), and only where the tokenizer itself agrees: the text
around it, WINDOW characters each side, encodes to the same tokens whole as in its two halves. A
tokenizer whose tokens at the cut would change (a normaliser or pre-tokenizer that looks further,
one that marks a text's start) refuses every cut; the document is then refused by name."""

WINDOW = 256  # characters each side of a cut encoded to check it; pre-tokens are far shorter
MOST_TRIES = 1000  # cuts checked before a piece is given up on


def _agrees(tok, text, cut):
    """Whether the tokens around `cut` are the same encoded whole and in two halves."""
    start, end = max(0, cut - WINDOW), min(len(text), cut + WINDOW)

    def ids(part):
        return tok.encode(part, add_special_tokens=False).ids

    return ids(text[start:end]) == ids(text[start:cut]) + ids(text[cut:end])


def _cut_before(tok, text, at, lowest):
    """The last cut at or before `at`, and after `lowest`, that the tokenizer agrees with; None if
    none within MOST_TRIES candidates."""
    p = at
    for _ in range(MOST_TRIES):
        p = max(text.rfind(c, lowest + 1, p + 1) for c in (" ", "\n", "\t", "\r"))
        if p <= lowest:
            return None
        if not text[p - 1].isspace() and _agrees(tok, text, p):
            return p
        p -= 1
    return None


def pieces(tok, text, most):
    """`text` as consecutive pieces of at most `most` characters each, cut where the tokenizer's
    tokens stay those of the whole (`text` itself where it is no longer); None where a piece finds
    no such cut in the latter half of its length."""
    if len(text) <= most:
        return [text]
    out, start = [], 0
    while len(text) - start > most:
        cut = _cut_before(tok, text, start + most, start + most // 2)
        if cut is None:
            return None
        out.append(text[start:cut])
        start = cut
    out.append(text[start:])
    return out
