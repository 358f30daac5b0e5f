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
