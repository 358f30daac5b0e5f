#!/usr/bin/env python3
"""The GPT model on the GPU against the same model on the CPU (which tests/parity holds to PyTorch):

  * debug-state on CUDA vs on the CPU, f32 and bf16, with and without activation checkpointing:
    loss, logits, every parameter and gradient, and the losses of 10 AdamW steps, within the
    bounds below;
  * two CUDA runs of the same config write bitwise identical tensors (no order-dependent atomics);
  * `train --set device=cuda` runs, and 4 steps + `--resume latest` + 6 steps is bitwise the
    10-step CUDA run (checkpoints staged through the host);
  * 10 training steps on CUDA match the CPU's losses within bf16 tolerance, also with dropout
    (the same masks on both devices), with and without activation checkpointing, and with bf16
    activations (precision.activations) against the CPU's staged reference, on the flash kernels
    and on cuDNN (precision.attention), the end-of-run text sample included, and with the GELU in
    the matmul epilogues (precision.gelu_epilogue).

Exits 77 (a ctest skip) when this build sees no CUDA device.

usage: gpu_model_test.py --zerotrain PATH --config configs/tiny_debug.json
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "parity"))
from check_report import Checks  # noqa: E402
from cuda_presence import require_cuda_device  # noqa: E402
from safetensors_io import read_safetensors  # noqa: E402

# Normwise relative error bounds, GPU vs CPU. Both compute in fp32 from the same weights; they
# differ by summation order (cuBLASLt's split of K, the two-stage reductions), ~1e-6 relative in
# the forward and grown by backward's cancellations -- the parity bounds against float64 torch
# (1e-5 forward, 1e-4 gradients) apply to each side, so their difference is within twice those.
# In bf16 the gradients are stored in bf16: one rounding of 2^-8 either way per element.
BOUNDS = {
    "f32": {"loss": 2e-5, "logits": 2e-5, "grad": 2e-4, "param": 0.0, "train_loss": 2e-4},
    "bf16": {"loss": 2e-5, "logits": 2e-5, "grad": 1.6e-2, "param": 0.0, "train_loss": 2e-3},
}
# Training through `train` for 10 steps (bf16 weights, data windows, clipping, LR schedule).
TRAIN_LOSS_BOUND = 2e-2


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    den = np.max(np.abs(b)) if b.size else 0.0
    num = np.max(np.abs(a - b)) if a.size else 0.0
    return 0.0 if num == 0.0 else (float("inf") if den == 0.0 else float(num / den))


def tensors(path):
    """{name: numpy array}; bf16 widened to f32 exactly, so equality of arrays is equality of bits."""
    return read_safetensors(path)[0]


def check_debug_states(checks, zerotrain, config, work, overrides=()):
    """debug-state on CUDA against the CPU, fp32 and bf16 parameters, with and without activation
    checkpointing (within BOUNDS), and two CUDA runs bitwise equal. `overrides`: more --set KEY=VALUE."""
    check = checks.check
    extra = [a for o in overrides for a in ("--set", o)]

    def debug_state(device, dtype, ckpt, name):
        out = os.path.join(work, f"{name}.safetensors")
        # train.deterministic: the two CUDA runs must repeat bit for bit (cuBLASLt's heuristic
        # algorithms, cuDNN's deterministic backward; the timed search may choose differently).
        p = subprocess.run([zerotrain, "debug-state", "--config", config, "--out", out, "--steps", "10",
                            "--set", "train.deterministic=true",
                            "--set", f"device={device}", "--set", f"precision.param_dtype={dtype}",
                            "--set", f"train.activation_checkpointing={ckpt}", *extra],
                           capture_output=True, text=True, timeout=600)
        if not check(p.returncode == 0, f"debug-state {name} exits 0" +
                     ("" if p.returncode == 0 else f" ({p.returncode}: {(p.stdout + p.stderr)[-800:]})")):
            return None
        return tensors(out)

    for dtype in ("f32", "bf16"):
        for ckpt in ("none", "all"):
            tag = f"{dtype}, checkpointing {ckpt}"
            cpu = debug_state("cpu", dtype, ckpt, f"cpu_{dtype}_{ckpt}")
            gpu = debug_state("cuda", dtype, ckpt, f"cuda_{dtype}_{ckpt}")
            if cpu is None or gpu is None:
                continue
            check(cpu.keys() == gpu.keys(), f"{tag}: the same tensors ({len(gpu)})")
            b = BOUNDS[dtype]
            worst = {}
            for name in cpu:
                if name in ("inputs", "targets"):
                    kind = "param"
                elif name == "train_losses":
                    kind = "train_loss"
                elif name in ("loss", "logits"):
                    kind = name
                elif name.startswith("grad."):
                    kind = "grad"
                else:
                    kind = "param"  # parameters and masters after initialisation: identical
                err = rel(gpu[name], cpu[name])
                worst[kind] = max(worst.get(kind, 0.0), err)
                if not err <= b[kind]:
                    check(False, f"{tag}: {name} within {b[kind]:g} of the CPU (error {err:.3e})")
            for kind, err in sorted(worst.items()):
                check(err <= b[kind], f"{tag}: every {kind} within {b[kind]:g} of the CPU (worst {err:.3e})")
            again = debug_state("cuda", dtype, ckpt, f"cuda_again_{dtype}_{ckpt}")
            if again is not None:
                same = all(np.ascontiguousarray(again[k]).tobytes() == np.ascontiguousarray(gpu[k]).tobytes()
                           for k in gpu)
                check(same, f"{tag}: two CUDA runs write bitwise identical tensors")


def check_device_memory(check, measured, predicted, what):
    """Device memory per category against the memory model: the model states (the buffers ZeRO
    shards), the activations and the NCCL staging in comm_buffers must be predicted to the byte, as
    on CPU ranks; workspace at least the prediction (the cuBLASLt workspace and the largest kernel
    call's scratch included: kernels/contracts/kernel_scratch.h) and at most 8 MiB above it, which a
    call the prediction leaves out may take where it is the largest (cuDNN's workspace, CUB's sort
    temporaries, a first step's timed searches)."""
    exact = ["parameters", "gradients", "master_weights", "optimizer_states", "activations", "comm_buffers"]
    check(all(measured[k] == predicted[k] for k in exact),
          f"{what}: measured device bytes of {', '.join(exact)} equal the prediction "
          f"({ {k: (measured[k], predicted[k]) for k in exact} })")
    ws_measured, ws_predicted = measured["workspace"], predicted["workspace"]
    check(ws_predicted <= ws_measured <= ws_predicted + (8 << 20),
          f"{what}: workspace {ws_measured} within 8 MiB above the prediction {ws_predicted}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zerotrain", required=True)
    parser.add_argument("--config", required=True)
    args = parser.parse_args()
    missing = require_cuda_device(args.zerotrain, "the GPU model")
    if missing is not None:
        return missing
    checks = Checks()
    check = checks.check
    work = checks.work_folder("zt_gpu_model_")

    check_debug_states(checks, args.zerotrain, args.config, work)

    # Training through `train` on the GPU. train.deterministic by default: the runs compared bit for
    # bit (resume, stages) must repeat exactly; the runs only held to the CPU's bound pass
    # deterministic=False, so the timed algorithm search and cuDNN's default backward run too.
    def train(device, run_dir, steps, extra=(), deterministic=True):
        cfg = json.load(open(args.config))
        cfg.setdefault("train", {}).update({"max_steps": steps, "eval_batches": 2, "deterministic": deterministic})
        cfg.setdefault("optim", {}).update({"decay_steps": 10})
        cfg["device"] = device
        cfg.setdefault("precision", {})["param_dtype"] = "bf16"
        cfg.setdefault("log", {}).update({"sample_tokens": 8, "progress": "plain"})
        path = os.path.join(work, f"train_{os.path.basename(run_dir)}.json")
        json.dump(cfg, open(path, "w"))
        return subprocess.run([args.zerotrain, "train", "--config", path, "--run-dir", run_dir, *extra],
                              capture_output=True, text=True, timeout=600)

    def losses(run_dir):
        return [json.loads(l)["loss"] for l in open(os.path.join(run_dir, "metrics.jsonl")) if '"type":"train"' in l]

    cpu_run, gpu_run = os.path.join(work, "cpu10"), os.path.join(work, "cuda10")
    p_cpu, p_gpu = train("cpu", cpu_run, 10), train("cuda", gpu_run, 10)
    if check(p_cpu.returncode == 0 and p_gpu.returncode == 0,
             f"train 10 steps on cpu and cuda exit 0 ({p_cpu.returncode}, {p_gpu.returncode}: {p_gpu.stderr[-500:]})"):
        check("device: cuda:" in p_gpu.stdout, "train names the CUDA device")
        err = rel(losses(gpu_run), losses(cpu_run))
        check(err <= TRAIN_LOSS_BOUND and len(losses(gpu_run)) == 10,
              f"10 bf16 training steps: CUDA losses within {TRAIN_LOSS_BOUND:g} of the CPU's (error {err:.3e})")
        # Dropout: the GPU draws the CPU's masks (same seed, site and sample index), so with
        # dropout 0.1 at every site the runs still agree within the same bound, also when
        # checkpointed blocks regenerate their masks in the recompute.
        for ckpt in ("none", "all"):
            extra = ["--set", "model.dropout=0.1", "--set", f"train.activation_checkpointing={ckpt}"]
            d_cpu, d_gpu = os.path.join(work, f"cpu_drop_{ckpt}"), os.path.join(work, f"cuda_drop_{ckpt}")
            pc, pg = train("cpu", d_cpu, 10, extra), train("cuda", d_gpu, 10, extra)
            if check(pc.returncode == 0 and pg.returncode == 0,
                     f"dropout 0.1, checkpointing {ckpt}: train on cpu and cuda exit 0 ({pg.stderr[-400:]})"):
                err = rel(losses(d_gpu), losses(d_cpu))
                check(err <= TRAIN_LOSS_BOUND and losses(d_gpu) != losses(gpu_run),
                      f"dropout 0.1, checkpointing {ckpt}: CUDA losses within {TRAIN_LOSS_BOUND:g} of the CPU's "
                      f"(error {err:.3e}) and differ from the run without dropout")
        # precision.matmul: tensor-core products of rounded inputs; the losses stay near the exact
        # fp32 products' (bf16 inputs: at most 2^-8 relative each), within the bf16 training bound.
        for matmul in ("tf32", "bf16"):
            run = os.path.join(work, f"cuda_matmul_{matmul}")
            p = train("cuda", run, 10, ["--set", f"precision.matmul={matmul}"])
            if check(p.returncode == 0, f"precision.matmul={matmul} on CUDA exits 0 ({p.stderr[-400:]})"):
                err = rel(losses(run), losses(gpu_run))
                check(err <= TRAIN_LOSS_BOUND and f"{matmul} matmuls" in p.stdout,
                      f"precision.matmul={matmul}: losses within {TRAIN_LOSS_BOUND:g} of exact fp32 products "
                      f"(error {err:.3e}), named in the device line")
        # precision.activations = bf16: every activation and activation gradient stored in bf16
        # (docs/precision.md). The CPU stages the same contract through fp32, so the devices agree
        # within the bf16 training bound; both stay near the fp32-activation run; the activations
        # category is measured as predicted (the activations are the model's own buffers) and is
        # smaller than with fp32 activations. Also with dropout (bf16 masks applied on either
        # device) and with checkpointed blocks (the recompute writes the same bf16 values).
        for extra_name, extra in (("", []), (" dropout 0.1, checkpointing all",
                                            ["--set", "model.dropout=0.1", "--set", "train.activation_checkpointing=all"])):
            a_cpu = os.path.join(work, f"cpu_act_bf16{len(extra)}")
            a_gpu = os.path.join(work, f"cuda_act_bf16{len(extra)}")
            flags = ["--set", "precision.activations=bf16", *extra]
            pc, pg = train("cpu", a_cpu, 10, flags), train("cuda", a_gpu, 10, flags, deterministic=False)
            if check(pc.returncode == 0 and pg.returncode == 0,
                     f"bf16 activations{extra_name}: train on cpu and cuda exit 0 ({pc.stderr[-300:]} {pg.stderr[-300:]})"):
                err = rel(losses(a_gpu), losses(a_cpu))
                check(err <= TRAIN_LOSS_BOUND and len(losses(a_gpu)) == 10,
                      f"bf16 activations{extra_name}: CUDA losses within {TRAIN_LOSS_BOUND:g} of the CPU's (error {err:.3e})")
                if not extra:
                    err = rel(losses(a_gpu), losses(gpu_run))
                    check(err <= TRAIN_LOSS_BOUND,
                          f"bf16 activations: CUDA losses within {TRAIN_LOSS_BOUND:g} of fp32 activations' (error {err:.3e})")
                    mem = [next(json.loads(l) for l in open(os.path.join(r, "metrics.jsonl")) if '"type":"memory"' in l)
                           for r in (a_gpu, gpu_run)]
                    m16, p16 = mem[0]["measured_peak_bytes"][0]["activations"], mem[0]["predicted_bytes"]["activations"]
                    m32 = mem[1]["measured_peak_bytes"][0]["activations"]
                    check(m16 == p16 and m16 < 0.6 * m32,
                          f"bf16 activations on CUDA: activations measured {m16} == predicted {p16}, "
                          f"< 0.6 x fp32 activations' {m32}")
        # precision.attention with bf16 activations: "flash" and "cudnn" both train within the bf16
        # bound of the CPU and say which kernels run; the end-of-run text sample (an fp32 batch-1
        # model, which cuDNN does not serve) completes under "cudnn" too. Without cuDNN in this
        # build or on this machine, "cudnn" must stop with an error naming it -- unless
        # ZT_REQUIRE_CUDNN says it is there.
        for choice, named in (("flash", "attention: flash kernels"), ("cudnn", "attention: cuDNN fused attention")):
            run = os.path.join(work, f"cuda_attention_{choice}")
            p = train("cuda", run, 10, ["--set", "precision.activations=bf16", "--set", f"precision.attention={choice}"],
                      deterministic=False)
            if choice == "cudnn" and p.returncode != 0 and not os.environ.get("ZT_REQUIRE_CUDNN"):
                check("cuDNN" in p.stderr or "cudnn" in p.stderr,
                      f"precision.attention=cudnn where cuDNN cannot run: an error naming it ({p.stderr[-300:]})")
                continue
            if check(p.returncode == 0, f"precision.attention={choice} on CUDA exits 0 ({p.stderr[-400:]})"):
                err = rel(losses(run), losses(cpu_run))
                check(err <= TRAIN_LOSS_BOUND and named in p.stdout and '"type":"sample"' in open(
                          os.path.join(run, "metrics.jsonl")).read(),
                      f"precision.attention={choice}: losses within {TRAIN_LOSS_BOUND:g} of the CPU's (error {err:.3e}), "
                      f"'{named}' in the header, the end-of-run sample written")
        # precision.gelu_epilogue: GELU and its backward in the MLP products' cuBLASLt epilogues,
        # named on the device line; with bf16 activations on bf16 parameters (bf16 bias epilogue)
        # and on f32 ones (the fp32-bias path through scratch), within the bf16 bound of the CPU.
        for param in ("bf16", "f32"):
            run = os.path.join(work, f"cuda_gelu_epilogue_{param}")
            flags = ["--set", "precision.activations=bf16", "--set", "precision.gelu_epilogue=true",
                     "--set", f"precision.param_dtype={param}"]
            p = train("cuda", run, 10, flags, deterministic=False)
            if check(p.returncode == 0, f"precision.gelu_epilogue, {param} parameters: exits 0 ({p.stderr[-400:]})"):
                err = rel(losses(run), losses(cpu_run))
                check(err <= TRAIN_LOSS_BOUND and "GELU in matmul epilogues" in p.stdout,
                      f"precision.gelu_epilogue, {param} parameters: losses within {TRAIN_LOSS_BOUND:g} of the CPU's "
                      f"(error {err:.3e}), named on the device line")
        resumed = os.path.join(work, "cuda_resumed")
        first = train("cuda", resumed, 4, ["--set", "checkpoint.at_end=true"])
        second = train("cuda", resumed, 10, ["--resume", "latest"])
        if check(first.returncode == 0 and second.returncode == 0,
                 f"4 CUDA steps, save, --resume latest, 6 more exit 0 ({second.stderr[-400:]})"):
            check(losses(resumed) == losses(gpu_run), "the resumed CUDA run's losses are bitwise the uninterrupted run's")
            a = tensors(os.path.join(resumed, "final.safetensors"))
            b = tensors(os.path.join(gpu_run, "final.safetensors"))
            check(a.keys() == b.keys() and all(a[k].tobytes() == b[k].tobytes() for k in b),
                  "the resumed CUDA run's final weights are bitwise equal")
            # What deterministic mode's bits follow on a GPU, recorded for a resume to compare:
            # the GPU's model, the CUDA runtime's, cuBLASLt's and cuDNN's versions; the same GPU
            # says nothing on resuming.
            ckpts = os.path.join(resumed, "checkpoints")
            step = sorted(d for d in os.listdir(ckpts) if d.startswith("step_"))[0]
            with open(os.path.join(ckpts, step, "manifest.json")) as f:
                extra = json.load(f)["extra"]
            recorded = extra.get("cuda_kernels", "")
            check("(sm_" in recorded and ", CUDA runtime " in recorded and ", cuBLASLt " in recorded and
                  "cpu_kernels" not in extra and "not bit for bit" not in second.stdout,
                  f"a CUDA checkpoint records the GPU and its libraries ({recorded!r}); the same GPU's resume "
                  "notes nothing")
        # ZeRO stages 1-3 on one GPU take the store's solo path (no collective: the shard is the
        # unit, gradients go straight into it), the same kernels on the same buffers as stage 0:
        # the losses must be stage 0's bit for bit.
        for stage in (1, 2, 3):
            run = os.path.join(work, f"cuda_stage{stage}")
            p = train("cuda", run, 10, ["--set", f"zero.stage={stage}"])
            if check(p.returncode == 0, f"stage {stage} on CUDA exits 0 ({p.stderr[-400:]})"):
                err = rel(losses(run), losses(gpu_run))
                check(losses(run) == losses(gpu_run) and len(losses(run)) == 10,
                      f"stage {stage} on CUDA: losses bitwise stage 0's (relative error {err:.3e})")
                rec = next(json.loads(l) for l in open(os.path.join(run, "metrics.jsonl")) if '"type":"memory"' in l)
                check_device_memory(check, rec["measured_peak_bytes"][0], rec["predicted_bytes"],
                                    f"stage {stage} on CUDA")
        # Int8 parameter gathers (zero.gather_dtype) through NCCL on one GPU: zero.solo_path false
        # keeps stage 3's collectives at one rank, so the packed all-gather, the CUDA encoder and
        # decoder and their staging run; the CPU run of the same config is the reference.
        q = ["--set", "zero.stage=3", "--set", "zero.solo_path=false", "--set", "zero.gather_dtype=int8"]
        q_cpu, q_gpu = os.path.join(work, "cpu_int8"), os.path.join(work, "cuda_int8")
        p_qc, p_qg = train("cpu", q_cpu, 10, q), train("cuda", q_gpu, 10, q)
        if check(p_qc.returncode == 0 and p_qg.returncode == 0,
                 f"int8 gathers through NCCL on one GPU exit 0 ({p_qg.stderr[-400:]})"):
            err = rel(losses(q_gpu), losses(q_cpu))
            check(err <= TRAIN_LOSS_BOUND and len(losses(q_gpu)) == 10,
                  f"int8 gathers: CUDA losses within {TRAIN_LOSS_BOUND:g} of the CPU's (error {err:.3e})")
            rec = next(json.loads(l) for l in open(os.path.join(q_gpu, "metrics.jsonl")) if '"type":"memory"' in l)
            check_device_memory(check, rec["measured_peak_bytes"][0], rec["predicted_bytes"], "int8 gathers on CUDA")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
