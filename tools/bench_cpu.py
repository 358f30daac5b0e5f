"""CPU training throughput: zerotrain against PyTorch on the same GPT config, same machine, same BLAS.

Trains the config for --steps steps in `zerotrain train` and in a float32 PyTorch GPT-2
(tools/bench_cpu_torch.py, run as a subprocess with OPENBLAS_CORETYPE set to the core zerotrain
uses and OMP/OPENBLAS thread counts = --threads), then prints and writes (--out) the median ms/step
after --warmup steps, tokens/s, achieved GFLOP/s and the fraction of the sgemm peak that
build/tools/zt_bench_sgemm measures at the same thread count. FLOPs are model FLOPs, the same count
for both sides: flops/token = 6*N + 6*L*C*T, N = every parameter including the embeddings with the
vocabulary padded to a multiple of 64 as zerotrain pads it (the attention term counts the causal
half of QK^T and AV). Prints PASS/FAIL against the issue's targets (speedup >= 2x, >= 60% of the
sgemm peak) but exits 0 either way: 1 only when a side failed to run, 2 on bad flags.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET_SPEEDUP = 2.0
TARGET_PEAK_FRACTION = 0.6
SGEMM_SIZE = 2048
DEFAULT_CONFIG = {  # the benchmark: char-level (vocab 65) 4-layer GPT, f32, AdamW
    "model": {"n_layer": 4, "n_head": 4, "n_embd": 256, "block_size": 128, "vocab_size": 65, "dropout": 0.0},
    "train": {"micro_batch": 16, "seq_len": 128, "grad_accum": 1, "seed": 1337, "eval_every": 0},
    "optim": {"lr": 1e-4, "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.95},
    "precision": {"param_dtype": "f32"},
    "data": {"dataset": "embedded"},
    "log": {"sample_every": 0},
}


class BenchError(Exception):
    """A side failed to run; main prints it as one line and exits 1."""


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20, help="training steps per side (default 20)")
    p.add_argument("--warmup", type=int, default=5, help="leading steps left out of the median (default 5)")
    p.add_argument("--threads", type=int, default=2, help="CPU threads for both sides and sgemm (default 2)")
    p.add_argument("--zerotrain", default=str(REPO / "build" / "zerotrain"), help="zerotrain binary")
    p.add_argument("--sgemm", default=str(REPO / "build" / "tools" / "zt_bench_sgemm"), help="zt_bench_sgemm binary")
    p.add_argument("--out", default=str(REPO / "docs" / "results" / "cpu_bench.json"), help="result JSON")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override the benchmark config (both sides), e.g. --set model.n_layer=2")
    args = p.parse_args(argv)
    if args.steps < 1 or args.warmup < 0 or args.warmup >= args.steps:
        p.error(f"need steps >= 1 and 0 <= warmup < steps (got --steps {args.steps} --warmup {args.warmup})")
    if args.threads < 1:
        p.error(f"--threads must be >= 1 (got {args.threads})")
    config = json.loads(json.dumps(DEFAULT_CONFIG))
    for assignment in args.set:
        m = re.fullmatch(r"(\w+)\.(\w+)=(.*)", assignment)
        if not m:
            p.error(f"--set {assignment!r}: expected section.key=value")
        try:
            value = json.loads(m.group(3))
        except json.JSONDecodeError:
            value = m.group(3)
        config.setdefault(m.group(1), {})[m.group(2)] = value
    config["train"].update(max_steps=args.steps, num_threads=args.threads)
    return args, config


def model_flops_per_token(model, seq_len):
    """(flops per token, N, padded vocab): 6*N + 6*L*C*T with N counting the padded embedding."""
    L, C, V = model["n_layer"], model["n_embd"], model["vocab_size"]
    padded_vocab = (V + 63) // 64 * 64
    n_params = padded_vocab * C + model["block_size"] * C + L * (12 * C * C + 13 * C) + 2 * C
    return 6 * n_params + 6 * L * C * seq_len, n_params, padded_vocab


def run_checked(cmd, env=None, what=None):
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    except OSError as e:
        raise BenchError(f"{what or cmd[0]}: cannot run {cmd[0]}: {e.strerror}") from None
    if proc.returncode != 0:
        tail = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        raise BenchError(f"{what or cmd[0]} exited {proc.returncode}: {tail}")
    return proc.stdout


def thread_env(threads, core=None):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    if core:
        env["OPENBLAS_CORETYPE"] = core
    return env


def zerotrain_blas(zerotrain):
    """(core, source, version output) from `zerotrain version`: 'cpu blas: PATH core=SkylakeX (detected), ...'."""
    out = run_checked([zerotrain, "version"], what="zerotrain version")
    m = re.search(r"core=(\S+) \(([^)]*)\)", out)
    if not m:
        raise BenchError(f"zerotrain version printed no 'core=NAME (source)': {out.strip()!r}")
    return m.group(1), m.group(2), out.strip()


def run_sgemm(sgemm, threads):
    if not Path(sgemm).is_file():
        raise BenchError(f"{sgemm} not found: build it with `cmake --build build --target zt_bench_sgemm`")
    out = run_checked([sgemm, "--size", str(SGEMM_SIZE), "--threads", str(threads)], thread_env(threads), "zt_bench_sgemm")
    return json.loads(out.strip().splitlines()[-1])


def run_zerotrain(zerotrain, config, threads):
    """Step times (ms, by step) and tokens per step from `zerotrain train`'s metrics.jsonl."""
    with tempfile.TemporaryDirectory(prefix="zt_bench_") as tmp:
        config_path, run_dir = Path(tmp) / "bench.json", Path(tmp) / "run"
        config_path.write_text(json.dumps(config, indent=1))
        run_checked([zerotrain, "train", "--config", str(config_path), "--run-dir", str(run_dir)],
                    thread_env(threads), "zerotrain train")
        metrics = run_dir / "metrics.jsonl"
        if not metrics.is_file():
            raise BenchError(f"zerotrain train wrote no {metrics.name}")
        records = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    train = sorted((r for r in records if r.get("type") == "train"), key=lambda r: r["step"])
    steps = config["train"]["max_steps"]
    if len(train) != steps:
        raise BenchError(f"zerotrain train logged {len(train)} train steps, expected {steps}")
    return {"step_ms": [r["step_ms"] for r in train], "tokens_per_step": train[-1].get("tokens"),
            "final_loss": train[-1].get("loss")}


def run_torch(config, steps, threads, core):
    spec = {k: config[k] for k in ("model", "train", "optim")}
    spec.update(steps=steps, threads=threads, foreach=None)  # None: torch's default AdamW loop
    cmd = [sys.executable, str(Path(__file__).with_name("bench_cpu_torch.py")), "--spec", json.dumps(spec)]
    out = run_checked(cmd, thread_env(threads, core), "PyTorch benchmark")
    return json.loads(out.strip().splitlines()[-1])


def summarize(step_ms, warmup, tokens_per_step, flops_per_token, peak_gflops):
    median_ms = statistics.median(step_ms[warmup:])
    tokens_per_s = tokens_per_step / (median_ms / 1e3)
    gflops = flops_per_token * tokens_per_s / 1e9
    return {"ms_per_step_median": median_ms, "ms_per_step_min": min(step_ms[warmup:]), "step_ms": step_ms,
            "tokens_per_s": tokens_per_s, "gflops": gflops, "fraction_of_sgemm_peak": gflops / peak_gflops}


def cpu_counters():
    """(busy s, steal s) over all cores from /proc/stat, this process's CPU s (children included), wall s."""
    fields = [int(x) / os.sysconf("SC_CLK_TCK") for x in open("/proc/stat").readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    t = os.times()
    return user + nice + system + irq + softirq, steal, t.user + t.system + t.children_user + t.children_system, t.elapsed


def cpu_competition(start):
    """Cores' worth of CPU that other processes, and the hypervisor (steal), took while we measured."""
    end = cpu_counters()
    busy, steal, ours, wall = (e - s for e, s in zip(end, start))
    return {"other_processes_cores": max(0.0, busy - ours) / wall, "steal_cores": steal / wall}


def machine_info():
    cpu = "unknown"
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu_model": cpu, "cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
            "hostname": platform.node()}


def git_commit():
    if not shutil.which("git"):
        return None, None
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"], capture_output=True, text=True)
    return (commit.stdout.strip() or None), bool(dirty.stdout.strip())


def warnings(r):
    """Conditions that make the numbers unreliable or not comparable, said next to the table."""
    found = []
    other = r["machine"]["cpu_competition"]
    if other["other_processes_cores"] > 0.2 or other["steal_cores"] > 0.1:
        found.append(f"other processes used {other['other_processes_cores']:.2f} cores and the hypervisor stole "
                     f"{other['steal_cores']:.2f} while this ran: timings are unreliable; rerun on an idle machine")
    cores = {r["zerotrain"]["blas_core"], r["sgemm"]["core"], r["pytorch"]["blas"]["core"]}
    if len(cores) > 1:
        found.append(f"BLAS cores differ: zerotrain {r['zerotrain']['blas_core']}, sgemm {r['sgemm']['core']}, "
                     f"PyTorch {r['pytorch']['blas']['core']}")
    if r["threads"] > r["machine"]["usable_cores"]:
        found.append(f"--threads {r['threads']} exceeds the {r['machine']['usable_cores']} usable cores")
    return found


def print_table(r):
    m, t, fl = r["config"]["model"], r["config"]["train"], r["flops"]
    print(f"\nCPU training step: GPT {m['n_layer']}L/{m['n_head']}H/{m['n_embd']}C, vocab {m['vocab_size']}, "
          f"B={t['micro_batch']} T={t['seq_len']} x{t.get('grad_accum', 1)} ({fl['tokens_per_step']} tokens/step), "
          f"{r['config']['precision']['param_dtype']}, {r['threads']} threads, median of steps "
          f"{r['warmup'] + 1}..{r['steps']}")
    print(f"machine: {r['machine']['cpu_model']}, {r['machine']['cores']} cores; BLAS core: zerotrain "
          f"{r['zerotrain']['blas_core']} ({r['zerotrain']['blas_core_source']}), PyTorch {r['pytorch']['blas']['core']} "
          f"({r['pytorch']['blas'].get('library', 'no OpenBLAS found')})")
    print(f"sgemm peak ({SGEMM_SIZE}^3, {r['sgemm']['threads']} threads, core {r['sgemm']['core']}): "
          f"{r['sgemm']['gflops']:.1f} GFLOP/s")
    print(f"flops/token = 6*N + 6*L*C*T = {fl['per_token'] / 1e6:.2f} MFLOP "
          f"(N = {fl['n_params']:,} incl. embeddings, vocab padded {m['vocab_size']} -> {fl['padded_vocab_size']})\n")
    print(f"{'':<11}{'ms/step':>10}{'min':>9}{'tokens/s':>11}{'GFLOP/s':>9}{'of peak':>9}")
    for name, key in (("zerotrain", "zerotrain"), ("PyTorch", "pytorch")):
        s = r[key]
        print(f"{name:<11}{s['ms_per_step_median']:>10.1f}{s['ms_per_step_min']:>9.1f}{s['tokens_per_s']:>11.0f}"
              f"{s['gflops']:>9.1f}{s['fraction_of_sgemm_peak']:>9.1%}")
    for warning in r["warnings"]:
        print(f"warning: {warning}")
    tg = r["targets"]
    print(f"\nspeedup (PyTorch ms / zerotrain ms): {r['speedup']:.2f}x   "
          f"target >= {tg['speedup_min']:.1f}x: {'PASS' if tg['speedup_pass'] else 'FAIL'}")
    print(f"zerotrain fraction of sgemm peak: {r['zerotrain']['fraction_of_sgemm_peak']:.1%}   "
          f"target >= {tg['fraction_of_peak_min']:.0%}: {'PASS' if tg['fraction_pass'] else 'FAIL'}")


def main(argv=None):
    args, config = parse_args(argv)
    t = config["train"]
    flops_per_token, n_params, padded_vocab = model_flops_per_token(config["model"], t["seq_len"])
    machine = machine_info()
    counters_at_start = cpu_counters()
    try:
        core, core_source, version = zerotrain_blas(args.zerotrain)
        print(f"bench_cpu: zerotrain BLAS core {core} ({core_source}); measuring sgemm peak", flush=True)
        sgemm = run_sgemm(args.sgemm, args.threads)
        print(f"bench_cpu: sgemm {sgemm['gflops']:.1f} GFLOP/s; training {args.steps} steps in zerotrain", flush=True)
        zt = run_zerotrain(args.zerotrain, config, args.threads)
        print(f"bench_cpu: training {args.steps} steps in PyTorch (OPENBLAS_CORETYPE={core})", flush=True)
        torch_run = run_torch(config, args.steps, args.threads, core)
    except BenchError as e:
        print(f"bench_cpu: error: {e}", file=sys.stderr)
        return 1
    tokens_per_step = zt["tokens_per_step"] or t["micro_batch"] * t["seq_len"] * t.get("grad_accum", 1)
    machine["cpu_competition"] = cpu_competition(counters_at_start)
    commit, dirty = git_commit()
    result = {
        "benchmark": "cpu_train_step", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": commit, "git_dirty": dirty, "machine": machine, "config": config,
        "steps": args.steps, "warmup": args.warmup, "threads": args.threads,
        "flops": {"per_token": flops_per_token, "formula": "6*N + 6*L*C*T", "n_params": n_params,
                  "padded_vocab_size": padded_vocab, "tokens_per_step": tokens_per_step,
                  "note": "model FLOPs, same count for both sides; N includes embeddings (vocab padded to 64)"},
        "sgemm": sgemm,
        "zerotrain": {**summarize(zt["step_ms"], args.warmup, tokens_per_step, flops_per_token, sgemm["gflops"]),
                      "blas_core": core, "blas_core_source": core_source, "version": version,
                      "final_loss": zt["final_loss"]},
        "pytorch": {**summarize(torch_run["step_ms"], args.warmup, tokens_per_step, flops_per_token, sgemm["gflops"]),
                    "torch_version": torch_run["torch_version"], "torch_threads": torch_run["threads"],
                    "adamw_foreach": torch_run["foreach"], "blas": torch_run["blas"],
                    "final_loss": torch_run["losses"][-1], "env": {"OPENBLAS_CORETYPE": core}},
    }
    result["warnings"] = warnings(result)
    result["speedup"] = result["pytorch"]["ms_per_step_median"] / result["zerotrain"]["ms_per_step_median"]
    result["targets"] = {
        "speedup_min": TARGET_SPEEDUP, "speedup_pass": result["speedup"] >= TARGET_SPEEDUP,
        "fraction_of_peak_min": TARGET_PEAK_FRACTION,
        "fraction_pass": result["zerotrain"]["fraction_of_sgemm_peak"] >= TARGET_PEAK_FRACTION}
    print_table(result)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"\nbench_cpu: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
