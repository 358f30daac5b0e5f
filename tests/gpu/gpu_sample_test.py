#!/usr/bin/env python3
"""`zerotrain sample --device cuda` against the same command on the CPU: a GPT-2 (fp32 parameters)
and a Llama (bf16 parameters, grouped-query attention) trained a few steps on the CPU, then sampled
from the run's final weights (--run), from its checkpoint (--ckpt) and from the checkpoint's Hugging
Face export (--from) at temperature 1 over the whole vocabulary (varied text from a barely trained
model; each draw's uniform number comes from Philox at the seed and position on either device, so
the texts could differ only where a logit's rounding moved a boundary of the cumulative
distribution across a draw, about one in 10^4 draws with fp32 logits agreeing to 1e-6):

  * through the key/value cache (the prompt and the draws fit the context) from each source, and
    from the checkpoint with the window sliding past it, on the GPU the same text as on the CPU
    (fp32 activations and products on both);
  * on the GPU, the cache and the whole window per token (--no-kv-cache) give the same text;
  * with --dtype bf16 the GPU samples through its bf16 kernels (the text's length only: their
    roundings are not the CPU's);
  * the GPU run names its device on stderr;
  * `zerotrain eval --device cuda` scores a multiple-choice file as the CPU does.

About 440 draws are compared, so a boundary flip fails roughly one run in twenty with nothing
wrong: two texts that differ are drawn again at another seed (--seed 2), and only a second
difference fails (a wrong kernel moves more than one draw in a thousand); the first differing
position is printed either way.

Exits 77 (a ctest skip) when this build sees no CUDA device.

usage: gpu_sample_test.py --zerotrain PATH --gpt-config configs/tiny_debug.json
                          --llama-config configs/llama_tiny_debug.json
"""
import argparse
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402
from choice_file_util import write_choice_file  # noqa: E402
from cuda_presence import require_cuda_device  # noqa: E402

CONTEXT = 64


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zerotrain", required=True)
    parser.add_argument("--gpt-config", required=True)
    parser.add_argument("--llama-config", required=True)
    args = parser.parse_args()
    missing = require_cuda_device(args.zerotrain, "sampling on the GPU")
    if missing is not None:
        return missing
    checks = Checks()
    check = checks.check
    work = checks.work_folder("zt_gpu_sample_")

    def train(name, config, param_dtype):
        cfg = json.load(open(config))
        cfg["model"]["block_size"] = CONTEXT
        cfg["train"].update({"seq_len": CONTEXT, "max_steps": 30, "eval_batches": 1})
        cfg["precision"] = {"param_dtype": param_dtype}
        cfg["checkpoint"] = {"every_steps": 30}
        cfg["log"] = {"sample_tokens": 0, "progress": "plain"}
        path = os.path.join(work, f"{name}.json")
        json.dump(cfg, open(path, "w"))
        run_dir = os.path.join(work, name)
        p = subprocess.run([args.zerotrain, "train", "--config", path, "--run-dir", run_dir], capture_output=True,
                           text=True, timeout=600)
        check(p.returncode == 0, f"{name}: trains 30 steps on the CPU (exit {p.returncode}: {p.stderr.strip()[-300:]})")
        return run_dir

    def sample(source, device, tokens, extra=()):
        p = subprocess.run([args.zerotrain, "sample", *source, "--device", device, "--tokens", str(tokens),
                            "--top-k", "0", "--temperature", "1", "--prompt", "the ", *extra], capture_output=True, text=True, timeout=300)
        return p.returncode, p.stdout, p.stderr

    def same_text(what, first, second):
        """Whether two samplings (each a function of the extra arguments returning sample()'s
        triple) draw the same text at seed 1, or else at seed 2 (a lone boundary flip); prints the
        first difference. Returns (same, first's triple, second's triple) at the seed that decided."""
        for seed in ("1", "2"):
            a, b = first(["--seed", seed]), second(["--seed", seed])
            if a[1] == b[1]:
                return True, a, b
            at = next((i for i, (x, y) in enumerate(zip(a[1], b[1])) if x != y), min(len(a[1]), len(b[1])))
            print(f"{what}: seed {seed}: the texts differ from character {at} "
                  f"({a[1][max(0, at - 10):at + 10]!r} / {b[1][max(0, at - 10):at + 10]!r})")
        return False, a, b

    for name, config, dtype in (("gpt2_f32", args.gpt_config, "f32"), ("llama_bf16", args.llama_config, "bf16")):
        run_dir = train(name, config, dtype)
        # Its export, as pretrained weights for --from.
        hf = os.path.join(work, f"{name}_hf")
        p = subprocess.run([args.zerotrain, "ckpt", "export", os.path.join(run_dir, "checkpoints"), "--format", "hf",
                            "--out", hf], capture_output=True, text=True, timeout=300)
        check(p.returncode == 0, f"{name}: exports to a Hugging Face folder ({p.stderr.strip()[-300:]})")
        # `zerotrain eval` on the GPU: the CPU's multiple-choice score (fp32 on both).
        rng = random.Random(3)
        examples = [(rng.randrange(4), [rng.randrange(65) for _ in range(rng.randrange(3, 9))],
                     [[rng.randrange(65) for _ in range(rng.randrange(2, 7))] for _ in range(4)]) for _ in range(30)]
        choices = os.path.join(work, f"{name}_choices.bin")
        write_choice_file(choices, examples)
        scored = {}
        for device in ("cpu", "cuda"):
            p = subprocess.run([args.zerotrain, "eval", "--ckpt", os.path.join(run_dir, "checkpoints"), "--choices",
                                choices, "--device", device], capture_output=True, text=True, timeout=300)
            scored[device] = (p.returncode, p.stdout.strip(), p.stderr.strip()[-300:])
        check(scored["cpu"][0] == 0 and scored["cuda"][:2] == scored["cpu"][:2],
              f"{name}: zerotrain eval scores on the GPU as on the CPU ({scored})")
        # Each source through the cache (40 new tokens after the 4-token prompt fit the context); the
        # checkpoint also past it (100: the window slides), in bf16, and with the whole window per
        # token. (Each invocation starts CUDA anew: the lease's seconds go to what differs.)
        ckpt = ["--ckpt", os.path.join(run_dir, "checkpoints")]
        for source, lengths in ((["--run", run_dir], (40,)), (ckpt, (40, 100)), (["--from", hf], (40,))):
            what = f"{name} {source[0]}"
            for tokens in lengths:
                same, (rc_cpu, cpu, _), (rc_gpu, gpu, err) = same_text(
                    f"{what}, {tokens} tokens", lambda seed: sample(source, "cpu", tokens, seed),
                    lambda seed: sample(source, "cuda", tokens, seed))
                check(rc_cpu == 0 and rc_gpu == 0 and len(cpu) > tokens and same,
                      f"{what}, {tokens} tokens: the GPU's text is the CPU's (exit {rc_cpu}/{rc_gpu}; "
                      f"cpu {cpu[:60]!r}, cuda {gpu[:60]!r}; {err.strip()[-300:]})")
                check("zerotrain: on cuda:" in err, f"{what}: names the device on stderr ({err.strip()[:120]!r})")
        # bf16 (--dtype): the GPU's bf16 kernels, whose roundings are not the CPU's: the length only.
        rc, text, err = sample(ckpt, "cuda", 40, ["--dtype", "bf16"])
        check(rc == 0 and len(text) > 40, f"{name}: 40 tokens in bf16 on the GPU ({err.strip()[-300:]})")
        same, (rc, cached, _), (rc_window, window, _) = same_text(
            f"{name} cache / window", lambda seed: sample(ckpt, "cuda", 40, seed),
            lambda seed: sample(ckpt, "cuda", 40, ["--no-kv-cache", *seed]))
        check(rc == 0 and rc_window == 0 and same,
              f"{name}: on the GPU the cache's text is the whole window's ({cached[:60]!r} / {window[:60]!r})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
