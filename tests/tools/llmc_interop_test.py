#!/usr/bin/env python3
"""tools/llmc_interop.py's plumbing without a GPU: a stand-in for llm.c's train_gpt2cu takes its
flags, writes model_000000NN.bin in llm.c's layout (a small GPT-2 that transformers creates) into
its -o folder and prints "val loss" for those weights on the -j file's first -m batches of -b x -t
tokens, as llm.c's loader reads them; the tool then starts zerotrain (on the CPU) from that file,
evaluates the same windows, writes its JSON and passes. A stand-in whose printed loss is off fails.

usage: llmc_interop_test.py -- PATH/TO/zerotrain   (run with .venv-hf's python)
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
import torch  # noqa: F401  # noqa: E402
import transformers  # noqa: F401  # noqa: E402

STAND_IN = r'''#!__PYTHON__
import os, sys
import numpy as np
import torch, transformers
sys.path.insert(0, "__CHECKPOINT_TESTS__")
from init_from_test import write_llmc_model
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
B, T, steps, batches = int(args["-b"]), int(args["-t"]), int(args["-x"]), int(args["-m"])
torch.manual_seed(0)
model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=50257, n_positions=T, n_embd=32, n_layer=1,
                                                             n_head=2))
write_llmc_model(os.path.join(args["-o"], f"model_{steps:08d}.bin"), model, "f32")
with open(args["-j"], "rb") as f:
    f.seek(1024)
    val = np.frombuffer(f.read(), dtype=np.uint16).astype(np.int64)
losses = []
for b in range(batches):
    chunk = val[b * B * T: b * B * T + B * T + 1]
    x = torch.tensor(np.stack([chunk[r * T: r * T + T] for r in range(B)]))
    y = torch.tensor(np.stack([chunk[r * T + 1: r * T + T + 1] for r in range(B)]))
    with torch.no_grad():
        logits = model.eval()(x).logits
    losses.append(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item())
print("val loss %f" % (sum(losses) / len(losses) + __OFFSET__))
'''


def main():
    zerotrain = sys.argv[sys.argv.index("--") + 1]
    checks = Checks()
    with tempfile.TemporaryDirectory() as work:
        for offset, should_pass in ((0.0, True), (0.5, False)):
            stand_in = os.path.join(work, f"train_gpt2cu_{should_pass}")
            with open(stand_in, "w") as f:
                f.write(STAND_IN.replace("__PYTHON__", sys.executable)
                        .replace("__CHECKPOINT_TESTS__", os.path.join(ROOT, "tests", "checkpoint"))
                        .replace("__OFFSET__", repr(offset)))
            os.chmod(stand_in, 0o755)
            out = os.path.join(work, f"interop_{should_pass}.json")
            p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "llmc_interop.py"), "--llmc", stand_in,
                                "--zerotrain", zerotrain, "--device", "cpu", "--out", out],
                               capture_output=True, text=True, timeout=600)
            with open(out) as f:
                result = json.load(f)
            if should_pass:
                checks.check(p.returncode == 0 and result.get("passed") and result["difference"] < 1e-4,
                             f"zerotrain's val loss from the llm.c file equals the stand-in's "
                             f"({result.get('zerotrain_val_loss')} vs {result.get('llmc_val_loss')}: {p.stdout.strip()[-300:]} "
                             f"{result.get('error', '')[-300:]})")
            else:
                checks.check(p.returncode == 1 and result.get("passed") is False,
                             f"a loss 0.5 off fails the check ({p.stdout.strip()[-200:]})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
