"""CPU training throughput: zerotrain against PyTorch on the same model config, same machine, same BLAS.

Trains the config for --steps steps in `zerotrain train` and in a float32 PyTorch GPT-2, or a
Llama with --set model.arch=llama (tools/bench_cpu_torch.py, run as a subprocess with
OPENBLAS_CORETYPE set to the core zerotrain uses and OMP/OPENBLAS thread counts = --threads; its
parameter count checked against zerotrain's own, `zerotrain memory --json`), then prints and
writes (--out) the median ms/step after --warmup steps, tokens/s, achieved GFLOP/s and the
fraction of the sgemm peak that
build/tools/zt_bench_sgemm measures at the same thread count. FLOPs are model FLOPs, the same count
for both sides: flops/token = 6*N + 6*L*C*T, N = every parameter including the embeddings with the
vocabulary padded to a multiple of 64 as zerotrain pads it (the attention term counts the causal
half of QK^T and AV). Prints PASS/FAIL against the project's CPU targets (speedup >= 2x, >= 60% of the
sgemm peak; no share of a peak that a side outran, and no verdict where other processes took more
than 0.2 cores while it measured: "not judged (measured under load)") but exits 0 either way: 1
only when a side failed to run, 2 on bad flags.

PyTorch runs twice (--torch-blas): "PyTorch" with Debian's libblas.so.3 (the pthread OpenBLAS by
default: the targets' baseline), and "PyTorch/zt" with LD_LIBRARY_PATH pointing at the directory of
the OpenBLAS zerotrain loads (the OpenMP build), so its BLAS shares torch's OpenMP thread pool
instead of spinning a second pool on the same cores. The speedup is reported against both.
Both PyTorch sides run with OMP_WAIT_POLICY=passive (--torch-wait-policy): torch's OpenMP threads
otherwise spin between its ops on the cores its pthread OpenBLAS computes on, which made the
system-BLAS side several times slower (a trial: 2746-4019 against 462-586 ms a step at the default
config, docs/performance.md); a user tunes that away, so the baseline is the tuned one. Each side's
JSON records the OMP_WAIT_POLICY it ran with (zerotrain's: the environment's, "" where unset).
The sides run in --rounds interleaved rounds (default 3), each round starting with the next side (a
rotation): a side's figure is the median of its rounds' medians, a speedup the median of each
round's own ratio, not the ratio of the medians (the JSON keeps every round's, and the table their
range). With several rounds a side's `step_ms` holds every round's steps one after the other, each
with its own warm-up steps (`step_ms_by_round` splits them).
"""
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
from repo_commit import head_commit, tree_dirty, version_commit  # noqa: E402
from bench_cpu_model import model_flops_per_token, params_without_padding, set_llama_widths  # noqa: E402
from result_paths import OneLineParser, check_out_file, check_program, default_out, run_main  # noqa: E402
from bench_cpu_report import (TORCH_SIDES, cpu_competition, cpu_counters, machine_info, over_peak,  # noqa: E402
                              print_table, under_load, warnings)
TARGET_SPEEDUP = 2.0
TARGET_PEAK_FRACTION = 0.6
SGEMM_SIZE = 2048
DEFAULT_CONFIG = {  # the CPU targets' benchmark: char-level (vocab 65) 4-layer GPT, f32, AdamW
    "model": {"n_layer": 4, "n_head": 4, "n_embd": 256, "block_size": 128, "vocab_size": 65, "dropout": 0.0},
    "train": {"micro_batch": 16, "seq_len": 128, "grad_accum": 1, "seed": 1337, "eval_every": 0},
    "optim": {"lr": 1e-4, "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.95},
    "precision": {"param_dtype": "f32"},
    "data": {"dataset": "embedded"},
    "log": {"sample_every": 0},
}


class BenchError(Exception):
    """A side failed to run; main prints it as one line and exits 1."""


class ConfigRefused(Exception):
    """zerotrain refuses the benchmark's config (a --set): main prints its line and exits 2."""


def parse_args(argv):
    p = OneLineParser("bench_cpu", description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20, help="training steps per side (default 20)")
    p.add_argument("--warmup", type=int, default=5, help="leading steps left out of the median (default 5)")
    p.add_argument("--threads", type=int, default=2, help="CPU threads for both sides and sgemm (default 2)")
    p.add_argument("--rounds", type=int, default=3,
                   help="interleaved rounds, each running every side once, each starting with the next side "
                        "(default 3): figures are medians over the rounds, ratios the median of each round's")
    p.add_argument("--zerotrain", default=str(REPO / "build" / "zerotrain"),
                   help="zerotrain binary (default: %(default)s)")
    p.add_argument("--sgemm", default=str(REPO / "build" / "tools" / "zt_bench_sgemm"),
                   help="zt_bench_sgemm binary, which measures the peak (default: %(default)s)")
    p.add_argument("--out", default=default_out("cpu_bench.json"), help="result JSON (default runs/results/cpu_bench.json)")
    p.add_argument("--torch-blas", choices=("both", "system", "zerotrain"), default="both",
                   help="PyTorch with the system libblas.so.3, with zerotrain's OpenBLAS build, or both "
                        "(default: %(default)s)")
    p.add_argument("--torch-wait-policy", choices=("passive", "active", "inherit"), default="passive",
                   help="OMP_WAIT_POLICY for the PyTorch sides (inherit: the environment's) (default: %(default)s)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override the benchmark config (both sides), e.g. --set model.n_layer=2")
    args = p.parse_args(argv)
    if args.steps < 1 or args.warmup < 0 or args.warmup >= args.steps:
        p.error(f"need steps >= 1 and 0 <= warmup < steps (got --steps {args.steps} --warmup {args.warmup})")
    if args.threads < 1:
        p.error(f"--threads must be >= 1 (got {args.threads})")
    if args.rounds < 1:
        p.error(f"--rounds must be >= 1 (got {args.rounds})")
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
    # The PyTorch side (tools/bench_cpu_torch.py) and the FLOPs know GPT-2 and the Llama: another
    # family would be timed against a different model.
    arch = config["model"].setdefault("arch", "gpt2")
    if arch not in ("gpt2", "llama"):
        p.error(f"--set model.arch={arch!r}: the benchmark compares GPT-2 and Llama models only")
    for section, key in (("model", "n_layer"), ("model", "n_head"), ("model", "n_embd"), ("model", "block_size"),
                         ("model", "vocab_size"), ("train", "micro_batch"), ("train", "seq_len"), ("train", "grad_accum")):
        value = config[section].get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            p.error(f"--set {section}.{key}={value!r}: expected a positive whole number")
    if arch == "llama":
        try:
            set_llama_widths(config["model"])
        except ValueError as e:
            p.error(str(e))
    config["train"].update(max_steps=args.steps, num_threads=args.threads)
    check_program("bench_cpu", args.zerotrain)
    check_program("bench_cpu", args.sgemm, "--sgemm")
    check_out_file("bench_cpu", args.out)
    return args, config


def check_config(zerotrain, sets):
    """The --set flags on the benchmark's config as zerotrain reads them, before anything is measured:
    what `zerotrain memory` refuses (exit 2) is ConfigRefused, in its own line naming the --set."""
    with tempfile.TemporaryDirectory(prefix="zt_bench_") as tmp:
        path = Path(tmp) / "bench.json"
        path.write_text(json.dumps(DEFAULT_CONFIG))
        cmd = [zerotrain, "memory", "--config", str(path), "--ranks", "1", "--brief"]
        try:
            proc = subprocess.run(cmd + [flag for kv in sets for flag in ("--set", kv)], capture_output=True, text=True)
        except OSError as e:
            raise BenchError(f"zerotrain memory: cannot run {zerotrain}: {e.strerror}") from None
    if proc.returncode == 2:
        said = (proc.stderr.strip().splitlines() or ["no message"])[-1].removeprefix("zerotrain: error: ")
        raise ConfigRefused("zerotrain refuses the benchmark's config: " + said.replace(str(path), "its config"))


def zerotrain_params(zerotrain, config, n_params):
    """zerotrain's own parameter count of the config (`zerotrain memory --json`'s params), which the
    FLOPs formula's N must equal: a formula that missed a tensor would misstate every figure."""
    with tempfile.TemporaryDirectory(prefix="zt_bench_") as tmp:
        path = Path(tmp) / "bench.json"
        path.write_text(json.dumps(config, indent=1))
        out = run_checked([zerotrain, "memory", "--config", str(path), "--ranks", "1", "--json"],
                          what="zerotrain memory")
    try:
        params = json.loads(out)["params"]
    except (ValueError, KeyError, TypeError):
        raise BenchError(f"zerotrain memory --json printed no params: {out.strip()[-200:]!r}") from None
    if params != n_params:
        raise BenchError(f"zerotrain's model has {params} parameters, the FLOPs formula counts {n_params}")
    return params


def check_same_model(model, n_params, padded_vocab, torch_run):
    """The PyTorch side's parameter count must be zerotrain's (n_params, checked by zerotrain_params)
    less the vocabulary padding (PyTorch keeps the true vocabulary): a different count means a
    different model was timed."""
    expected = params_without_padding(model, n_params, padded_vocab)
    if torch_run.get("n_params") != expected:
        raise BenchError(f"the PyTorch model has {torch_run.get('n_params')} parameters, zerotrain's {expected} "
                         f"(without its vocabulary padding): not the same model")


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
    """{core, core_source, library, version} from `zerotrain version`: 'cpu blas: PATH core=SkylakeX (detected), ...'."""
    out = run_checked([zerotrain, "version"], what="zerotrain version")
    m = re.search(r"cpu blas: (\S+) core=(\S+) \(([^)]*)\)", out)
    if not m:
        raise BenchError(f"zerotrain version printed no 'cpu blas: PATH core=NAME (source)': {out.strip()!r}")
    return {"library": m.group(1), "core": m.group(2), "core_source": m.group(3), "version": out.strip()}


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


def run_torch(config, steps, threads, core, library_dir=None, wait_policy="passive"):
    """bench_cpu_torch.py's result; library_dir first on LD_LIBRARY_PATH picks its libblas.so.3;
    wait_policy its OMP_WAIT_POLICY ("inherit": the environment's)."""
    spec = {k: config[k] for k in ("model", "train", "optim")}
    spec.update(steps=steps, threads=threads, foreach=None)  # None: torch's default AdamW loop
    cmd = [sys.executable, str(Path(__file__).with_name("bench_cpu_torch.py")), "--spec", json.dumps(spec)]
    env = thread_env(threads, core)
    if wait_policy != "inherit":
        env["OMP_WAIT_POLICY"] = wait_policy
    if library_dir:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [library_dir, env.get("LD_LIBRARY_PATH")]))
    out = run_checked(cmd, env, "PyTorch benchmark" + (f" (LD_LIBRARY_PATH={library_dir})" if library_dir else ""))
    result = json.loads(out.strip().splitlines()[-1])
    result["env"] = {k: env[k] for k in ("OPENBLAS_CORETYPE", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                         "LD_LIBRARY_PATH") if k in env and (k != "LD_LIBRARY_PATH" or library_dir)}
    result["env"]["OMP_WAIT_POLICY"] = result.pop("omp_wait_policy")  # as the PyTorch process read it
    return result


def zerotrain_blas_dir(library):
    """The directory of zerotrain's OpenBLAS when it also holds a libblas.so.3 torch can load, else None."""
    directory = Path(library).parent
    return str(directory) if Path(library).is_absolute() and (directory / "libblas.so.3").is_file() else None


def summarize(step_ms_by_round, warmup, tokens_per_step, flops_per_token, peak_gflops):
    """A side's figures from its rounds' step times: each round's median after the warm-up, and
    their median (one round: that round's)."""
    round_ms = [statistics.median(steps[warmup:]) for steps in step_ms_by_round]
    median_ms = statistics.median(round_ms)
    tokens_per_s = tokens_per_step / (median_ms / 1e3)
    gflops = flops_per_token * tokens_per_s / 1e9
    return {"ms_per_step_median": median_ms, "ms_per_step_by_round": round_ms,
            "ms_per_step_min": min(ms for steps in step_ms_by_round for ms in steps[warmup:]),
            "step_ms": [ms for steps in step_ms_by_round for ms in steps], "step_ms_by_round": step_ms_by_round,
            "tokens_per_s": tokens_per_s, "gflops": gflops, "fraction_of_sgemm_peak": gflops / peak_gflops}


def checkout_commit():
    """The checkout this tool ran from: (HEAD commit, whether tracked files have uncommitted changes), or
    (None, None) without git. Not the measured code's: the binary names that (version_commit)."""
    return head_commit(env=False), tree_dirty()


def main(argv=None):
    args, config = parse_args(argv)
    t = config["train"]
    flops_per_token, n_params, padded_vocab = model_flops_per_token(config["model"], t["seq_len"])
    machine = machine_info()
    counters_at_start = cpu_counters()
    torch_sides = {"pytorch": None}
    try:
        check_config(args.zerotrain, args.set)  # what zerotrain refuses, before anything is measured
        zt_blas = zerotrain_blas(args.zerotrain)
        core = zt_blas["core"]
        if args.torch_blas != "system":
            torch_sides["pytorch_zt_blas"] = zerotrain_blas_dir(zt_blas["library"])
            if torch_sides["pytorch_zt_blas"] is None:
                raise BenchError(f"no libblas.so.3 beside zerotrain's {zt_blas['library']}: use --torch-blas system")
            if args.torch_blas == "zerotrain":
                del torch_sides["pytorch"]
        zerotrain_params(args.zerotrain, config, n_params)  # a count the FLOPs formula misses: before measuring
        print(f"bench_cpu: zerotrain BLAS core {core} ({zt_blas['core_source']}); measuring sgemm peak", flush=True)
        sgemm = run_sgemm(args.sgemm, args.threads)
        print(f"bench_cpu: sgemm {sgemm['gflops']:.1f} GFLOP/s", flush=True)
        # Rounds in turn, each starting with the next side (a rotation), so that no side always runs
        # first or last while the machine drifts (three invocations in a row once gave zerotrain
        # 18% slower and a PyTorch side 22% faster in the middle one: docs/performance.md).
        sides = ["zerotrain", *torch_sides]
        runs = {key: [] for key in sides}
        order_by_round = []
        for r in range(args.rounds):
            order = sides[r % len(sides):] + sides[:r % len(sides)]
            order_by_round.append(order)
            for key in order:
                print(f"bench_cpu: round {r + 1} of {args.rounds}: {args.steps} steps in "
                      f"{'zerotrain' if key == 'zerotrain' else TORCH_SIDES[key]}"
                      + ("" if key == "zerotrain" else f" (OPENBLAS_CORETYPE={core}, "
                         f"OMP_WAIT_POLICY={args.torch_wait_policy}"
                         + (f", LD_LIBRARY_PATH={torch_sides[key]})" if torch_sides[key] else ")")), flush=True)
                try:
                    if key == "zerotrain":
                        runs[key].append(run_zerotrain(args.zerotrain, config, args.threads))
                    else:
                        runs[key].append(run_torch(config, args.steps, args.threads, core, torch_sides[key],
                                                   args.torch_wait_policy))
                        check_same_model(config["model"], n_params, padded_vocab, runs[key][-1])
                except BenchError as e:
                    raise BenchError(f"round {r + 1} of {args.rounds}: {e}") from None
        zt_runs = runs.pop("zerotrain")
        torch_runs = runs
    except ConfigRefused as e:
        print(f"bench_cpu: {e}", file=sys.stderr)
        return 2
    except BenchError as e:
        print(f"bench_cpu: error: {e}", file=sys.stderr)
        return 1
    tokens_per_step = zt_runs[0]["tokens_per_step"] or t["micro_batch"] * t["seq_len"] * t.get("grad_accum", 1)
    machine["cpu_competition"] = cpu_competition(counters_at_start)
    checkout, checkout_dirty = checkout_commit()

    def side(rounds):
        return summarize([run["step_ms"] for run in rounds], args.warmup, tokens_per_step, flops_per_token,
                         sgemm["gflops"])

    result = {
        "benchmark": "cpu_train_step", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        # The measured code: the commit the zerotrain binary was built from, as it reports it ("+dirty":
        # built with uncommitted changes); the checkout the tool ran from may differ.
        "commit": version_commit(zt_blas["version"]), "checkout_commit": checkout, "checkout_dirty": checkout_dirty,
        "machine": machine, "config": config,
        "steps": args.steps, "warmup": args.warmup, "threads": args.threads, "rounds": args.rounds,
        "order_by_round": order_by_round,
        "flops": {"per_token": flops_per_token, "formula": "6*N + 6*L*C*T", "n_params": n_params,
                  "padded_vocab_size": padded_vocab, "tokens_per_step": tokens_per_step,
                  "note": "model FLOPs, same count for both sides; N includes embeddings (vocab padded to 64)"},
        "sgemm": sgemm,
        "zerotrain": {**side(zt_runs), "blas_core": core, "blas_core_source": zt_blas["core_source"],
                      "blas_library": zt_blas["library"], "version": zt_blas["version"],
                      "env": {"OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "")},
                      "final_loss": zt_runs[-1]["final_loss"]},
    }
    for key, rounds in torch_runs.items():
        run = rounds[-1]
        result[key] = {**side(rounds), "torch_version": run["torch_version"], "torch_threads": run["threads"],
                       "adamw_foreach": run["foreach"], "blas": run["blas"], "env": run["env"],
                       "final_loss": run["losses"][-1], "label": TORCH_SIDES[key]}
    result["sgemm"]["peak_unreliable"] = bool(over_peak(result))
    result["warnings"] = warnings(result)
    loaded = under_load(result["machine"]["cpu_competition"])
    # Each round's ratio of its two medians (same-round pairs), and their median.
    zt_round_ms = result["zerotrain"]["ms_per_step_by_round"]
    result["speedup_by_round"] = {key: [ms / z for ms, z in zip(result[key]["ms_per_step_by_round"], zt_round_ms)]
                                  for key in torch_runs}
    result["speedup"] = {key: statistics.median(v) for key, v in result["speedup_by_round"].items()}
    result["targets"] = {
        # None: not judged, measured while other processes took cores (under_load: warned)
        "speedup_min": TARGET_SPEEDUP,
        "speedup_pass": {k: None if loaded else v >= TARGET_SPEEDUP for k, v in result["speedup"].items()},
        "fraction_of_peak_min": TARGET_PEAK_FRACTION,
        # None: not judged against a peak measured under load (over_peak)
        "fraction_pass": None if result["sgemm"]["peak_unreliable"] or loaded
        else result["zerotrain"]["fraction_of_sgemm_peak"] >= TARGET_PEAK_FRACTION}
    print_table(result)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"\nbench_cpu: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main("bench_cpu", main))
