#!/usr/bin/env python3
"""tools/llmc_writer_check.py's plumbing without llm.c's source: a stand-in train_gpt2.py offers
what the tool takes from llm.c's (GPTConfig, GPT with llm.c's parameter names, [out, in] linear
weights, a causal-mask buffer, forward(idx, targets) -> (logits, loss), and write_model, here the
tests' llm.c writer through the tool's own transformers conversion, so the byte comparison can
only fail in the second run). The stand-in's forward is its own, so the losses check zerotrain's
reading of the files: the tool trains the stand-in, writes both files, runs zerotrain at stage 0
on one rank and stage 3 on two, writes its JSON and table, and passes. A stand-in whose writer
overwrites the file's last 4 bytes (ln_f's last bias, or its last two in bf16) fails it, on the
bytes and on every loss. A missing zerotrain is one line and exit 2. (Not exercised here: the
tool's shims for Debian's torch 1.13 under llm.c's own file.)

usage: llmc_writer_check_test.py MPIRUN [MPIRUN FLAGS...] -- PATH/TO/zerotrain   (.venv-hf's python)
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402

from hf_env import require_hf  # noqa: E402

require_hf()

STAND_IN = r'''
import os, sys
from dataclasses import dataclass
import torch
import torch.nn as nn
import torch.nn.functional as F
sys.path.insert(0, "__TOOLS__")
sys.path.insert(0, "__CHECKPOINT_TESTS__")

@dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50257
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768

class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_head = c.n_head
        self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd)
        self.c_proj = nn.Linear(c.n_embd, c.n_embd)
        mask = torch.tril(torch.ones(c.block_size, c.block_size))
        self.register_buffer("bias", mask.view(1, 1, c.block_size, c.block_size))
    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = [t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v)]
        att = (q @ k.transpose(-2, -1)) / (k.size(-1) ** 0.5)
        att = F.softmax(att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")), dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))

class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(c.n_embd), Attention(c), nn.LayerNorm(c.n_embd)
        self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(c.n_embd, 4 * c.n_embd), c_proj=nn.Linear(4 * c.n_embd, c.n_embd)))
    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))

class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd), wpe=nn.Embedding(config.block_size, config.n_embd),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]), ln_f=nn.LayerNorm(config.n_embd)))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, 0.0, 0.02)
    def forward(self, idx, targets):
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(idx.size(1)))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

def write_model(model, filename, dtype):
    from init_from_test import write_llmc_model
    from llmc_writer_check import as_transformers
    write_llmc_model(filename, as_transformers(model), "f32" if dtype == "float32" else "bf16")
    if __PERTURB__:  # one value of the last tensor moved
        with open(filename, "r+b") as f:
            f.seek(-4, os.SEEK_END)
            f.write(torch.tensor([0.25]).numpy().tobytes())
'''


def main():
    sep = sys.argv.index("--")
    mpirun, zerotrain = " ".join(sys.argv[1:sep]), sys.argv[sep + 1]
    checks = Checks()
    with tempfile.TemporaryDirectory() as work:
        for perturb in (False, True):
            folder = os.path.join(work, f"llmc_{perturb}")
            os.makedirs(folder)
            stand_in = os.path.join(folder, "train_gpt2.py")
            with open(stand_in, "w") as f:
                f.write(STAND_IN.replace("__TOOLS__", os.path.join(ROOT, "tools"))
                        .replace("__CHECKPOINT_TESTS__", os.path.join(ROOT, "tests", "checkpoint"))
                        .replace("__PERTURB__", repr(perturb)))
            prefix = os.path.join(work, f"check_{perturb}")
            p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "llmc_writer_check.py"), "--train-gpt2-py",
                                stand_in, "--zerotrain", zerotrain, "--mpirun", mpirun, "--out", prefix],
                               capture_output=True, text=True, timeout=250)
            tail = (p.stdout + p.stderr).strip()[-600:]
            if not os.path.exists(prefix + ".json"):
                checks.check(False, f"the tool wrote its JSON (exit {p.returncode}: {tail})")
                continue
            with open(prefix + ".json") as f:
                result = json.load(f)
            runs = [r for e in result["files"] for r in e["runs"]]
            same = [e["same_bytes_as_test_writer"] for e in result["files"]]
            if not perturb:
                checks.check(p.returncode == 0 and result["passed"] and len(runs) == 4 and all(same) and
                             all(r["difference"] <= 1e-6 for r in runs) and result["last_train_loss"] < 9.0,
                             f"both files, stages 0 and 3: zerotrain's loss equals the stand-in's within 1e-6 "
                             f"({[r['difference'] for r in runs]}, trained to {result['last_train_loss']:.3f}; {tail})")
                checks.check(os.path.exists(prefix + ".md") and "| float32 |" in open(prefix + ".md").read(),
                             "the table is written")
            else:
                checks.check(p.returncode == 1 and not result["passed"] and not any(same) and
                             all(r["difference"] > 1e-6 for r in runs),
                             f"a writer that moves one value fails on bytes and on every loss ({tail[-200:]})")
        p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "llmc_writer_check.py"), "--train-gpt2-py",
                            stand_in, "--zerotrain", os.path.join(work, "no_such_zerotrain"), "--out",
                            os.path.join(work, "missing")], capture_output=True, text=True, timeout=60)
        lines = p.stderr.strip().splitlines()
        checks.check(p.returncode == 2 and len(lines) == 1 and "no zerotrain binary" in lines[0],
                     f"a missing zerotrain is one line and exit 2 ({p.returncode}: {p.stderr.strip()[-200:]})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
