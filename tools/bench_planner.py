#!/usr/bin/env python3
"""The planner's step-time estimate against measured CPU runs (issue 34): a GPT 4 x 256 (the shape
of docs/results/cpu_op_profile.json) is profiled here at one rank (log.profile_ops), then for
N = 1, 2, 4 ranks `zerotrain plan` picks the fastest choice that fits --budget per rank at the same
global batch (told the threads each rank runs: 2 at one rank, 1 beyond; and, by default, this
machine's cores shared by the ranks), and that pick trains under mpirun; then a Llama of the same
width and depth (grouped keys and values, SwiGLU) is planned from the same GPT profile at N = 1
and 2, as a user without a Llama profile would. The table sets the planner's estimate (the step
time, overlapping communication with computation, then its compute and communication parts) beside
the measured median step time, with the error, reported as found. Writes --out (JSON) and the table
beside it as .md.

usage: tools/bench_planner.py [--zerotrain build/zerotrain] [--budget 600MB] [--steps 8]
           [--link-gbps 5] [--link-latency-us 20] [--out runs/results/planner_cpu.json]
"""
import atexit
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from mpirun_command import MPIRUN  # noqa: E402
from repo_commit import binary_commit, head_commit  # noqa: E402
from result_paths import OneLineParser, check_out_file, check_program, default_out, run_main  # noqa: E402

CONFIG = {
    "model": {"n_layer": 4, "n_head": 4, "n_embd": 256, "block_size": 128, "vocab_size": 65},
    "data": {"dataset": "embedded"},
    "train": {"micro_batch": 16, "seq_len": 128, "global_batch_tokens": 8192, "eval_every": 0, "eval_batches": 1,
              "num_threads": 2},
    "log": {"sample_tokens": 0, "progress": "plain", "every_steps": 100},
}
# The same width, depth and batch as a Llama: 8 heads over 2 key/value heads, SwiGLU at Llama's rule.
LLAMA = {**CONFIG, "model": {"arch": "llama", "n_layer": 4, "n_head": 8, "n_kv_head": 2, "n_embd": 256,
                             "block_size": 128, "vocab_size": 65}}


def records(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def table(result):
    """The Markdown table of a result. The estimate column holds the planner's step time, which
    overlaps communication with computation (comm hides behind compute), so it is not their sum: the
    cell is `step ms (compute, comm)`."""
    lines = [f"# zerotrain plan: estimate vs measured ({result['commit'][:10]}, {result['cpu']}, {result['cores']} cores)",
             "", f"GPT 4 x 256, global batch 8192 tokens, budget {result['budget']} per rank, links "
             f"{result['link_gbps']:g} GB/s and {result['link_latency_us']:g} us per hop; profile measured here at 1 "
             "rank on 2 threads. The Llama (4 x 256, 8 heads over 2 key/value heads, SwiGLU 768 wide) is planned "
             "from the same GPT profile. The estimate is the step time (communication overlapped with computation, "
             "so not their sum), then its compute and communication parts.", "",
             "| model | ranks | pick | estimate: step (compute, comm) | measured | error |", "|---|---|---|---|---|---|"]
    for r in result["rows"]:
        pick = ", ".join(s for s in r["sets"] if not s.startswith("train.global_batch_tokens"))
        lines.append(f"| {r['model']} | {r['ranks']} | {pick} | {r['estimate_step_ms']:.0f} ms "
                     f"({r['estimate_compute_ms']:.0f}, {r['estimate_comm_ms']:.1f}) | {r['measured_step_ms']:.0f} ms | "
                     f"{100 * r['error']:+.0f}% |")
    return "\n".join(lines) + "\n"


def main():
    p = OneLineParser("bench_planner", description=__doc__.split("\n\n")[0])
    p.add_argument("--zerotrain", default=os.path.join(ROOT, "build", "zerotrain"),
                   help="the zerotrain binary that profiles, plans and trains (default: %(default)s)")
    p.add_argument("--budget", default="600MB", help="device memory per rank the pick must fit (default: %(default)s)")
    p.add_argument("--steps", type=int, default=8,
                   help="training steps per measured run, 2 or more: its time is the median step after the first "
                   "(default: %(default)s)")
    p.add_argument("--link-gbps", type=float, default=5.0,
                   help="the planner's link bandwidth, GB/s (default: %(default)g)")
    p.add_argument("--link-latency-us", type=float, default=20.0,
                   help="the planner's latency per hop, microseconds (default: %(default)g)")
    p.add_argument("--out", default=default_out("planner_cpu.json"),
                   help="the result JSON; the table goes beside it as .md (default: %(default)s)")
    a = p.parse_args()
    if a.steps < 2:  # a median of the steps after the first
        p.error(f"--steps must be 2 or more (got {a.steps})")
    if a.link_gbps <= 0 or a.link_latency_us < 0:
        p.error(f"need --link-gbps > 0 and --link-latency-us >= 0 (got {a.link_gbps:g}, {a.link_latency_us:g})")
    check_program("bench_planner", a.zerotrain)
    check_out_file("bench_planner", a.out)
    check_out_file("bench_planner", os.path.splitext(a.out)[0] + ".md")
    work = tempfile.mkdtemp(prefix="zt_plan_bench_")
    atexit.register(shutil.rmtree, work, True)  # the profile and every run's final weights; the JSON is the result
    config = os.path.join(work, "config.json")
    with open(config, "w") as f:
        json.dump(CONFIG, f)
    llama_config = os.path.join(work, "llama.json")
    with open(llama_config, "w") as f:
        json.dump(LLAMA, f)
    profile_dir = os.path.join(work, "profile")
    subprocess.run([a.zerotrain, "train", "--config", config, "--run-dir", profile_dir, "--set", "log.profile_ops=true",
                    "--set", "train.max_steps=12"], check=True, capture_output=True)
    rows = []
    for model, planned, ranks in [("gpt2", config, 1), ("gpt2", config, 2), ("gpt2", config, 4),
                                  ("llama", llama_config, 1), ("llama", llama_config, 2)]:
        threads = max(1, 2 // ranks)
        plan = subprocess.run([a.zerotrain, "plan", "--config", planned, "--ranks", str(ranks), "--device-memory",
                               a.budget, "--profile", profile_dir, "--link-gbps", f"{a.link_gbps:g}",
                               "--link-latency-us", f"{a.link_latency_us:g}", "--set", f"train.num_threads={threads}",
                               "--json"],
                              capture_output=True, text=True, check=True)
        best = json.loads(plan.stdout)["fitting"][0]
        run_dir = os.path.join(work, f"{model}_n{ranks}")
        cmd = MPIRUN + ["-np", str(ranks), a.zerotrain, "train", "--config", planned, "--run-dir", run_dir, "--set",
                        f"train.max_steps={a.steps}", "--set", f"train.num_threads={threads}"]
        for s in best["sets"]:
            cmd += ["--set", s]
        subprocess.run(cmd, check=True, capture_output=True)
        measured = statistics.median(r["step_ms"] for r in records(run_dir) if r["type"] == "train" and r["step"] > 1)
        estimate = 1e3 * best["step_s"]
        rows.append({"model": model, "ranks": ranks, "sets": best["sets"], "required_bytes": best["required_bytes"],
                     "estimate_compute_ms": 1e3 * best["compute_s"], "estimate_comm_ms": 1e3 * best["comm_s"],
                     "estimate_step_ms": estimate, "measured_step_ms": measured,
                     "error": (estimate - measured) / measured})
        print(f"{model} N={ranks}: estimate {estimate:.0f} ms, measured {measured:.0f} ms", flush=True)
    result = {"benchmark": "zerotrain plan: estimated against measured step time on the CPU",
              "commit": binary_commit(a.zerotrain) or head_commit() or "unknown", "machine": platform.node(),
              "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "config": CONFIG, "llama_config": LLAMA,
              "budget": a.budget, "link_gbps": a.link_gbps, "link_latency_us": a.link_latency_us,
              "rows": rows}
    text = table(result)
    print(text)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=2)
    with open(os.path.splitext(a.out)[0] + ".md", "w") as f:
        f.write(text)


if __name__ == "__main__":
    sys.exit(run_main("bench_planner", main))
