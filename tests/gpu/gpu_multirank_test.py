#!/usr/bin/env python3
"""Several ranks on one GPU (comm.backend = "mpi": the parameter store's collectives staged through
pinned host memory and MPI, engine/distributed/comm/staged_communicator.h), the multi-rank CUDA path that NCCL
cannot run on a one-GPU machine:

  * N = 2 and 3 ranks sharing the GPU, ZeRO stages 0-3, deterministic reductions, bf16 parameters:
    the four stages give bitwise identical losses, gradient norms and final weights, and follow the
    CPU run at the same N (8 steps) within the bound below;
  * each rank's measured device memory equals the prediction per category (workspace within 8 MiB
    above it, as tests/gpu/gpu_model_test.py holds one GPU rank);
  * the same bits at any rank count (deterministic mode, docs/zero_memory.md): one GPU rank
    accumulating N micro-batches gives the N-rank runs' losses, norms and weights bit for bit;
  * a checkpoint written by 2 GPU ranks at stage 3 resumes on 1 GPU rank, bit for bit the
    uninterrupted 2-rank GPU run, and on 2 CPU ranks, whose remaining steps follow it within the
    bound;
  * `zerotrain eval --choices` from that checkpoint on 2 and 3 ranks sharing the GPU, each scoring
    its share of the rows, prints the score one GPU rank does;
  * not deterministic (the default reductions: all-reduce, reduce-scatter in place, each
    micro-batch reduced into the shard) with accumulation, stages 0-3 at the first N: within the
    bound of the CPU's run, memory as predicted.

Writes a JSON (--out): for each N and stage the ranks, whether the bits matched stage 0 and the
largest relative loss difference from the CPU, plus the resumes; rewritten after every row.

--comm nccl (on a machine with several GPUs; tools/gpu_session.sh passes it where nvidia-smi lists
two or more) runs the same checks with one GPU a rank through NCCL (comm.backend's default), at
--nccl-ranks (2; no more than the GPUs visible, else exit 77 naming both counts): the path users
train on, which a one-GPU machine cannot run. With 4 among them, also hybrid sharding (groups of
2, stage 3) through NCCL's splits against the CPU's hybrid run, memory as predicted. The first comm
named runs whole first (its rows, hybrid, its checkpoint and evaluation), then the next one's rows:
with --comm nccl staged, all of NCCL's before the ranks sharing one GPU. Each row names its comm.

--device cpu runs the same harness without a GPU (the "GPU" side on the CPU through the
ZT_TEST_STAGED_COLLECTIVES hook), so its logic is tested here before any GPU minute is spent on
it. Exits 77 (a ctest skip) with --device cuda when no CUDA device is visible. ZT_SESSION_MPIRUN
(set by tools/gpu_session.sh) replaces --mpirun.

usage: gpu_multirank_test.py --zerotrain PATH --mpirun "mpirun --oversubscribe --allow-run-as-root"
                             [--device cuda|cpu] [--out FILE.json] [--ranks 2 3]
                             [--comm staged|nccl ...] [--nccl-ranks 2 ...]
"""
import argparse
import datetime
import json
import os
import random
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402
from choice_file_util import write_choice_file  # noqa: E402
from cuda_presence import require_cuda_device  # noqa: E402
from run_dir_util import run_result  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools"))
import bench_harness  # noqa: E402  visible_gpu_count

CONFIG = {
    "model": {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 32, "vocab_size": 96},
    "data": {"embedded_chars": 100000},
    "train": {"micro_batch": 2, "max_steps": 8, "eval_batches": 1, "num_threads": 1, "deterministic": True},
    "precision": {"param_dtype": "bf16"},
    "optim": {"lr": 3e-3, "warmup_steps": 2},
    "log": {"sample_tokens": 0, "progress": "plain", "every_steps": 100},
}
# GPU against CPU over 8 training steps with bf16 weights: the same bound as one GPU rank's training
# in tests/gpu/gpu_model_test.py (TRAIN_LOSS_BOUND): fp32 summation orders differ, and bf16
# rounding of the updated weights turns ulp differences into bf16 steps that AdamW carries on.
LOSS_BOUND = 2e-2
WORKSPACE_SLACK = 8 << 20
EXACT = ["parameters", "gradients", "master_weights", "optimizer_states", "activations", "comm_buffers"]


class Harness:
    def __init__(self, args, work):
        self.args, self.work = args, work
        # On the lent GPU machine tools/gpu_session.sh names its carried OpenMPI's launcher.
        self.mpirun = shlex.split(os.environ.get("ZT_SESSION_MPIRUN") or args.mpirun)
        self.config = os.path.join(work, "config.json")
        with open(self.config, "w") as f:
            json.dump(CONFIG, f)

    def run(self, name, ranks, device, *overrides, resume=None, comm="staged"):
        """A run's losses, norms, weights and memory record, or {"error": ...}. device "gpu": the
        ranks share one GPU through MPI (comm "staged") or take one GPU each through NCCL ("nccl")."""
        run_dir = os.path.join(self.work, name)
        staged = device == "gpu"
        env = dict(os.environ)
        sets = list(overrides)
        # The harness's own test (--device cpu) runs the "GPU" side as CPU ranks on the staged path.
        env["ZT_TEST_STAGED_COLLECTIVES"] = "1" if staged and self.args.device == "cpu" else "0"
        if staged and self.args.device == "cuda":
            sets += ["device=cuda"] + (["comm.backend=mpi"] if comm == "staged" else [])
            if comm == "staged":
                env = on_one_gpu(env)
        elif not staged:
            sets += ["device=cpu"]
        exports = ["-x", "ZT_TEST_STAGED_COLLECTIVES"]
        if "CUDA_VISIBLE_DEVICES" in env:
            exports += ["-x", "CUDA_VISIBLE_DEVICES"]
        cmd = [self.args.zerotrain] if ranks == 1 else self.mpirun + ["-np", str(ranks), *exports, self.args.zerotrain]
        cmd += ["train", "--config", self.config, "--run-dir", run_dir]
        if resume:
            cmd += ["--resume", resume]
        for s in sets:
            cmd += ["--set", s]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
        if p.returncode != 0:
            return {"error": f"exit {p.returncode}: {(p.stdout + p.stderr)[-1500:]}", "command": " ".join(cmd)}
        header = next((l for l in p.stdout.splitlines() if l.startswith("ZeRO stage")), "")
        return {**run_result(run_dir), "header": header}


def on_one_gpu(env):
    """The environment of ranks that must share one GPU: the first visible one alone. A rank takes GPU
    local_rank modulo the GPUs it sees (kernels/compute_backend.cpp), so on a machine of several GPUs
    the "sharing" ranks would otherwise each take their own and the rows would not test sharing."""
    if "CUDA_VISIBLE_DEVICES" not in env:
        return dict(env, CUDA_VISIBLE_DEVICES="0")
    return dict(env, CUDA_VISIBLE_DEVICES=env["CUDA_VISIBLE_DEVICES"].split(",")[0].strip())  # "" stays none


def rel_loss_diff(a, b):
    if len(a) != len(b) or not a:
        return float("inf")
    return max(abs(x - y) / max(abs(y), 1e-30) for x, y in zip(a, b))


def memory_ok(rec):
    """(ok, worst detail): every rank's device categories as predicted, workspace within the slack."""
    if rec is None:
        return False, "no memory record"
    predicted = rec["predicted_bytes"]
    for rank, measured in enumerate(rec["measured_peak_bytes"]):
        for cat in EXACT:
            if measured[cat] != predicted[cat]:
                return False, f"rank {rank} {cat}: measured {measured[cat]}, predicted {predicted[cat]}"
        ws = measured["workspace"]
        if not predicted["workspace"] <= ws <= predicted["workspace"] + WORKSPACE_SLACK:
            return False, f"rank {rank} workspace {ws} vs predicted {predicted['workspace']} (+8 MiB)"
    return True, "every rank and category as predicted"


# What the train header names as the store's communicator for each comm at several ranks.
HEADER_MARK = {"staged": "staged through host memory", "nccl": "(nccl"}


def device_name(args):
    if args.device != "cuda":
        return "cpu (the harness's own test: the staged path on CPU ranks)"
    p = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
    return p.stdout.strip().splitlines()[0] if p.returncode == 0 and p.stdout.strip() else "unknown GPU"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zerotrain", required=True)
    ap.add_argument("--mpirun", required=True, help="the launcher and its flags, as one string")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--out", default=None)
    ap.add_argument("--comm", nargs="+", choices=["staged", "nccl"], default=["staged"],
                    help="staged: the ranks share one GPU through MPI; nccl: one GPU a rank through NCCL")
    ap.add_argument("--nccl-ranks", type=int, nargs="+", default=[2])
    args = ap.parse_args()
    if "nccl" in args.comm and args.device != "cuda":
        ap.error("--comm nccl needs --device cuda")
    if args.device == "cuda":
        missing = require_cuda_device(args.zerotrain, "several ranks on one GPU")
        if missing is not None:
            return missing
    gpus = bench_harness.visible_gpu_count() if args.device == "cuda" else 0
    if "nccl" in args.comm and gpus < max(args.nccl_ranks):
        print(f"SKIPPED: --comm nccl at {max(args.nccl_ranks)} ranks needs as many GPUs; {gpus} visible")
        return 77
    checks = Checks()
    check = checks.check
    work = checks.work_folder("zt_gpu_multirank_")
    h = Harness(args, work)
    name = device_name(args)
    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
              "commit": os.environ.get("ZT_COMMIT", "unknown"), "device": name, "mode": args.device,
              "config": CONFIG, "loss_bound": LOSS_BOUND, "comms": args.comm, "gpus_visible": gpus,
              "rows": [], "resumes": [], "complete": False}

    def save():
        if args.out:
            os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
            with open(args.out + ".tmp", "w") as f:
                json.dump(report, f, indent=1)
            os.replace(args.out + ".tmp", args.out)

    cpu_runs = {}  # the CPU reference of each N, run once for every comm
    cpu_default_runs = {}  # the same for the default reductions' rows, by (N, stage)

    def rows_of(comm, n):
        """Stages 0-3 on n ranks through `comm` against the CPU at n, and one GPU rank accumulating n."""
        tag = f"{comm} N={n}" if len(args.comm) > 1 else f"N={n}"
        where = "on one device" if comm == "staged" else "on a GPU each through NCCL"
        gpu = {st: h.run(f"gpu_{comm}_n{n}_s{st}", n, "gpu", f"zero.stage={st}", comm=comm) for st in range(4)}
        if n not in cpu_runs:
            cpu_runs[n] = {st: h.run(f"cpu_n{n}_s{st}", n, "cpu", f"zero.stage={st}") for st in range(4)}
        cpu = cpu_runs[n]
        for st in range(4):
            g, c = gpu[st], cpu[st]
            row = {"comm": comm, "ranks": n, "stage": st}
            if not check("error" not in g, f"{tag} stage {st}: {n} ranks train {where}" +
                         (f" ({g.get('error', '')[-600:]})" if "error" in g else "")):
                row["error"] = g["error"]
                report["rows"].append(row)
                continue
            check(HEADER_MARK[comm] in g["header"], f"{tag} stage {st}: {comm} collectives ({g['header']!r})")
            row["bits_match_stage0"] = "error" not in gpu[0] and all(
                g[k] == gpu[0][k] for k in ("loss", "norm", "weights"))
            check(row["bits_match_stage0"], f"{tag} stage {st}: losses, norms and weights bitwise stage 0's")
            if "error" not in c:
                row["max_rel_loss_diff_vs_cpu"] = rel_loss_diff(g["loss"], c["loss"])
                check(row["max_rel_loss_diff_vs_cpu"] <= LOSS_BOUND,
                      f"{tag} stage {st}: losses within {LOSS_BOUND} of the CPU at N={n} "
                      f"({row['max_rel_loss_diff_vs_cpu']:.2e})")
            else:
                check(False, f"{tag} stage {st}: the CPU reference runs ({c['error'][-400:]})")
            ok, detail = memory_ok(g["memory"])
            row["memory_as_predicted"] = ok
            check(ok, f"{tag} stage {st}: device memory per category as predicted ({detail})")
            row["final_loss"] = g["loss"][-1]
            report["rows"].append(row)
        # The same global batch of N micro-batches on one GPU rank: the N-rank runs' bits.
        one = h.run(f"gpu_{comm}_n1_accum{n}", 1, "gpu", "zero.stage=0", f"train.grad_accum={n}", comm=comm)
        same = "error" not in one and "error" not in gpu[0] and all(one[k] == gpu[0][k]
                                                                    for k in ("loss", "norm", "weights"))
        report.setdefault("one_rank_equals_n_ranks", {})[str(n) if comm == "staged" else f"nccl {n}"] = same
        check(same, f"1 GPU rank accumulating {n} micro-batches: the {n}-rank runs' losses, norms and weights "
                    "bit for bit" + (f" ({one.get('error', '')[-600:]})" if "error" in one else ""))
        save()

    # Hybrid sharding through NCCL's splits (4 ranks a GPU each, groups of 2), where 4 GPUs run NCCL:
    # not deterministic (refused with hybrid on NCCL), so against the CPU's hybrid run within the
    # bound, and every category of device memory as predicted (the hop across the groups queued
    # with the first: its staging held from the start, schedule_replay).
    def hybrid_row():
        hybrid = ("zero.stage=3", "zero.shard_group_size=2", "train.deterministic=false")
        g = h.run("hybrid_nccl_n4", 4, "gpu", *hybrid, comm="nccl")
        c = h.run("hybrid_cpu_n4", 4, "cpu", *hybrid)
        row = {"comm": "nccl", "ranks": 4, "stage": 3, "shard_group_size": 2}
        against_cpu(row, g, c, "hybrid N=4 g=2 stage 3 (4 GPUs through NCCL's splits)", "groups of 2",
                    "the store's communicator is hybrid")
        save()

    def against_cpu(row, g, c, what, header_mark, header_means):
        """Row `row` of a GPU-side run `g` against its CPU reference `c`, not bitwise: both train, the
        header names `header_mark`, the losses stay within the bound, device memory as predicted."""
        if check("error" not in g and "error" not in c, f"{what}: trains on the GPU side and on the CPU "
                 f"({(g.get('error') or c.get('error') or '')[-600:]})"):
            check(header_mark in g["header"], f"{what}: {header_means} ({g['header']!r})")
            row["max_rel_loss_diff_vs_cpu"] = rel_loss_diff(g["loss"], c["loss"])
            check(row["max_rel_loss_diff_vs_cpu"] <= LOSS_BOUND,
                  f"{what}: losses within {LOSS_BOUND} of the CPU's ({row['max_rel_loss_diff_vs_cpu']:.2e})")
            ok, detail = memory_ok(g["memory"])
            row["memory_as_predicted"] = ok
            check(ok, f"{what}: device memory per category as predicted ({detail})")
        else:
            row["error"] = (g.get("error") or c.get("error"))[-1500:]
        report["rows"].append(row)

    # Not deterministic, as users train by default: stage 0's all-reduce, stage 1's reduce-scatter in
    # place, stages 2-3 reducing each micro-batch's gradient into the shard as it is made, bf16
    # pending gradients staged through fp32, with accumulation: the store's paths that the
    # deterministic rows above never take (a review of the never-run NCCL path). Against the CPU's
    # run at the same N within the bound, memory as predicted; on the ranks sharing one GPU too, where
    # the store's side of them runs on the device a one-GPU machine has.
    def default_reduction_rows(comm, n):
        sets = ("train.deterministic=false", "train.grad_accum=2")
        tag = f"{comm} N={n}" if len(args.comm) > 1 else f"N={n}"
        for st in range(4):
            g = h.run(f"gpu_{comm}_n{n}_s{st}_default", n, "gpu", f"zero.stage={st}", *sets, comm=comm)
            if (n, st) not in cpu_default_runs:  # the CPU reference once, whichever comms are named
                cpu_default_runs[(n, st)] = h.run(f"cpu_n{n}_s{st}_default", n, "cpu", f"zero.stage={st}", *sets)
            c = cpu_default_runs[(n, st)]
            row = {"comm": comm, "ranks": n, "stage": st, "deterministic": False, "grad_accum": 2}
            against_cpu(row, g, c, f"{tag} stage {st}, not deterministic, grad_accum 2", HEADER_MARK[comm],
                        f"{comm} collectives")
        save()

    def checkpoint_and_eval(ckpt_comm):
        # A stage-3 checkpoint of 2 GPU ranks (through the first comm named), resumed on 1 GPU rank and
        # on 2 CPU ranks.
        report["checkpoint_comm"] = ckpt_comm
        full = h.run("ckpt_full", 2, "gpu", "zero.stage=3", comm=ckpt_comm)
        first = h.run("ckpt_first", 2, "gpu", "zero.stage=3", "train.max_steps=4", "optim.decay_steps=8",
                      "checkpoint.at_end=true", comm=ckpt_comm)
        if check("error" not in first and "error" not in full, "2 GPU ranks write a stage-3 checkpoint"):
            ckpt = os.path.join(first["run_dir"], "checkpoints")
            for ranks, device in ((1, "gpu"), (2, "cpu")):
                what = f"{ranks} {'GPU' if device == 'gpu' else 'CPU'} rank(s)"
                # The same global batch of 4 sequences: one rank accumulates two micro-batches.
                r = h.run(f"resume_{ranks}_{device}", ranks, device, "zero.stage=3", "train.max_steps=8",
                          "optim.decay_steps=8", f"train.grad_accum={2 // ranks}", resume=ckpt, comm=ckpt_comm)
                entry = {"written_by": f"2 GPU ranks, stage 3, {ckpt_comm}", "resumed_on": what}
                if check("error" not in r, f"the 2-GPU-rank checkpoint resumes on {what}" +
                         (f" ({r.get('error', '')[-600:]})" if "error" in r else "")):
                    entry["max_rel_loss_diff_vs_uninterrupted"] = rel_loss_diff(r["loss"], full["loss"][4:])
                    check(entry["max_rel_loss_diff_vs_uninterrupted"] <= LOSS_BOUND,
                          f"... and its steps 5-8 follow the uninterrupted 2-rank GPU run "
                          f"({entry['max_rel_loss_diff_vs_uninterrupted']:.2e})")
                    if device == "gpu":  # another rank count on the same device: the same bits
                        entry["bitwise"] = r["loss"] == full["loss"][4:] and r["weights"] == full["weights"]
                        check(entry["bitwise"], "... bit for bit (losses of steps 5-8 and the final weights)")
                else:
                    entry["error"] = r["error"]
                report["resumes"].append(entry)
            # Multiple-choice evaluation from the checkpoint, the rows split over ranks sharing the GPU.
            rng = random.Random(5)
            vocab = CONFIG["model"]["vocab_size"]
            examples = [(rng.randrange(4), [rng.randrange(vocab) for _ in range(rng.randrange(3, 9))],
                         [[rng.randrange(vocab) for _ in range(rng.randrange(2, 7))] for _ in range(4)])
                        for _ in range(30)]
            choices = os.path.join(work, "choices.bin")
            write_choice_file(choices, examples)
            scores = {}
            for ranks in (1, 2, 3):
                cmd = [args.zerotrain] if ranks == 1 else h.mpirun + [
                    "-np", str(ranks), "-x", "CUDA_VISIBLE_DEVICES", args.zerotrain]
                p = subprocess.run(cmd + ["eval", "--ckpt", ckpt, "--choices", choices, "--device",
                                          "cuda" if args.device == "cuda" else "cpu"],
                                   capture_output=True, text=True, timeout=300, env=on_one_gpu(dict(os.environ)))
                lines = [l for l in p.stdout.splitlines() if " correct = " in l]
                scores[ranks] = lines[0].split(": ", 1)[1].split(" (")[0] if p.returncode == 0 and len(lines) == 1 \
                    else f"exit {p.returncode}, {len(lines)} score lines: {(p.stdout + p.stderr)[-400:]}"
            report["eval_on_ranks"] = scores
            check("/30 correct" in scores[1] and scores[2] == scores[1] and scores[3] == scores[1],
                  f"zerotrain eval on 2 and 3 ranks sharing the device prints one rank's score once ({scores})")

    # The first comm named first, all of it: its rows, then (NCCL on 4 GPUs) hybrid sharding, then
    # its checkpoint and evaluation, then its default reductions at its first rank count, so a
    # budget cut short loses the later comm's rows, not these.
    for comm in args.comm:
        counts = args.ranks if comm == "staged" else args.nccl_ranks
        for n in counts:
            rows_of(comm, n)
        if comm == args.comm[0]:
            if comm == "nccl" and 4 in args.nccl_ranks:
                hybrid_row()
            checkpoint_and_eval(comm)
        if counts:
            default_reduction_rows(comm, counts[0])
    report["complete"] = True
    report["passed"] = not checks.failures
    save()
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
