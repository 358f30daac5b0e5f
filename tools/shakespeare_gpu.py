#!/usr/bin/env python3
"""Issue 7's convergence run: nanoGPT's shakespeare-char config (configs/shakespeare_char.json: 6
layers, 6 heads, 384 wide, block 256, batch 64, dropout 0.2, lr 1e-3 -> 1e-4 cosine after 100
warm-up steps, 5000 steps) trained on one GPU by zerotrain and by PyTorch
(tools/shakespeare_gpu_torch.py: the same model and recipe with torch.compile, bf16 autocast,
fused AdamW and flash attention), both on the token files `zerotrain prepare` makes from --corpus
(../shared/data/tinyshakespeare.txt), or on those already in --data (the corpus beside the
repository does not travel to a lent GPU machine: prepare here, carry the folder). Records per
engine the wall time of the whole run, the median ms/step (steps after the first 10), the
validation loss every eval_every steps, the best and final validation loss and whether the final
one reaches nanoGPT's reported 1.47; with both engines run on the same configuration, the time
ratios. Writes runs/results/shakespeare_gpu_<device>.json (--out: docs/results/ holds the committed ones).

One invocation runs the engines named by --engines; when the results file already holds results
from the same device, the new engines' results are merged into it, so zerotrain and PyTorch can run
as two commands. --steps N shortens the run (optim.decay_steps follows it; warm-up is min(100,
N/2)); --set section.key=value overrides the config for both engines (keys PyTorch has no use
for, e.g. precision.param_dtype, reach zerotrain only).

--time-limit S: an engine still running S seconds after the tool started gets SIGTERM; it saves its
state at the next step boundary (zerotrain a checkpoint in its run directory, PyTorch a state file)
and the tool exits 3 with nothing merged for it (an engine not yet started with under a minute left
is not started). The tool's last line names the engines to run again; with the same other flags
they continue from --work (wall time is the sum of the segments). An evaluation falling on
zerotrain's stop step is skipped (the engine defers it to a resumed run, which starts past it).

Testing only: --device cpu runs zerotrain with device=cpu and PyTorch on the CPU without compile,
autocast, fused AdamW or flash attention; --batch, --eval-batches and --eval-every shrink the run;
--stop-at-step K stops each engine after step K as the time limit would.

usage: python3 tools/shakespeare_gpu.py [--engines zerotrain torch] [--zerotrain build/zerotrain]
           [--python python3] [--steps 5000] [--time-limit S] [--work runs/shakespeare_gpu]
           [--corpus ../shared/data/tinyshakespeare.txt | --data DIR] [--commit HASH]
           [--out runs/results/shakespeare_gpu_<device>.json] [--set section.key=value ...]
exit: 0 done, 1 an engine failed or no GPU, 2 bad arguments, 3 stopped by --time-limit (run again)
"""
import argparse
import datetime
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from repo_commit import head_commit, tree_dirty  # noqa: E402
from result_paths import check_out_file, default_out  # noqa: E402
CONFIG = os.path.join(ROOT, "configs", "shakespeare_char.json")
CORPUS = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt")
TARGET_VAL_LOSS = 1.47  # nanoGPT's README: 1.4697 after 5000 iterations
SKIP_STEPS = 10  # compilation, autotuning and allocator warm-up sit in the first steps
CURVE_POINTS = 100  # train loss and lr kept in the results at about this many steps (at most every 50th)
EXIT_STOPPED = 3
OWN_KEYS = ("device", "data.dataset", "train.max_steps", "optim.decay_steps")  # not for --set
MIN_SEGMENT_S = 60  # with --time-limit, an engine is not started with less time than this left


def fail(msg, code=1):
    print(f"shakespeare_gpu: {msg}", file=sys.stderr)
    sys.exit(code)


def device_facts(device):
    if device == "cpu":
        return "cpu", None
    smi = shutil.which("nvidia-smi")
    p = smi and subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                               capture_output=True, text=True)
    if not p or p.returncode != 0 or not p.stdout.strip():
        fail("no NVIDIA GPU here (nvidia-smi found none); this run needs one")
    name, driver = [s.strip() for s in p.stdout.strip().splitlines()[0].split(",")]
    return name, driver


def parse_value(text):
    """A --set value as zerotrain reads it: JSON when it parses, a plain string otherwise."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def resolve_config(args):
    """(the config both engines train with, the --set list that gives it to zerotrain)."""
    with open(CONFIG) as f:
        config = json.load(f)
    steps = args.steps
    warmup = min(config["optim"].get("warmup_steps", 0), steps // 2)
    sets = [("device", args.device), ("data.dataset", args.data),
            ("train.max_steps", steps), ("optim.decay_steps", steps), ("optim.warmup_steps", warmup),
            ("log.progress", "plain"), ("log.every_steps", 100), ("log.sample_every", 0), ("log.sample_tokens", 0)]
    for flag, key in ((args.batch, "train.micro_batch"), (args.eval_batches, "train.eval_batches"),
                      (args.eval_every, "train.eval_every")):
        if flag is not None:
            sets.append((key, flag))
    for item in args.set:
        if "=" not in item:
            fail(f"--set {item}: expected section.key=value", 2)
        key, value = item.split("=", 1)
        if key in OWN_KEYS:
            fail(f"--set {key}: the tool sets it (--steps, --data, --device)", 2)
        sets.append((key, parse_value(value)))
    for key, value in sets:
        *sections, name = key.split(".")
        node = config
        for s in sections:
            node = node.setdefault(s, {})
        node[name] = value
    config["train"].setdefault("seq_len", config["model"]["block_size"])
    return config, [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in sets]


def run_segment(cmd, deadline, log_prefix, stop_step=None):
    """Runs one engine process to its end, sending SIGTERM at the deadline (or, with stop_step,
    once stop_step() reports a step at or past the test hook's). Returns (exit code, wall s)."""
    t0 = time.monotonic()
    with open(log_prefix + ".out", "w") as out, open(log_prefix + ".err", "w") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err)
        signalled = False
        while p.poll() is None:
            time.sleep(0.2)
            due = deadline is not None and time.monotonic() > deadline
            if not signalled and (due or (stop_step is not None and stop_step())):
                p.send_signal(signal.SIGTERM)
                signalled = True
    return p.returncode, time.monotonic() - t0


def tail(path, chars=3000):
    with open(path) as f:
        return f.read()[-chars:]


class Segments:
    """An engine's run across invocations: its configuration and each segment's wall time."""

    def __init__(self, folder, key):
        self.path = os.path.join(folder, "segments.json")
        state = {}
        if os.path.exists(self.path):
            with open(self.path) as f:
                state = json.load(f)
        self.resuming = state.get("key") == key
        if not self.resuming and os.path.isdir(folder):
            shutil.rmtree(folder)
        os.makedirs(folder, exist_ok=True)
        self.key, self.walls = key, state.get("walls", []) if self.resuming else []

    def add(self, wall_s, complete):
        """Records a segment; a complete run forgets its state, so the next invocation starts afresh."""
        self.walls.append(wall_s)
        if complete:
            if os.path.exists(self.path):
                os.remove(self.path)
        else:
            with open(self.path, "w") as f:
                json.dump({"key": self.key, "walls": self.walls}, f)


def summarise(steps, step_ms, losses, lrs, evals, walls, hyper):
    """One engine's entry in the results file, from its per-step records and evaluations."""
    skip = SKIP_STEPS if len(step_ms) > 2 * SKIP_STEPS else 0
    vals = [v for _, v in evals]
    every = max(1, min(50, steps // CURVE_POINTS))
    return {"steps": steps, "segments": len(walls), "wall_s": sum(walls),
            "segment_wall_s": walls, "median_step_ms": statistics.median(step_ms[skip:]) if step_ms else None,
            "median_over_steps_after": skip, "val_loss": evals,
            "best_val_loss": min(vals) if vals else None, "final_val_loss": vals[-1] if vals else None,
            "meets_target": bool(vals) and vals[-1] <= TARGET_VAL_LOSS,
            "train_curve_step_loss_lr": [[i + 1, loss, lr] for i, (loss, lr) in enumerate(zip(losses, lrs))
                                         if (i + 1) % every == 0 or i + 1 == steps],
            "hyperparameters": hyper}


def run_zerotrain(args, config, sets, deadline):
    folder = os.path.join(args.work, "zerotrain")
    seg = Segments(folder, {"config": config, "zerotrain": os.path.abspath(args.zerotrain)})
    run_dir = os.path.join(folder, "run")
    metrics = os.path.join(run_dir, "metrics.jsonl")
    cmd = [args.zerotrain, "train", "--config", CONFIG, "--run-dir", run_dir]
    for s in sets:
        cmd += ["--set", s]
    if seg.resuming and os.path.exists(os.path.join(run_dir, "checkpoints", "latest")):
        cmd += ["--resume", "latest"]

    def reached_stop_step():  # the test hook's condition, polled while the run goes
        if not os.path.exists(metrics):
            return False
        with open(metrics) as f:
            steps = [r["step"] for r in map(json.loads, f) if r["type"] == "train"]
        return bool(steps) and steps[-1] >= args.stop_at_step

    rc, wall = run_segment(cmd, deadline, os.path.join(folder, f"segment{len(seg.walls)}"),
                           reached_stop_step if args.stop_at_step else None)
    if rc != 0:
        fail(f"zerotrain exited {rc}: {' '.join(cmd)}\n{tail(os.path.join(folder, f'segment{len(seg.walls)}.err'))}")
    with open(metrics) as f:
        recs = [json.loads(l) for l in f]
    train = [r for r in recs if r["type"] == "train"]
    summary = [r for r in recs if r["type"] == "summary"][-1]
    complete = not summary["stopped_by_signal"] and not summary["stopped_nonfinite"] and summary["steps"] == args.steps
    seg.add(wall, complete)
    if not complete:
        return None, summary["steps"]
    with open(os.path.join(run_dir, "config.json")) as f:
        resolved = json.load(f)
    hyper = {"model": resolved["model"], "train": resolved["train"], "optim": resolved["optim"],
             "precision": resolved["precision"]}
    r = summarise(args.steps, [t["step_ms"] for t in train], [t["loss"] for t in train], [t["lr"] for t in train],
                  [[e["step"], e["val_loss"]] for e in recs if e["type"] == "eval"], seg.walls, hyper)
    r["command"] = " ".join(cmd)
    return r, args.steps


def run_torch(args, config, deadline):
    folder = os.path.join(args.work, "torch")
    spec = {k: config[k] for k in ("model", "train", "optim")}
    seg = Segments(folder, {"spec": spec, "device": args.device})
    checkpoint = os.path.join(folder, "state.pt")
    cmd = [args.python, os.path.join(ROOT, "tools", "shakespeare_gpu_torch.py"), "--spec", json.dumps(spec),
           "--data", args.data, "--checkpoint", checkpoint, "--device", args.device]
    if args.stop_at_step:
        cmd += ["--stop-after", str(args.stop_at_step)]
    log = os.path.join(folder, f"segment{len(seg.walls)}")
    rc, wall = run_segment(cmd, deadline, log)
    if rc != 0:
        fail(f"the PyTorch trainer exited {rc}:\n{tail(log + '.err')}")
    with open(log + ".out") as f:
        t = json.loads(f.read().strip().splitlines()[-1])
    seg.add(wall, t["complete"])
    if not t["complete"]:
        return None, t["steps_done"]
    r = summarise(args.steps, t["step_ms"], t["loss"], t["lr"], t["evals"], seg.walls, t["hyperparameters"])
    r.update({"decayed_numel": t["decayed_numel"], "not_decayed_numel": t["not_decayed_numel"],
              **{k: t[k] for k in ("torch_version", "compiled", "autocast", "fused_adamw", "flash_attention")}})
    return r, args.steps


def comparison(engines):
    z, t = engines.get("zerotrain"), engines.get("torch")
    if not (z and t):
        return None
    same = all(z["hyperparameters"][s][k] == v for s in ("model", "train", "optim")
               for k, v in t["hyperparameters"][s].items() if k in z["hyperparameters"][s])
    out = {"same_configuration": same}
    if same:
        out["wall_s_zerotrain_over_torch"] = z["wall_s"] / t["wall_s"]
        out["median_step_ms_zerotrain_over_torch"] = z["median_step_ms"] / t["median_step_ms"]
    return out


def compact_json(obj):
    """Indented JSON with every innermost list on one line (curves stay readable)."""
    text = json.dumps(obj, indent=1)
    return re.sub(r"\[\s*([^\[\]{}]*?)\s*\]", lambda m: "[" + re.sub(r"\s+", " ", m.group(1)) + "]", text)


def print_table(result):
    print(f"\nshakespeare-char on {result['device']}: target final val loss <= {TARGET_VAL_LOSS}")
    print(f"{'engine':10s} {'steps':>6s} {'wall s':>8s} {'ms/step':>8s} {'best val':>9s} {'final val':>10s} target")
    for name, r in result["engines"].items():
        print(f"{name:10s} {r['steps']:6d} {r['wall_s']:8.1f} {r['median_step_ms']:8.2f} {r['best_val_loss']:9.4f} "
              f"{r['final_val_loss']:10.4f} {'met' if r['meets_target'] else 'missed'}")
    c = result.get("comparison")
    if c and c["same_configuration"]:
        print(f"zerotrain / torch: wall time {c['wall_s_zerotrain_over_torch']:.3f}, "
              f"median ms/step {c['median_step_ms_zerotrain_over_torch']:.3f}")
    elif c:
        print("(the engines' results come from different configurations: no ratio)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engines", nargs="+", choices=["zerotrain", "torch"], default=["zerotrain", "torch"])
    ap.add_argument("--zerotrain", default=os.path.join(ROOT, "build", "zerotrain"))
    ap.add_argument("--python", default=sys.executable, help="interpreter with torch for the PyTorch engine")
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--time-limit", type=float, default=None, help="seconds from start; then stop and save (exit 3)")
    ap.add_argument("--corpus", default=CORPUS, help="text that `zerotrain prepare` turns into the token files")
    ap.add_argument("--data", default=None, help="a directory `zerotrain prepare` already made (instead of --corpus)")
    ap.add_argument("--work", default=os.path.join(ROOT, "runs", "shakespeare_gpu"),
                    help="prepared data, run directories and saved state (kept to continue a stopped run)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--commit", default=None, help="the commit to record (default: git rev-parse HEAD)")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--eval-batches", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--eval-every", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--stop-at-step", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    start = time.monotonic()
    deadline = start + args.time_limit if args.time_limit else None
    if args.steps < 1:
        fail("--steps must be at least 1", 2)
    name, driver = device_facts(args.device)
    args.work = os.path.abspath(args.work)
    if args.data:
        args.data = os.path.abspath(args.data)
        missing = [f for f in ("train.bin", "val.bin", "vocab.json") if not os.path.exists(os.path.join(args.data, f))]
        if missing:
            fail(f"--data {args.data}: no {', '.join(missing)} (make it with `zerotrain prepare`)", 2)
    else:
        if not os.path.exists(args.corpus):
            fail(f"{args.corpus} not found (the shared corpus sits beside the repository; or give --data)")
        args.data = os.path.join(args.work, "data")
        p = subprocess.run([args.zerotrain, "prepare", "--text", args.corpus, "--out", args.data],
                           capture_output=True, text=True)
        if p.returncode != 0:
            fail(f"zerotrain prepare failed (exit {p.returncode}): {p.stderr.strip()[-1000:]}")
    config, sets = resolve_config(args)

    slug = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    out = args.out or default_out(f"shakespeare_gpu_{slug}.json")
    check_out_file("shakespeare_gpu", out)
    result = {"what": "nanoGPT shakespeare-char (configs/shakespeare_char.json) trained by each engine on the "
                      "same prepared token files; tools/shakespeare_gpu.py",
              "device": name, "driver": driver, "target_val_loss": TARGET_VAL_LOSS, "engines": {}}
    if os.path.exists(out):
        with open(out) as f:
            old = json.load(f)
        if old.get("device") != name:
            fail(f"{out} holds results from {old.get('device')!r}, not {name!r}; choose another --out", 2)
        result["engines"] = old.get("engines", {})

    commit, dirty = args.commit, None
    if commit is None:  # the tree's own commit, where it is a git checkout
        commit, dirty = head_commit(env=False), tree_dirty()
    stopped, finished = [], []
    for engine in args.engines:
        if deadline is not None and time.monotonic() > deadline - MIN_SEGMENT_S:
            stopped.append((engine, "not started"))
            continue
        print(f"{engine}: training {args.steps} steps on {name} ...", flush=True)
        r, steps_done = (run_zerotrain(args, config, sets, deadline) if engine == "zerotrain"
                         else run_torch(args, config, deadline))
        if r is None:
            stopped.append((engine, f"stopped after step {steps_done}"))
            continue
        r.update({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "commit": commit,
                  "tree_dirty": dirty})
        result["engines"][engine] = r
        finished.append(engine)
        print(f"{engine}: {r['wall_s']:.1f} s, final val loss {r['final_val_loss']:.4f}", flush=True)
    result["comparison"] = comparison(result["engines"])
    if finished:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as f:
            f.write(compact_json(result) + "\n")
        print_table(result)
        print(f"wrote {out}")
    if stopped:
        print(f"shakespeare_gpu: time limit: {', '.join(f'{e} {what}' for e, what in stopped)} (state in {args.work}); "
              f"to continue, run again with --engines {' '.join(e for e, _ in stopped)} and the same other flags",
              file=sys.stderr)
        return EXIT_STOPPED
    return 0


if __name__ == "__main__":
    sys.exit(main())
