"""Where a document too long to encode in one call is cut (tools/prepare_tokens.py): the tokenizers
library takes about 220 bytes of memory a character of one call's text (a 45 MB text aborted the
process inside the library), so a longer document is encoded a piece at a time, and its pieces'
tokens must be the tokens of the whole.

Byte-pair merges never cross the pre-tokenizer's pieces, so a cut where a pre-token ends leaves the
tokens as they were: a cut goes just before a whitespace character that follows a non-whitespace
one (the start of a " word" or of a line break, where regex pre-tokenizers such as GPT-2's and
Llama 3's begin a new pre-token), and only where the pre-tokenizer, run on the text as the
normaliser leaves it, ends one there (a normaliser that changes the window's length cuts nowhere in
it), and the text around it, WINDOW characters each side, encodes to the same tokens whole as in its
two halves (a pre-tokenizer that marks a text's start would change them; the window reaches past
any whitespace run at its edges, which a normaliser that strips a text's ends would otherwise hide). A tokenizer without a
pre-tokenizer cuts nowhere (its merges may run across any space, with context further back than
any window), except a vocabulary of single characters (a BPE without merges, as `ckpt export
--format hf` writes a char-level run's), whose tokens are its characters: it is cut at the piece's
length, whitespace or not. A document with no such cut is refused by name (prepare_tokens.py)."""
import functools
import json

WINDOW = 256  # characters each side of a cut encoded to check it
MOST_TRIES = 1000  # cuts checked against the tokenizer before a piece is given up on


class Cutter:
    """A tokenizer's rule for cutting documents, read once from its definition, and only where a
    document is long enough to cut (the definition of a large vocabulary is slow to write out)."""

    def __init__(self, tok):
        self.tok = tok

    @functools.cached_property
    def _spec(self):
        return json.loads(self.tok.to_str())

    @functools.cached_property
    def by_pre_tokens(self):
        return self._spec.get("pre_tokenizer") is not None

    @functools.cached_property
    def characters(self):
        model = self._spec.get("model") or {}
        return not self.by_pre_tokens and model.get("type") == "BPE" and not model.get("merges")

    def can_cut(self):
        return self.by_pre_tokens or self.characters

    def _ids(self, part):
        return self.tok.encode(part, add_special_tokens=False).ids

    def agrees(self, text, cut):
        """Whether a cut at `cut` leaves the tokens around it as they are: a pre-token ends there, and
        the window encodes to the same tokens whole as in two halves."""
        start, end = max(0, cut - WINDOW), min(len(text), cut + WINDOW)
        # Past any whitespace run at the window's edges: a window ending inside one reads the same
        # whole and halved to a normaliser that strips a text's ends (Strip), though the real piece
        # after the cut starts with the run and loses it.
        while end < len(text) and text[end - 1].isspace():
            end += 1
        while start > 0 and text[start].isspace():
            start -= 1
        if self.by_pre_tokens:
            window = text[start:end]
            # The pre-tokenizer sees the normaliser's text (spaces replaced, say, by U+0120: no
            # boundary there at all); offsets hold only where the length is kept.
            normalised = self.tok.normalizer.normalize_str(window) if self.tok.normalizer is not None else window
            if len(normalised) != len(window):
                return False
            ends = {start + e for _, (_, e) in self.tok.pre_tokenizer.pre_tokenize_str(normalised)}
            if cut not in ends:
                return False
        return self._ids(text[start:end]) == self._ids(text[start:cut]) + self._ids(text[cut:end])

    def cut_before(self, text, at, lowest):
        """The last cut at or before `at`, and after `lowest`, that the tokenizer agrees with; None if
        none within MOST_TRIES checks."""
        if self.characters:  # any position: its tokens are its characters
            for p in range(at, max(lowest, at - MOST_TRIES), -1):
                if self.agrees(text, p):
                    return p
            return None
        p = at
        for _ in range(MOST_TRIES):
            p = max(text.rfind(c, lowest + 1, p + 1) for c in (" ", "\n", "\t", "\r"))
            while p > lowest and text[p - 1].isspace():  # a run of whitespace: to its start, unchecked
                p -= 1
            if p <= lowest:
                return None
            if self.agrees(text, p):
                return p
            p -= 1
        return None


def pieces(cutter, text, most):
    """`text` as consecutive pieces of at most `most` characters each, cut where the tokenizer's
    tokens stay those of the whole (`text` itself where it is no longer); None where a piece finds
    no such cut in the latter half of its length, or the tokenizer cuts nowhere."""
    if len(text) <= most:
        return [text]
    if not cutter.can_cut():
        return None
    out, start = [], 0
    while len(text) - start > most:
        cut = cutter.cut_before(text, start + most, start + most // 2)
        if cut is None:
            return None
        out.append(text[start:cut])
        start = cut
    out.append(text[start:])
    return out
