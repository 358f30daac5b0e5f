"""The README's fine-tuning recipes' commands, as the recipe tests run them from the project's root."""
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from shared_corpus import require_tiny_shakespeare  # noqa: E402


def prepare_tokens(tokenizer_json, out):
    """tools/prepare_tokens.py on tinyshakespeare into shards of 100000 tokens named shakespeare_*
    (exits 77, skipped, where the shared corpus is absent)."""
    return subprocess.run([sys.executable, "tools/prepare_tokens.py", "--tokenizer", tokenizer_json, "--out", out,
                           "--name", "shakespeare", "--shard-tokens", "100000", "--no-progress",
                           require_tiny_shakespeare()],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)


def sample(binary, run_dir, tokens):
    """`sample --run` continuing "ROMEO:"."""
    return subprocess.run([binary, "sample", "--run", run_dir, "--prompt", "ROMEO:", "--tokens", str(tokens)],
                          capture_output=True, text=True, timeout=120)


def export_hf(binary, run_dir, out):
    """`ckpt export` of the run's latest checkpoint as a Hugging Face folder."""
    return subprocess.run([binary, "ckpt", "export", f"{run_dir}/checkpoints", "--format", "hf", "--out", out],
                          capture_output=True, text=True, timeout=120)


def validation_tokens(data):
    """The first (validation) shard's tokens (uint16: a vocabulary under 65536)."""
    with open(f"{data}/shakespeare_val_000000.bin", "rb") as f:
        f.seek(1024)
        return np.frombuffer(f.read(), dtype=np.uint16).astype(np.int64)
