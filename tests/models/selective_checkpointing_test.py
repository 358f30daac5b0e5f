#!/usr/bin/env python3
"""train.activation_checkpointing = "selective" through the real binary: against the same run with
no checkpointing, for GPT-2 and Llama, fp32 and bf16, one rank and (with mpirun) 2 ranks at stage 3
with split units, vocabulary chunks, accumulation and dropout where the family has them:

  * losses, gradient norms, learning rates and final weights bitwise equal;
  * fewer activation bytes, and on every rank the measured activation and workspace peaks equal the
    prediction, which `zerotrain memory --json` gives too;
  * on CUDA, GELU in the matmul epilogue is refused beside it (its recompute runs the GELU kernel),
    and its default turns off.

usage: selective_checkpointing_test.py --zerotrain PATH [--device cpu|cuda] [-- MPIRUN FLAGS...]
(exit 77 on --device cuda without a GPU)
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402
from cuda_presence import require_cuda_device  # noqa: E402
from run_dir_util import curve, split_launcher, tensors, train_records  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Two evaluation batches (tiny.json has 16): under ctest -j2 its evaluations took half the test's time.
COMMON = ["--set", "train.max_steps=8", "--set", "train.eval_every=4", "--set", "train.eval_batches=2",
          "--set", "log.progress=plain", "--set", "log.sample_tokens=0", "--set", "train.num_threads=1"]
GPT = ["--config", os.path.join(ROOT, "configs", "tiny.json")]
LLAMA = ["--config", os.path.join(ROOT, "configs", "llama_tiny_debug.json"), "--set", "data.dataset=embedded"]
SPLIT = ["--set", "zero.stage=3", "--set", "train.block_units=2"]
BF16 = ["--set", "precision.param_dtype=bf16", "--set", "precision.activations=bf16"]


def sets(*pairs):
    return [a for p in pairs for a in ("--set", p)]


def main():
    argv, mpirun = split_launcher(sys.argv[1:])
    parser = argparse.ArgumentParser()
    parser.add_argument("--zerotrain", required=True)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args(argv)
    if args.device == "cuda":
        missing = require_cuda_device(args.zerotrain, "selective checkpointing on CUDA")
        if missing is not None:
            return missing
    checks = Checks()
    check = checks.check
    work = checks.work_folder("zt_selective_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_"))}
    device = sets(f"device={args.device}")
    if args.device == "cuda":
        # The same kernels on both sides: cuBLASLt's heuristic algorithm per product (not the timed
        # search), and GELU as its own kernel, which selective needs and none would otherwise not
        # use under bf16. (Both configs have B*T a multiple of 64: every kept buffer 256-byte
        # aligned in either layout, so each product asks cuBLASLt the same question.)
        device += sets("train.deterministic=true", "precision.gelu_epilogue=false")

    cases = [("GPT-2, fp32, dropout 0.1", 1, GPT + sets("model.dropout=0.1")),
             ("GPT-2, bf16", 1, GPT + BF16),
             ("Llama, fp32, grouped-query", 1, LLAMA),
             ("Llama, bf16, tied", 1, LLAMA + BF16 + sets("model.tie_embeddings=true"))]
    if mpirun and args.device == "cpu":
        cases += [("GPT-2, 2 ranks, stage 3, split units, 2 vocabulary chunks, grad_accum 2, bf16", 2,
                   GPT + SPLIT + BF16 + sets("model.vocab_size=200", "train.head_chunks=2", "train.grad_accum=2")),
                  ("Llama, 2 ranks, stage 3, split units, tied, 2 vocabulary chunks", 2,
                   LLAMA + SPLIT + sets("model.tie_embeddings=true", "train.head_chunks=2"))]
    for name, ranks, flags in cases:
        runs = {}
        for policy in ("none", "selective"):
            run_dir = os.path.join(work, f"{checks.total}_{policy}")
            launcher = mpirun + ["-np", str(ranks)] if ranks > 1 else []
            cmd = launcher + [args.zerotrain, "train", *flags, *device, *COMMON, "--run-dir", run_dir,
                              "--set", f"train.activation_checkpointing={policy}"]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
            if not check(p.returncode == 0, f"{name}, {policy}: exits 0" +
                         ("" if p.returncode == 0 else f" ({(p.stdout + p.stderr)[-500:]})")):
                break
            runs[policy] = run_dir
        if len(runs) < 2:
            continue
        none, sel = runs["none"], runs["selective"]
        check(len(curve(train_records(none))) == 8 and curve(train_records(sel)) == curve(train_records(none)),
              f"{name}: losses, gradient norms and LRs bitwise equal to no checkpointing")
        a, b = tensors(os.path.join(none, "final.safetensors")), tensors(os.path.join(sel, "final.safetensors"))
        check(a.keys() == b.keys() and all(a[k] == b[k] for k in a), f"{name}: final weights bitwise equal")
        mem = {r: next(x for x in train_records(d) if x["type"] == "memory") for r, d in runs.items()}
        for policy, m in mem.items():
            for cat in ("activations", "workspace"):
                measured = [rank[cat] for rank in m["measured_peak_bytes"]]
                check(all(v == m["predicted_bytes"][cat] for v in measured),
                      f"{name}, {policy}: {cat} measured {measured} = predicted {m['predicted_bytes'][cat]}")
        saved = mem["none"]["predicted_bytes"]["activations"] - mem["selective"]["predicted_bytes"]["activations"]
        check(saved > 0, f"{name}: selective keeps {saved} activation bytes fewer "
                         f"({mem['selective']['predicted_bytes']['activations']} of "
                         f"{mem['none']['predicted_bytes']['activations']})")
        cfg = os.path.join(sel, "config.json")
        p = subprocess.run([args.zerotrain, "memory", "--config", cfg, "--ranks", str(ranks), "--json"],
                           capture_output=True, text=True, timeout=60)
        stage = mem["selective"]["stage"]
        predicted = json.loads(p.stdout)["stages"][stage]["bytes"] if p.returncode == 0 else {}
        check(predicted.get("activations") == mem["selective"]["predicted_bytes"]["activations"] and
              predicted.get("workspace") == mem["selective"]["predicted_bytes"]["workspace"],
              f"{name}: zerotrain memory --json predicts the run's selective activations and workspace")

    # GELU in the matmul epilogue (CUDA, bf16) is refused beside selective, and off by default there.
    gpt2 = os.path.join(ROOT, "configs", "gpt2_124m.json")
    p = subprocess.run([args.zerotrain, "memory", "--config", gpt2, "--ranks", "1", "--set",
                        "train.activation_checkpointing=selective", "--set", "precision.gelu_epilogue=true"],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode != 0 and "gelu_epilogue" in p.stderr and "selective" in p.stderr and
          len(p.stderr.strip().splitlines()) == 1, f"gelu_epilogue with selective refused in one line ({p.stderr.strip()})")
    p = subprocess.run([args.zerotrain, "memory", "--config", gpt2, "--ranks", "1", "--json", "--set",
                        "train.activation_checkpointing=selective"], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, f"selective on the CUDA config without gelu_epilogue accepted ({p.stderr.strip()})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
