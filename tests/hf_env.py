"""The tests that run against Hugging Face's libraries (transformers, tokenizers) run under
.venv-hf's python, which tools/setup.sh makes; without them a test skips visibly (exit 77, which
CTest reads as skipped) instead of failing on an import."""
import importlib.util
import sys


def require_hf(*modules):
    """Exits 77 with one line when any of `modules` (default: torch, transformers) is missing."""
    missing = [m for m in (modules or ("torch", "transformers")) if importlib.util.find_spec(m) is None]
    if missing:
        print(f"{', '.join(missing)} not installed: tools/setup.sh makes .venv-hf (skipped)")
        sys.exit(77)


def train_byte_level_bpe(texts, vocab_size):
    """A GPT-2-style byte-level BPE (no prefix space, <|endoftext|> its one special token) trained
    here on `texts` with the tokenizers library: the tests' stand-in for a downloaded tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                       show_progress=False))
    return tok
