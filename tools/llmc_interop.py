#!/usr/bin/env python3
"""llm.c's own model file into zerotrain (train.init_from), on a GPU machine: llm.c's train_gpt2cu
trains GPT-2 124M (-e d12) for STEPS steps on a repeating token sequence (so its weights predict
something, and weights read wrongly would show) and writes its checkpoint with its own writer
(model_000000STEPS.bin, bf16), printing its validation loss for those weights; zerotrain starts from
that file with no step (train.max_steps = 0) and evaluates the same validation windows (llm.c's
loader reads them back to back: data.order = "sequential"). The two losses agree within bf16's
error (llm.c computes in bf16, zerotrain in fp32 from the bf16 weights). Writes a JSON result.

usage: llmc_interop.py --llmc PATH/TO/train_gpt2cu --zerotrain PATH/TO/zerotrain --out FILE
                       [--device cuda|cpu] [--tolerance 0.05]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_harness import write_llmc_tokens  # noqa: E402
from repo_commit import head_commit  # noqa: E402
from result_paths import check_out_file  # noqa: E402

B, T, VAL_BATCHES, STEPS = 4, 64, 2, 20


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--llmc", required=True)
    ap.add_argument("--zerotrain", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tolerance", type=float, default=0.05)
    args = ap.parse_args(argv)
    for flag, path in (("--llmc", args.llmc), ("--zerotrain", args.zerotrain)):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            ap.error(f"{flag} {path}: not an executable file")
    check_out_file("llmc_interop", args.out)
    llmc, zerotrain = os.path.abspath(args.llmc), os.path.abspath(args.zerotrain)
    result = {"commit": head_commit() or "unknown", "batch": B, "seq_len": T, "val_batches": VAL_BATCHES}
    with tempfile.TemporaryDirectory() as work:
        train, val = os.path.join(work, "train.bin"), os.path.join(work, "val.bin")
        write_llmc_tokens(train, np.tile(np.arange(300), 700))
        write_llmc_tokens(val, np.tile(np.arange(300), 170))
        out_dir = os.path.join(work, "llmc_out")
        os.makedirs(out_dir)
        cmd = [llmc, "-e", "d12", "-i", train, "-j", val, "-b", str(B), "-t", str(T), "-d", str(B * T), "-x", str(STEPS),
               "-n", str(STEPS), "-o", out_dir, "-v", "1", "-m", str(VAL_BATCHES), "-s", "0", "-h", "0", "-r", "0"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=work)
        val_losses = [float(m.group(1)) for m in re.finditer(r"^val loss ([0-9.]+)", p.stdout, re.M)]
        model_file = os.path.join(out_dir, f"model_{STEPS:08d}.bin")
        if p.returncode != 0 or not val_losses or not os.path.exists(model_file):
            result["error"] = f"llm.c: exit {p.returncode}, val losses {val_losses}: {(p.stdout + p.stderr)[-1500:]}"
            return finish(args.out, result)
        result["llmc_val_loss"] = val_losses[-1]  # after the last step: the weights in the model file
        result["llmc_first_val_loss"] = val_losses[0]
        run_dir = os.path.join(work, "zerotrain_run")
        config = os.path.join(work, "config.json")
        with open(config, "w") as f:
            json.dump({"model": {}, "device": args.device,
                       "data": {"train_files": train, "val_files": val, "order": "sequential"},
                       "train": {"init_from": model_file, "micro_batch": B, "seq_len": T, "max_steps": 0,
                                 "eval_batches": VAL_BATCHES},
                       "log": {"sample_tokens": 0, "progress": "plain"}}, f)
        p = subprocess.run([zerotrain, "train", "--config", config, "--run-dir", run_dir], capture_output=True,
                           text=True, timeout=600)
        if p.returncode != 0:
            result["error"] = f"zerotrain: exit {p.returncode}: {(p.stdout + p.stderr)[-1500:]}"
            return finish(args.out, result)
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            evals = [json.loads(l)["val_loss"] for l in f if '"eval"' in l]
        result["zerotrain_val_loss"] = evals[-1]
        result["difference"] = abs(evals[-1] - result["llmc_val_loss"])
        result["passed"] = result["difference"] < args.tolerance
    return finish(args.out, result)


def finish(out, result):
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    if "error" in result:
        print(f"llmc_interop: FAILED: {result['error'][-600:]}")
        return 1
    print(f"llm.c's own model file: val loss {result['llmc_val_loss']:.4f} in llm.c (bf16), "
          f"{result['zerotrain_val_loss']:.4f} in zerotrain from its weights (|diff| {result['difference']:.4f}): "
          f"{'ok' if result['passed'] else 'FAILED'}")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
