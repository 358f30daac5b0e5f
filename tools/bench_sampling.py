#!/usr/bin/env python3
"""Sampling through the key/value cache against the whole window for every token, side by side:
`zerotrain sample --run DIR` with and without --no-kv-cache, on a GPT-2 124M-shaped model and a
Llama of the same width with grouped-query heads, each trained for one step on the CPU (random
weights: what is timed is the forward, not the text), sampled on the CPU or (--device cuda) a GPU,
in fp32 or (--dtype bf16) bf16 activations. The two modes take turns round by round (--rounds); each
time is the command's wall clock, weights loading (and on a GPU, CUDA's start) included, beside the
generation's own seconds as `sample` reports them on stderr; the figures are medians of rounds. The
tokens each mode drew are compared too (they match unless a draw falls within a rounding of a
boundary). Prints a table and writes --out (JSON).

usage: tools/bench_sampling.py [--zerotrain build/zerotrain] [--tokens 32 128] [--rounds 2]
                               [--device cpu|cuda] [--dtype f32|bf16] [--tiny]
                               [--out runs/results/sampling_bench_cpu.json]
"""
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from repo_commit import binary_commit, head_commit  # noqa: E402
from result_paths import OneLineParser, check_out_file, default_out, run_main, temporary_work  # noqa: E402

MODELS = {
    "GPT-2 124M": {"arch": "gpt2", "n_layer": 12, "n_head": 12, "n_embd": 768, "block_size": 1024,
                   "vocab_size": 50257},
    "Llama 12x768 GQA": {"arch": "llama", "n_layer": 12, "n_head": 12, "n_kv_head": 4, "n_embd": 768,
                         "block_size": 1024, "vocab_size": 32000, "intermediate_size": 2048},
}
SEQ_LEN = 1024  # the run's seq_len: the most positions `sample --run` attends to
# --tiny (the tests' smoke run): the same two families at a few thousand parameters, a context of 64.
TINY = {"n_layer": 2, "n_head": 4, "n_embd": 32, "block_size": 64}
TINY_LLAMA = {"n_kv_head": 2, "intermediate_size": 64}
TINY_SEQ_LEN = 64


def train_one_step(zerotrain, model, run_dir, work, seq_len=SEQ_LEN):
    cfg = {"device": "cpu", "model": model, "data": {"dataset": "embedded"},
           "train": {"micro_batch": 1, "seq_len": seq_len, "max_steps": 1, "eval_every": 0, "eval_batches": 1,
                     "num_threads": os.cpu_count() or 1},
           "log": {"sample_tokens": 0, "progress": "plain"}}
    path = os.path.join(work, "config.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    p = subprocess.run([zerotrain, "train", "--config", path, "--run-dir", run_dir], capture_output=True, text=True,
                       timeout=1800)
    if p.returncode != 0:
        sys.exit(f"bench_sampling: training failed (exit {p.returncode}): {(p.stdout + p.stderr)[-1200:]}")
    return cfg


GENERATED = re.compile(r"zerotrain sample: (\d+) tokens in ([0-9.]+) s")


def sample(zerotrain, run_dir, tokens, cached, device, dtype):
    """(wall seconds, generation seconds as sample reports them, the text)."""
    cmd = [zerotrain, "sample", "--run", run_dir, "--prompt", "the ", "--tokens", str(tokens), "--seed", "7",
           "--device", device, "--dtype", dtype]
    if not cached:
        cmd.append("--no-kv-cache")
    start = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - start
    generated = GENERATED.search(p.stderr)
    if p.returncode != 0 or not generated:
        sys.exit(f"bench_sampling: {' '.join(cmd)} failed (exit {p.returncode}): {(p.stdout + p.stderr)[-1200:]}")
    return seconds, float(generated.group(2)), p.stdout


def main():
    p = OneLineParser("bench_sampling", description=__doc__.split("\n\n")[0])
    p.add_argument("--zerotrain", default=os.path.join(ROOT, "build", "zerotrain"),
                   help="the zerotrain binary that trains and samples (default: %(default)s)")
    p.add_argument("--tokens", type=int, nargs="+", default=[32, 128],
                   help="tokens to sample, one row per count (default: 32 128)")
    p.add_argument("--rounds", type=int, default=2,
                   help="rounds, each timing both modes once; the figures are medians of rounds (default: %(default)s)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="where the sampling runs (default: %(default)s)")
    p.add_argument("--dtype", choices=["f32", "bf16"], default="f32",
                   help="the sampling's activations (default: %(default)s)")
    p.add_argument("--tiny", action="store_true",
                   help="tiny models (the script's own test), not 124M-sized ones (default: off)")
    p.add_argument("--out", default=default_out("sampling_bench_cpu.json"), help="the result JSON (default: %(default)s)")
    a = p.parse_args()
    check_out_file("bench_sampling", a.out)
    if min(a.tokens) < 1 or a.rounds < 1:
        p.error("--tokens and --rounds take positive counts")
    if not os.access(a.zerotrain, os.X_OK):
        p.error(f"--zerotrain {a.zerotrain}: no such program (build it: cmake --build build)")
    gpu = None
    if a.device == "cuda":  # the GPU benchmarks' own query: one line and an exit where there is none
        from bench_harness import device_facts
        gpu = "{} (driver {})".format(*device_facts())
    work = temporary_work("zt_sampling_bench_")
    result = {"benchmark": f"zerotrain sample: key/value cache against the whole window per token, {a.device}",
              "commit": os.environ.get("ZT_COMMIT") or binary_commit(a.zerotrain) or head_commit() or "unknown", "machine": platform.node(),
              "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "rounds": a.rounds,
              "device": a.device, "dtype": a.dtype, "gpu": gpu,
              "timing": "wall clock of `zerotrain sample --run`, loading the weights included (*_s), and the "
                        "generation alone as sample reports it: its models' set-up and the prompt included "
                        "(*_generate_s)", "models": {}}
    seq_len = TINY_SEQ_LEN if a.tiny else SEQ_LEN
    for name, model in MODELS.items():
        if a.tiny:
            model = {**model, **TINY, **(TINY_LLAMA if model["arch"] == "llama" else {})}
        run_dir = os.path.join(work, "run")
        shutil.rmtree(run_dir, ignore_errors=True)
        cfg = train_one_step(a.zerotrain, model, run_dir, work, seq_len)
        rows = []
        for n in a.tokens:
            times = {"cached": [], "window": []}
            generate = {"cached": [], "window": []}
            texts = {}
            for _ in range(a.rounds):
                for mode in ("cached", "window"):
                    seconds, gen, texts[mode] = sample(a.zerotrain, run_dir, n, mode == "cached", a.device, a.dtype)
                    times[mode].append(seconds)
                    generate[mode].append(gen)
            cached, window = statistics.median(times["cached"]), statistics.median(times["window"])
            cached_gen, window_gen = statistics.median(generate["cached"]), statistics.median(generate["window"])
            rows.append({"tokens": n, "cached_s": cached, "window_s": window, "cached_s_per_round": times["cached"],
                         "window_s_per_round": times["window"], "window_over_cached": window / cached,
                         "cached_generate_s": cached_gen, "window_generate_s": window_gen,
                         "cached_tokens_per_s": n / cached_gen, "window_tokens_per_s": n / window_gen,
                         "same_text": texts["cached"] == texts["window"]})
        label = f"{name} (tiny: {model['n_layer']}x{model['n_embd']})" if a.tiny else name
        result["models"][label] = {"model": cfg["model"], "seq_len": seq_len, "rows": rows}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    where = result["gpu"] if a.device == "cuda" else f"{os.cpu_count()} cores"
    print(f"zerotrain sample on {where}, {a.dtype}, prompt 'the ', median of {a.rounds} rounds; "
          f"commit {result['commit'][:12]}")
    print(f"{'model':<28} {'tokens':>6} {'cached s':>9} {'window s':>9} {'window/cached':>14} "
          f"{'cached tok/s':>13} {'window tok/s':>13} {'same text':>10}")
    for name, m in result["models"].items():
        for r in m["rows"]:
            print(f"{name:<28} {r['tokens']:>6} {r['cached_s']:>9.2f} {r['window_s']:>9.2f} "
                  f"{r['window_over_cached']:>14.2f} {r['cached_tokens_per_s']:>13.1f} {r['window_tokens_per_s']:>13.1f} "
                  f"{'yes' if r['same_text'] else 'no':>10}")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    sys.exit(run_main("bench_sampling", main))
