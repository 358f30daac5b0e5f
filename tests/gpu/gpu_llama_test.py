#!/usr/bin/env python3
"""The Llama family (model.arch = "llama") on the GPU against the same model on the CPU (which
tests/parity holds to PyTorch), on the flash kernels' grouped-query attention:

  * debug-state on CUDA vs on the CPU (fp32 activations: the CUDA-core flash kernels), fp32 and bf16
    parameters, with and without activation checkpointing, within gpu_model_test.py's bounds, and
    two CUDA runs bitwise equal; at head sizes 8 and 16, two query heads per key/value head and one
    for all (the tensor-core kernels and cuDNN, bf16 activations, through the training runs below
    and the kernel tests: tests/gpu/flash_attention_test.cpp, bf16_matmul_attention_test.cpp);
  * 10 training steps on CUDA match the CPU's losses within bf16 tolerance, with fp32 and bf16
    activations, on the flash kernels and on cuDNN's grouped-query attention, and each step's
    measured memory on the GPU equals the prediction in every category but workspace (within
    8 MiB above it, for the scratch of cuDNN and CUB, as gpu_model_test.py);
  * 4 steps + `--resume latest` + 4 steps is bitwise the 8-step CUDA run.

Exits 77 (a ctest skip) when this build sees no CUDA device.

usage: gpu_llama_test.py --zerotrain PATH --config configs/llama_tiny_debug.json
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402
from cuda_presence import require_cuda_device  # noqa: E402
from gpu_model_test import TRAIN_LOSS_BOUND, check_debug_states, check_device_memory, rel  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zerotrain", required=True)
    parser.add_argument("--config", required=True)
    args = parser.parse_args()
    missing = require_cuda_device(args.zerotrain, "the Llama model on the GPU")
    if missing is not None:
        return missing
    checks = Checks()
    check = checks.check
    work = checks.work_folder("zt_gpu_llama_")
    shapes = {"hs8_gqa": ["model.n_kv_head=2"], "hs16_mqa": ["model.n_embd=64", "model.n_kv_head=1"]}
    for name, overrides in shapes.items():
        folder = os.path.join(work, name)
        os.makedirs(folder)
        check_debug_states(checks, args.zerotrain, args.config, folder, overrides)

    def train(device, run_dir, steps, precision, extra=()):
        cfg = json.load(open(args.config))
        cfg["model"].update({"n_embd": 64, "n_kv_head": 2})
        cfg.setdefault("train", {}).update({"max_steps": steps, "eval_batches": 2})
        cfg.setdefault("optim", {}).update({"decay_steps": 10})
        cfg["device"] = device
        cfg["precision"] = {"param_dtype": "bf16", **precision}
        cfg.setdefault("log", {}).update({"sample_tokens": 8, "progress": "plain"})
        path = os.path.join(work, f"train_{os.path.basename(run_dir)}.json")
        json.dump(cfg, open(path, "w"))
        return subprocess.run([args.zerotrain, "train", "--config", path, "--run-dir", run_dir, *extra],
                              capture_output=True, text=True, timeout=600)

    def records(run_dir, kind):
        return [r for r in map(json.loads, open(os.path.join(run_dir, "metrics.jsonl"))) if r["type"] == kind]

    def losses(run_dir):
        return [r["loss"] for r in records(run_dir, "train")]

    # fp32 and bf16 activations on the flash kernels, and bf16 on cuDNN's grouped-query attention.
    # Where the build or the machine has no cuDNN, "cudnn" must stop with an error saying so (a
    # visible skip of that case, unless ZT_REQUIRE_CUDNN); any other cuDNN error is a failure.
    no_cudnn = ("this build has no cuDNN", "libcudnn.so.9 does not load", "libcudnn.so.9 loaded but")
    for act, attention, named in (("fp32", "auto", "attention: flash kernels"),
                                  ("bf16", "flash", "attention: flash kernels"),
                                  ("bf16", "cudnn", "attention: cuDNN fused attention")):
        what = f"{act} activations, precision.attention {attention}"
        cpu_run = os.path.join(work, f"cpu10_{act}")
        gpu_run = os.path.join(work, f"cuda10_{act}_{attention}")
        p_cpu = train("cpu", cpu_run, 10, {"activations": act}) if not os.path.exists(cpu_run) else None
        p_gpu = train("cuda", gpu_run, 10, {"activations": act, "attention": attention})
        if attention == "cudnn" and p_gpu.returncode != 0 and not os.environ.get("ZT_REQUIRE_CUDNN") and \
                any(reason in p_gpu.stderr for reason in no_cudnn):
            print(f"SKIPPED: {what}: cuDNN cannot run here ({p_gpu.stderr.strip()[-300:]})")
            continue
        if not check((p_cpu is None or p_cpu.returncode == 0) and p_gpu.returncode == 0,
                     f"{what}: train 10 steps on cpu and cuda exit 0 ({p_gpu.returncode}: {p_gpu.stderr[-500:]})"):
            continue
        check(named in p_gpu.stdout, f"{what}: '{named}' in the run's header")
        err = rel(losses(gpu_run), losses(cpu_run))
        check(err <= TRAIN_LOSS_BOUND and len(losses(gpu_run)) == 10,
              f"{what}: CUDA losses within {TRAIN_LOSS_BOUND:g} of the CPU's (error {err:.3e})")
        # Per category against the memory model, as gpu_model_test.py holds GPT-2.
        pairs = [(m, r["predicted_bytes"]) for r in records(gpu_run, "memory") for m in r["measured_peak_bytes"]]
        check(bool(pairs), f"{what}: the run wrote its memory record")
        for measured, predicted in pairs:
            check_device_memory(check, measured, predicted, what)

    # Bitwise across a resume: train.deterministic, so cuDNN's backward takes its deterministic
    # algorithm (its default adds dK and dV in any order) and cuBLASLt its heuristic's (the timed
    # search may choose differently in each process).
    full, resumed = os.path.join(work, "cuda8"), os.path.join(work, "cuda_resumed")
    det = ["--set", "train.deterministic=true"]
    p_full = train("cuda", full, 8, {"activations": "bf16"}, det)
    p_first = train("cuda", resumed, 4, {"activations": "bf16"}, det + ["--set", "checkpoint.at_end=true"])
    p_rest = train("cuda", resumed, 8, {"activations": "bf16"}, det + ["--resume", "latest"])
    if check(p_full.returncode == 0 and p_first.returncode == 0 and p_rest.returncode == 0,
             f"8 steps, and 4 + resume + 4, on cuda exit 0 ({p_rest.stderr[-400:]})"):
        same = [(r["loss"], r["grad_norm"]) for r in records(resumed, "train")] == \
               [(r["loss"], r["grad_norm"]) for r in records(full, "train")]
        check(same, "stopped after 4 steps and resumed on CUDA: bitwise the 8-step run's losses and gradient norms")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
