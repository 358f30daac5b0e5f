#!/usr/bin/env python3
"""Does what `zerotrain plan` picks fit, over a whole run? For --picks random small GPT shapes
(layers, width, context, vocabulary, parameter dtype, 1 or 2 ranks; drawn from --seed), the
planner is asked for every choice that fits a large budget, a budget is drawn among their
requirements (so some picks sit exactly at it), and the planner's pick under that budget trains
2 steps under mpirun with everything a run does after them: the final evaluation, a sample past
the context, the final gather of final.safetensors. The run's peak total (rank 0's categories'
sum at its highest moment, the summary's memory_total_peak_bytes) is set beside the budget; a pick
over it is a planner or prediction error. --baseline runs the same draws with a second binary in the
same invocation (its budgets are its own planner's). --choices gives each run a multiple-choice
file (data.choice_file) of examples nearly as long as its context, scored at the final evaluation,
and training windows a quarter of the context (train.seq_len), so that a scorer's rows are longer
than a step's (the same shapes' and budgets' draws as without). Writes --out (JSON) and a
Markdown table beside it (.md).

usage: tools/plan_fit_fuzz.py [--zerotrain build/zerotrain] [--baseline OTHER_BINARY] [--picks 40]
           [--seed 11] [--choices] [--out runs/results/plan_fit_fuzz_cpu.json]
"""
import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from mpirun_command import MPIRUN  # noqa: E402
from prepare_choices import example_words, file_bytes  # noqa: E402
from repo_commit import head_commit  # noqa: E402
from result_paths import check_out_file, default_out  # noqa: E402

CONFIG = os.path.join(ROOT, "configs", "tiny.json")
PROFILE = os.path.join(ROOT, "docs", "results", "cpu_op_profile.json")


def draw_shapes(picks, seed):
    """The model and run settings of each pick, the same for every binary."""
    rng = random.Random(seed)
    shapes = []
    for _ in range(picks):
        block, ranks = rng.choice([32, 64]), rng.choice([1, 2])
        shapes.append({
            "ranks": ranks,
            "sets": [f"model.n_layer={rng.choice([1, 2, 4])}", f"model.n_embd={rng.choice([32, 64, 128])}",
                     "model.n_head=2", f"model.block_size={block}", f"model.vocab_size={rng.choice([64, 512, 4096])}",
                     f"precision.param_dtype={rng.choice(['f32', 'bf16'])}",
                     f"train.global_batch_tokens={16 * block * ranks}", "train.max_steps=2", "train.eval_batches=1",
                     "log.sample_tokens=100"],
            "budget_draw": rng.random()})
    return shapes


def write_choices(path, block, vocab, seed):
    """8 examples of 4 completions, tokens below `vocab`: a context of block - 8 tokens and
    completions of 3 to 6, so rows of block - 5 to block - 2 tokens (inputs up to block - 3
    positions), nearly as long as the context allows."""
    rng = random.Random(seed)
    words, longest = [], 0
    for i in range(8):
        context = [rng.randrange(vocab) for _ in range(block - 8)]
        endings = [[rng.randrange(vocab) for _ in range(3 + k)] for k in range(4)]
        ex = example_words(i, rng.randrange(4), context, endings)
        words += ex
        longest = max(longest, ex[1])
    with open(path, "wb") as f:
        f.write(file_bytes(words, 8, longest))


def with_choices(shapes, work, seed):
    """Each shape with a choice file of its own (its block and vocabulary) in `work`, and training
    windows a quarter of its block."""
    out = []
    for i, shape in enumerate(shapes):
        value = dict(kv.split("=", 1) for kv in shape["sets"])
        path = os.path.join(work, f"choices_{i}.bin")
        block = int(value["model.block_size"])
        write_choices(path, block, int(value["model.vocab_size"]), seed * 1000 + i)
        out.append(dict(shape, sets=shape["sets"] + [f"data.choice_file={path}", f"train.seq_len={block // 4}"]))
    return out


def plan(binary, shape, budget):
    """The planner's fitting choices under `budget` bytes (fastest first), or an error line."""
    cmd = [binary, "plan", "--config", CONFIG, "--profile", PROFILE, "--ranks", str(shape["ranks"]),
           "--device-memory", str(budget), "--json", "--top", "100000"]
    cmd += [a for kv in shape["sets"] for a in ("--set", kv)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
    return json.loads(p.stdout)["fitting"], None


def run_pick(binary, shape, work, name):
    """Plans, draws the budget, trains the pick; the row for the table."""
    everything, error = plan(binary, shape, 100 << 30)
    if error or not everything:
        return {"error": error or "nothing fits 100 GiB"}
    needs = sorted({c["required_bytes"] for c in everything})
    budget = needs[min(len(needs) - 1, int(shape["budget_draw"] * len(needs)))]
    fitting, error = plan(binary, shape, budget)
    if error or not fitting:
        return {"budget_bytes": budget, "error": error or "the planner kept nothing at a budget it listed"}
    pick = fitting[0]
    run_dir = os.path.join(work, name)
    cmd = MPIRUN + ["-np", str(shape["ranks"]), binary, "train", "--config", CONFIG, "--run-dir", run_dir]
    cmd += [a for kv in shape["sets"] + pick["sets"] for a in ("--set", kv)]
    env = dict(os.environ, OMP_WAIT_POLICY="passive")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    row = {"budget_bytes": budget, "required_bytes": pick["required_bytes"], "pick": pick["sets"]}
    if p.returncode != 0:
        row["error"] = ((p.stdout + p.stderr).strip().splitlines() or ["exit %d" % p.returncode])[-1]
        return row
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    summary = [r for r in records if r["type"] == "summary"][-1]
    scored = [r["choice_examples"] for r in records if r["type"] == "eval" and "choice_examples" in r]
    if scored:
        row["choices_scored"] = scored[-1]
    # The categories' sum at its peak, one moment (memory_total_peak_bytes); a binary that does not
    # log it is measured by the sum of each category's own peak, which can add peaks of different
    # moments (a step's activations, the final gather's buffer) and so overstates.
    row["category_peaks_sum_bytes"] = sum(summary["memory_peak_bytes"].values())
    row["measure"] = "total_peak" if "memory_total_peak_bytes" in summary else "category_peaks_sum"
    row["peak_bytes"] = summary.get("memory_total_peak_bytes", row["category_peaks_sum_bytes"])
    row["over"] = row["peak_bytes"] > budget
    return row


def describe(shape, row):
    keys = ("zero.stage", "train.micro_batch", "train.activation_checkpointing")
    picked = " ".join(kv.split("=", 1)[1] for key in keys for kv in row.get("pick", []) if kv.startswith(key + "="))
    value = dict(kv.split("=", 1) for kv in shape["sets"])
    model = (f"L{value['model.n_layer']} C{value['model.n_embd']} T{value['model.block_size']} "
             f"V{value['model.vocab_size']} {value['precision.param_dtype']}")
    return model, picked


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zerotrain", default=os.path.join(ROOT, "build", "zerotrain"))
    ap.add_argument("--baseline", help="a second binary run on the same draws")
    ap.add_argument("--picks", type=int, default=40)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--choices", action="store_true", help="a multiple-choice file in every run")
    ap.add_argument("--out", help="default: runs/results/plan_fit_fuzz_cpu.json, "
                    "runs/results/plan_fit_fuzz_choices_cpu.json with --choices")
    args = ap.parse_args()
    if args.out is None:
        args.out = default_out("plan_fit_fuzz_choices_cpu.json" if args.choices else "plan_fit_fuzz_cpu.json")
    if args.picks < 1:
        sys.stderr.write(f"plan_fit_fuzz: --picks {args.picks}: give at least 1\n")
        return 2
    for flag, binary in (("--zerotrain", args.zerotrain), ("--baseline", args.baseline)):
        if binary is not None and not os.access(binary, os.X_OK):
            sys.stderr.write(f"plan_fit_fuzz: {flag} {binary}: not an executable file\n")
            return 2
    check_out_file("plan_fit_fuzz", args.out)
    binaries = [("zerotrain", args.zerotrain)] + ([("baseline", args.baseline)] if args.baseline else [])
    shapes = draw_shapes(args.picks, args.seed)
    results = {label: [] for label, _ in binaries}
    with tempfile.TemporaryDirectory(prefix="zt_plan_fuzz_") as work:
        if args.choices:
            shapes = with_choices(shapes, work, args.seed)
        for i, shape in enumerate(shapes):
            for label, binary in binaries:  # interleaved: the same draw under each binary in turn
                row = run_pick(binary, shape, work, f"{label}_{i}")
                results[label].append(row)
                model, picked = describe(shape, row)
                state = row.get("error") or f"{row['peak_bytes'] / row['budget_bytes']:.4f}" + (
                    " OVER" if row["over"] else "")
                print(f"{i:>3} {label:<9} n{shape['ranks']} {model:<24} pick (stage, micro-batch, checkpointing) "
                      f"{picked:<14} {state}", flush=True)
    lines = ["| binary | measure | picks run | over the budget | worst peak / budget | errors |",
             "|---|---|---|---|---|---|"]
    summary = {}
    for label, _ in binaries:
        ran = [r for r in results[label] if "peak_bytes" in r]
        worst = max((r["peak_bytes"] / r["budget_bytes"] for r in ran), default=None)
        summary[label] = {"runs": len(ran), "over": sum(r["over"] for r in ran), "worst_ratio": worst,
                          "errors": len(results[label]) - len(ran)}
        measures = "/".join(sorted({r["measure"] for r in ran})) or "-"
        lines.append(f"| {label} | {measures} | {len(ran)} | {summary[label]['over']} | "
                     f"{'-' if worst is None else f'{worst:.4f}'} | {summary[label]['errors']} |")
    table = "\n".join(lines)
    print("\n" + table)
    doc = {"tool": "tools/plan_fit_fuzz.py", "commit": head_commit(), "machine": platform.processor() or
           platform.machine(), "cores": os.cpu_count(), "picks": args.picks, "seed": args.seed,
           "choices": args.choices,
           "binaries": {label: os.path.abspath(b) for label, b in binaries}, "summary": summary,
           "shapes": shapes, "results": results}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    with open(os.path.splitext(args.out)[0] + ".md", "w") as f:
        f.write(f"# zerotrain plan's picks over a whole run (tools/plan_fit_fuzz.py, seed {args.seed}"
                f"{', --choices' if args.choices else ''})\n\n"
                f"commit {doc['commit']}, {doc['cores']} cores\n\n{table}\n")
    print(f"wrote {args.out} and its .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
