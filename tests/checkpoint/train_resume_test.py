#!/usr/bin/env python3
"""`zerotrain train --resume` through the real binary and real ranks:

  * exact resume: a run stopped after 4 of 8 steps (checkpoint.at_end) and resumed with
    `--resume latest` gives BITWISE the losses, gradient norms (metrics.jsonl) and final weights
    (final.safetensors tensor bytes) of the uninterrupted 8-step run -- at ZeRO stages 0-3 on 2
    ranks, each with grad_accum 1 and 2, and at stage 3 in bf16;
  * resumed twice (stopped after 3 and 6 steps), the same bitwise;
  * periodic saves (every_steps 2, keep_last 2) leave exactly the last two checkpoints, `latest`
    on the newest, a "checkpoint" metrics record per save, and do not perturb training;
  * resume on another number of ranks and stage (RESHARD_CASES: 4->2, 2->4, 3->2, 1->4, 4->1, 2->1,
    2->3 ranks across stage changes, same global batch, deterministic reductions) matches the
    uninterrupted run on the saving ranks within the fp32 reduction-order bound stated below;
  * `sample --ckpt FOLDER` generates the text `sample --run` does from the same (fp32) weights;
  * `--resume latest` with no checkpoint and a checkpoint of another model are one-line errors, exit 2.

The LR schedule's length is fixed (optim.decay_steps = 8) so the stopped run has the schedule of
the uninterrupted one, as a preempted run would.

usage: train_resume_test.py --zerotrain PATH [-- MPIRUN FLAGS...]   (without mpirun: 1-rank cases only)
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402
from run_dir_util import curve, deep_merge, floats, tensors, train_records  # noqa: E402

BASE = {
    "model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 64},
    "data": {"embedded_chars": 50000},
    "train": {"micro_batch": 6, "max_steps": 8, "eval_batches": 2, "num_threads": 1},
    "optim": {"lr": 3e-3, "warmup_steps": 2, "decay_steps": 8},
    "log": {"sample_tokens": 8, "progress": "plain"},
}
# Reduction-order bound for resharded resumes (2 -> 1 and 2 -> 3 ranks): the gradients differ
# only by fp32 summation order (~1e-7 relative). Measured over the 4 resumed AdamW steps: at most
# 1.3e-7 relative on losses and gradient norms and 3.1e-7 absolute on any weight; the bounds leave
# a factor ~30-80 (an error in the data position or the optimizer state shows as >= 1e-3).
RESHARD_REL_TOL = 1e-5
# (saving ranks N, stage s, resuming ranks M, stage t): the pairs 4->2 (3->0), 2->4 (1->3),
# 3->2 (2->2), 1->4, 4->1, and 2->1, 2->3.
RESHARD_CASES = [(4, 3, 2, 0), (2, 1, 4, 3), (3, 2, 2, 2), (1, 0, 4, 1), (4, 0, 1, 3), (2, 3, 1, 0), (2, 3, 3, 1)]
RESHARD_WEIGHT_ABS_TOL = 1e-5


def main():
    argv = sys.argv[1:]
    mpirun = []
    if "--" in argv:
        split = argv.index("--")
        mpirun = argv[split + 1:]
        argv = argv[:split]
    parser = argparse.ArgumentParser()
    parser.add_argument("--zerotrain", required=True)
    args = parser.parse_args(argv)
    checks = Checks()
    check = checks.check
    work = checks.work_folder("zt_train_resume_")
    counter = [0]

    def train(np_, config, run_dir, extra=()):
        counter[0] += 1
        path = os.path.join(work, f"config{counter[0]}.json")
        with open(path, "w") as f:
            json.dump(config, f)
        launcher = mpirun + ["-np", str(np_)] if mpirun and np_ > 1 else []
        cmd = launcher + [args.zerotrain, "train", "--config", path, "--run-dir", run_dir] + list(extra)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        return p

    def ok(p, what):
        return check(p.returncode == 0, what + ("" if p.returncode == 0 else
                                                f": exit {p.returncode}: {(p.stdout + p.stderr)[-600:]}"))

    first_logs = {}  # run directory: its metrics.jsonl lines as the first process left them

    def interrupted(np_, config, run_dir, resume_np=None, resume_config=None):
        first = deep_merge(config, {"train": {"max_steps": 4}, "checkpoint": {"at_end": True}})
        p1 = train(np_, first, run_dir)
        if p1.returncode != 0:
            return p1, None
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            first_logs[run_dir] = f.read().splitlines()
        p2 = train(resume_np or np_, resume_config or config, run_dir, ["--resume", "latest"])
        return p1, p2

    cases = [(f"stage {stage}, f32" + (f", grad_accum {accum}" if accum > 1 else ""), 2,
              {"zero": {"stage": stage}, "train": {"grad_accum": accum}})
             for stage in range(4) for accum in (1, 2)]
    cases.append(("stage 3, bf16", 2, {"zero": {"stage": 3}, "precision": {"param_dtype": "bf16"}}))
    # The head in vocabulary chunks: the token table in two units (vocab 200: 256 padded rows), and
    # blocks in attention and MLP units.
    chunked_over = {"zero": {"stage": 3}, "model": {"vocab_size": 200}, "train": {"head_chunks": 2, "block_units": 2}}
    cases.append(("stage 3, head_chunks 2", 2, chunked_over))
    if not mpirun:
        cases = [("1 rank, stage 0, f32, grad_accum 2", 1, {"train": {"grad_accum": 2}})]
    references = {}
    saved = None  # a checkpoint of BASE's model, for the wrong-model check
    for name, np_, over in cases:
        config = deep_merge(BASE, over)
        ref_dir = os.path.join(work, f"ref{len(references)}")
        ref_config = config
        periodic = name == "stage 3, f32, grad_accum 2"
        if periodic:  # saving every 2 steps must not change what the run computes
            ref_config = deep_merge(config, {"checkpoint": {"every_steps": 2, "keep_last": 2}})
        if not ok(train(np_, ref_config, ref_dir), f"{name}: uninterrupted 8-step run exits 0"):
            continue
        references[name] = ref_dir
        if periodic:
            folder = os.path.join(ref_dir, "checkpoints")
            kept = sorted(d for d in os.listdir(folder) if d.startswith("step_"))
            check(kept == ["step_00000006", "step_00000008"], f"{name}: keep_last 2 leaves the last two ({kept})")
            with open(os.path.join(folder, "latest")) as f:
                check(f.read().strip() == "step_00000008", f"{name}: latest names step_00000008")
            saves = [r for r in train_records(ref_dir) if r["type"] == "checkpoint"]
            check([r["step"] for r in saves] == [2, 4, 6, 8] and all(r["total_bytes"] > 0 for r in saves),
                  f"{name}: one checkpoint record (with size and duration) per save")
            # fp32 final weights are the masters: sampling from the checkpoint folder's latest
            # checkpoint gives the text the run directory's final weights give.
            sample = [args.zerotrain, "sample", "--tokens", "30", "--seed", "5"]
            from_run = subprocess.run(sample + ["--run", ref_dir], capture_output=True, text=True, timeout=60)
            from_ckpt = subprocess.run(sample + ["--ckpt", folder], capture_output=True, text=True, timeout=60)
            check(from_run.returncode == 0 and from_ckpt.returncode == 0 and from_run.stdout == from_ckpt.stdout
                  and len(from_ckpt.stdout) > 10,
                  f"{name}: sample --ckpt (2 rank files, stage 3) gives sample --run's text "
                  f"({from_ckpt.stdout.strip()!r} vs {from_run.stdout.strip()!r}{from_ckpt.stderr.strip()})")
        run_dir = os.path.join(work, f"resumed{len(references)}")
        p1, p2 = interrupted(np_, config, run_dir)
        if not ok(p1, f"{name}: run stopped after 4 steps exits 0") or not ok(p2, f"{name}: --resume latest exits 0"):
            continue
        saved = saved or os.path.join(run_dir, "checkpoints", "step_00000004")
        check("saved checkpoint" in p1.stdout, f"{name}: the save is logged")
        check("resumed from" in p2.stdout and "step_00000004" in p2.stdout, f"{name}: the resume is logged")
        ref_curve, got_curve = curve(train_records(ref_dir)), curve(train_records(run_dir))
        check([s for s, *_ in got_curve] == list(range(1, 9)), f"{name}: metrics.jsonl holds steps 1-8 after resume")
        check(got_curve == ref_curve, f"{name}: losses, grad norms and LRs bitwise equal to the uninterrupted run")
        # A resume, not a rerun (whose curve and weights would be the same): the second process
        # logged its resume from step 4 and trained steps 5-8 only, the first process's records of
        # steps 1-4 kept as they were, timings included.
        recs = train_records(run_dir)
        at = max((i for i, r in enumerate(recs) if r["type"] == "resume"), default=None)
        after = [r["step"] for r in recs[at:] if r["type"] == "train"] if at is not None else []
        check(at is not None and recs[at]["step"] == 4 and recs[at]["checkpoint"].endswith("step_00000004")
              and after == [5, 6, 7, 8], f"{name}: the second process resumed at step 4 and trained steps 5-8 "
                                         f"({recs[at] if at is not None else 'no resume record'}, {after})")
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            lines = f.read().splitlines()
        first_train = [line for line in first_logs.get(run_dir, []) if '"type":"train"' in line]
        check(len(first_train) == 4 and all(line in lines for line in first_train),
              f"{name}: the first process's records of steps 1-4 are kept byte for byte ({len(first_train)})")
        ref_w, got_w = tensors(os.path.join(ref_dir, "final.safetensors")), tensors(os.path.join(run_dir, "final.safetensors"))
        check(ref_w.keys() == got_w.keys() and all(ref_w[k] == got_w[k] for k in ref_w),
              f"{name}: final weights bitwise equal ({len(ref_w)} tensors)")

    # Resumed twice (stopped after 3 and 6 steps): the second resume starts from a checkpoint the
    # first resumed process wrote, whose data position counts from where that process started.
    name, np_, over = cases[0]
    if name in references:
        config = deep_merge(BASE, over)
        run_dir = os.path.join(work, "resumed_twice")
        segments = [train(np_, deep_merge(config, {"train": {"max_steps": 3}, "checkpoint": {"at_end": True}}), run_dir)]
        segments.append(train(np_, deep_merge(config, {"train": {"max_steps": 6}, "checkpoint": {"at_end": True}}),
                              run_dir, ["--resume", "latest"]))
        segments.append(train(np_, config, run_dir, ["--resume", "latest"]))
        if all(ok(p, f"{name}: segment {i + 1} of a run stopped after 3 and 6 steps exits 0")
               for i, p in enumerate(segments)):
            ref_w = tensors(os.path.join(references[name], "final.safetensors"))
            got_w = tensors(os.path.join(run_dir, "final.safetensors"))
            check(curve(train_records(run_dir)) == curve(train_records(references[name])) and
                  ref_w.keys() == got_w.keys() and all(ref_w[k] == got_w[k] for k in ref_w),
                  f"{name}: resumed twice, losses, grad norms, LRs and final weights bitwise equal to the "
                  f"uninterrupted run")

    if "stage 3, head_chunks 2" in references:
        # Checkpoints of chunk units (saved by 2 ranks where there are ranks): sampled from,
        # exported as Hugging Face's one wte tensor, and refused (one line) by a resume that would
        # split the table otherwise.
        np_ = 2 if mpirun else 1
        run_dir = os.path.join(work, "chunked_saved")
        p = train(np_, deep_merge(BASE, deep_merge(chunked_over, {"train": {"max_steps": 4}, "checkpoint": {"at_end": True}})),
                  run_dir)
        folder = os.path.join(run_dir, "checkpoints")
        sample = [args.zerotrain, "sample", "--tokens", "30", "--seed", "5"]
        from_ckpt = subprocess.run(sample + ["--ckpt", folder], capture_output=True, text=True, timeout=60)
        from_run = subprocess.run(sample + ["--run", run_dir], capture_output=True, text=True, timeout=60)
        check(p.returncode == 0 and from_ckpt.returncode == 0 and from_ckpt.stdout == from_run.stdout
              and len(from_ckpt.stdout) > 10,
              f"head_chunks 2: sample --ckpt gives sample --run's text ({from_ckpt.stderr.strip()[-200:]})")
        out = os.path.join(work, "chunked_hf")
        e = subprocess.run([args.zerotrain, "ckpt", "export", folder, "--format", "hf", "--out", out],
                           capture_output=True, text=True, timeout=60)
        exported = tensors(os.path.join(out, "model.safetensors")) if e.returncode == 0 else {}
        final = tensors(os.path.join(run_dir, "final.safetensors")) if e.returncode == 0 else {}
        check(e.returncode == 0 and exported.keys() == final.keys() and all(exported[k] == final[k] for k in final),
              f"head_chunks 2: the HF export of the {np_}-rank checkpoint holds the run's final tensors, wte whole "
              f"({e.stderr.strip()[-200:]})")
        p = train(1, deep_merge(BASE, deep_merge(chunked_over, {"train": {"head_chunks": 1}})),
                  os.path.join(work, "chunked_other"), ["--resume", os.path.join(folder, "step_00000004")])
        lines = p.stderr.strip().splitlines()
        check(p.returncode == 2 and len(lines) == 1 and "head_chunks" in lines[0],
              f"head_chunks 2 -> 1 on resume: one line naming head_chunks, exit 2 ({p.stderr.strip()[-300:]})")

    if mpirun:
        # Resharded resume through the trainer: saved by N ranks at stage s, resumed on M at stage
        # t, with micro_batch 12 / ranks: the same 12 samples per step in the same global order.
        ref_dirs = {}
        for n, s_stage, m, t in RESHARD_CASES:
            config = deep_merge(BASE, {"zero": {"stage": s_stage}, "train": {"deterministic": True, "micro_batch": 12 // n}})
            if (n, s_stage) not in ref_dirs:
                ref_dir = os.path.join(work, f"reshard_ref_{n}_{s_stage}")
                ref_dirs[n, s_stage] = ref_dir if ok(train(n, config, ref_dir),
                                               f"reshard: uninterrupted {n}-rank stage-{s_stage} run exits 0") else None
            ref_dir = ref_dirs[n, s_stage]
            if ref_dir is None:
                continue
            ref_curve = curve(train_records(ref_dir))
            ref_w = tensors(os.path.join(ref_dir, "final.safetensors"))
            name = f"saved by {n} rank(s) at stage {s_stage}, resumed on {m} at stage {t}"
            run_dir = os.path.join(work, f"reshard_{n}_{s_stage}_{m}_{t}")
            resume_config = deep_merge(config, {"zero": {"stage": t}, "train": {"micro_batch": 12 // m}})
            p1, p2 = interrupted(n, config, run_dir, resume_np=m, resume_config=resume_config)
            if not ok(p1, f"{name}: first part exits 0") or not ok(p2, f"{name}: resume exits 0"):
                continue
            got_curve = curve(train_records(run_dir))
            check([step for step, *_ in got_curve] == list(range(1, 9)), f"{name}: steps 1-8 recorded")
            check(got_curve[:4] == ref_curve[:4], f"{name}: steps 1-4 bitwise equal (same ranks)")
            worst = max(max(abs(a[1] - b[1]) / abs(b[1]), abs(a[2] - b[2]) / abs(b[2]))
                        for a, b in zip(got_curve[4:], ref_curve[4:]))
            check(worst <= RESHARD_REL_TOL, f"{name}: steps 5-8 losses and grad norms within "
                  f"{RESHARD_REL_TOL:g} relative (worst {worst:.2e})")
            got_w = tensors(os.path.join(run_dir, "final.safetensors"))
            wmax = max(max(abs(x - y) for x, y in zip(floats(got_w[k][1]), floats(ref_w[k][1]))) for k in ref_w)
            check(wmax <= RESHARD_WEIGHT_ABS_TOL,
                  f"{name}: final weights within {RESHARD_WEIGHT_ABS_TOL:g} absolute (worst {wmax:.2e})")

    # Errors: one line, exit 2 (one process, so one stderr).
    empty_dir = os.path.join(work, "nothing")
    p = train(1, BASE, empty_dir, ["--resume", "latest"])
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 2 and len(lines) == 1 and "no checkpoint" in lines[0],
          f"--resume latest without a checkpoint: one line, exit 2 ({p.returncode}: {p.stderr.strip()})")
    if saved is not None:
        other = deep_merge(BASE, {"model": {"n_embd": 48}})
        p = train(1, other, os.path.join(work, "other_model"), ["--resume", saved])
        lines = p.stderr.strip().splitlines()
        check(p.returncode == 2 and len(lines) == 1 and "model" in lines[0],
              f"--resume with another model: one line, exit 2 ({p.returncode}: {p.stderr.strip()[-300:]})")
        if mpirun:
            # Every rank refuses alike: the job says it once (each rank printed it, a line a rank).
            for what, config, extra in (
                    ("--resume with another model", other, ["--resume", saved]),
                    ("an out-of-range key", deep_merge(BASE, {"zero": {"stage": 7}}), []),
                    ("--resume latest without a checkpoint", BASE, ["--resume", "latest"])):
                p = train(3, config, os.path.join(work, "three_" + what.split()[-1]), extra)
                lines = [line for line in p.stderr.splitlines() if line.startswith("zerotrain: error:")]
                check(p.returncode == 2 and len(lines) == 1,
                      f"{what} on 3 ranks: one error line, exit 2 ({p.returncode}: {lines})")
    if mpirun:
        # A NaN in rank 1's shard, resealed (verify passes): every rank ends at once with rank 1's
        # line, before the publish (rank 0 went on to a step's start, then was stopped by the
        # launcher with a second line blaming another rank's failure).
        nan_dir = os.path.join(work, "nan_shard")
        config = deep_merge(BASE, {"zero": {"stage": 3}})
        p1 = train(2, deep_merge(config, {"train": {"max_steps": 2}, "checkpoint": {"at_end": True}}), nan_dir)
        step = os.path.join(nan_dir, "checkpoints", "step_00000002")
        if ok(p1, "a 2-rank stage-3 run to damage"):
            with open(os.path.join(step, "rank_00001.bin"), "r+b") as f:
                f.seek(4000)
                f.write(struct.pack("<f", float("nan")))
            with open(os.path.join(step, "manifest.json")) as f:
                manifest = json.load(f)
            for entry in manifest["files"]:
                with open(os.path.join(step, entry["name"]), "rb") as f:
                    data = f.read()
                entry["crc32"] = zlib.crc32(data)
                entry["chunk_crc32"] = [zlib.crc32(data[o:o + 1048576]) for o in range(0, len(data), 1048576)]
            manifest.pop("manifest_crc32")
            manifest["manifest_crc32"] = zlib.crc32(
                json.dumps(manifest, separators=(",", ":"), ensure_ascii=False).encode())
            with open(os.path.join(step, "manifest.json"), "w") as f:
                json.dump(manifest, f, indent=1)
            p = train(2, deep_merge(config, {"train": {"max_steps": 3}}), nan_dir, ["--resume", "latest"])
            lines = [line for line in p.stderr.splitlines() if "error" in line]
            check(p.returncode == 2 and len(lines) == 1 and lines[0].startswith("zerotrain: error: rank 1:") and
                  "is nan" in lines[0] and "resumed from" not in p.stdout,
                  f"a NaN in one rank's shard: one agreed line naming that rank, no step begun ({lines})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
