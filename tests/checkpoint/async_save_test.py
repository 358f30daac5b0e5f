#!/usr/bin/env python3
"""checkpoint.async through the real binary and real ranks:

  * the same bits as synchronous saves: losses, gradient norms and final weights, and every
    checkpoint's rank files byte for byte (so their checksums), at stage 3 on 2 ranks;
  * training goes on while a save is written (the test hook's pause holds each background write
    0.7 s, some 50 steps): steps after the save's step are logged before the save is committed, and each commit
    is logged with the time the training thread was blocked (less than the save's own);
  * the staging buffer measured on the fullest rank equals the prediction, which is rank 0's file
    size and what `zerotrain memory --json` says;
  * kill -9 while a save is written in the background: `latest` still names the previous complete
    checkpoint, no directory of the killed save appears, and `--resume latest` finishes bitwise
    equal to the uninterrupted run, logging the resumed save's `checkpoint` record where the kill
    left it unwritten;
  * a stop request during a background write saves the stop's checkpoint after it, exits 0 and resumes;
  * a save that fails in the background (its temporary directory removed under it) stops the run at
    the step boundary that finishes it, on every rank, with one line naming the step, after training
    went on past it; the earlier checkpoint stays `latest`; under hybrid sharding the ranks that
    write no file say it too.

usage: async_save_test.py --zerotrain PATH [-- MPIRUN FLAGS...]   (without mpirun: 1-process cases)
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402
from run_dir_util import curve, deep_merge, rank_pids, split_launcher, tensors, train_records, wait_until  # noqa: E402

SHORT = {
    "model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 64},
    "data": {"embedded_chars": 50000},
    "train": {"micro_batch": 6, "max_steps": 8, "eval_batches": 2, "num_threads": 1},
    "optim": {"lr": 3e-3, "warmup_steps": 2, "decay_steps": 8},
    "checkpoint": {"every_steps": 2},
    "log": {"sample_tokens": 0, "progress": "plain"},
}
# ~4 ms a step alone: a save's pause spans many steps.
LONG = deep_merge(SHORT, {"model": {"n_embd": 64, "block_size": 64},
                          "train": {"micro_batch": 8, "max_steps": 600},
                          "optim": {"decay_steps": 600},
                          "checkpoint": {"every_steps": 100}})


def records(run_dir, kind):
    return [r for r in train_records(run_dir) if r["type"] == kind]


def main():
    argv, mpirun = split_launcher(sys.argv[1:])
    parser = argparse.ArgumentParser()
    parser.add_argument("--zerotrain", required=True)
    args = parser.parse_args(argv)
    checks = Checks()
    check = checks.check
    work = checks.work_folder("zt_async_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_"))}
    np_ = 2 if mpirun else 1
    counter = [0]

    def config_file(config):
        counter[0] += 1
        path = os.path.join(work, f"config{counter[0]}.json")
        with open(path, "w") as f:
            json.dump(config, f)
        return path

    def command(config, run_dir, extra=(), ranks=None):
        ranks = ranks or np_
        launcher = mpirun + ["-np", str(ranks)] if ranks > 1 else []
        return launcher + [args.zerotrain, "train", "--config", config_file(config), "--run-dir", run_dir] + list(extra)

    def run(config, run_dir, extra=(), extra_env=None):
        return subprocess.run(command(config, run_dir, extra), capture_output=True, text=True, timeout=180,
                              env={**env, **(extra_env or {})})

    def start(config, run_dir, extra_env=None, ranks=None):
        return subprocess.Popen(command(config, run_dir, ranks=ranks), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env={**env, **(extra_env or {})})

    def fail_step_200_save(proc, run_dir, rank_file):
        """Removes step 200's temporary directory once `rank_file` is being written into it (the
        write held by the test hook's pause), then waits for the run: its (exit code, stdout, stderr)."""
        temp = os.path.join(run_dir, "checkpoints", ".tmp-step_00000200")
        written = os.path.join(temp, rank_file)
        if wait_until(lambda: os.path.exists(written) and os.path.getsize(written) > 0):
            shutil.rmtree(temp, ignore_errors=True)
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        return proc.returncode, out, err

    def ok(p, what):
        return check(p.returncode == 0, what + ("" if p.returncode == 0 else
                                                f": exit {p.returncode}: {(p.stdout + p.stderr)[-600:]}"))

    def same_run(name, run_dir, ref_dir):
        check(curve(train_records(run_dir)) == curve(train_records(ref_dir)),
              f"{name}: losses, grad norms and LRs bitwise equal to the synchronous run")
        ref_w, got_w = tensors(os.path.join(ref_dir, "final.safetensors")), tensors(os.path.join(run_dir, "final.safetensors"))
        check(ref_w.keys() == got_w.keys() and all(ref_w[k] == got_w[k] for k in ref_w),
              f"{name}: final weights bitwise equal ({len(ref_w)} tensors)")

    def file_bytes(path):
        with open(path, "rb") as f:
            return f.read()

    base = deep_merge(SHORT, {"zero": {"stage": 3}} if np_ > 1 else {})
    asynchronous = deep_merge(base, {"checkpoint": {"async": True}})
    sync_dir, async_dir = os.path.join(work, "sync"), os.path.join(work, "async")
    what = f"{np_} rank(s){', stage 3' if np_ > 1 else ''}"
    if ok(run(base, sync_dir), f"{what}: synchronous saves exit 0") and \
            ok(run(asynchronous, async_dir, extra_env={"ZT_TEST_CHECKPOINT_PAUSE_MS": "700"}),
               f"{what}: asynchronous saves (each write held 0.7 s) exit 0"):
        same_run(what, async_dir, sync_dir)
        steps = range(2, 9, 2)
        kept = sorted(os.listdir(os.path.join(async_dir, "checkpoints")))
        check(kept == sorted(os.listdir(os.path.join(sync_dir, "checkpoints"))),
              f"{what}: the same checkpoints kept ({kept})")
        same = all(file_bytes(os.path.join(async_dir, "checkpoints", d, f)) ==
                   file_bytes(os.path.join(sync_dir, "checkpoints", d, f))
                   for d in kept if d.startswith("step_") for f in os.listdir(os.path.join(sync_dir, "checkpoints", d))
                   if f.endswith(".bin"))
        check(same, f"{what}: every kept checkpoint's rank files byte-identical to the synchronous saves'")
        saved = records(async_dir, "checkpoint")
        check([r["step"] for r in saved] == list(steps) and all(r["async"] for r in saved),
              f"{what}: one asynchronous checkpoint record per save ({[r['step'] for r in saved]})")
        # (Steps this short reach the next save, or the end, before the pause is over: the wait for
        # the write is counted as blocked.)
        check(all(0 <= r["blocked_seconds"] <= r["seconds"] and r["seconds"] >= 0.7 for r in saved),
              f"{what}: each save took its 0.7 s pause or more, the training thread at most that "
              f"({[(round(r['blocked_seconds'], 3), round(r['seconds'], 3)) for r in saved]})")
        order = [(r["type"], r["step"]) for r in train_records(async_dir) if r["type"] in ("train", "checkpoint")]
        went_on = all(order.index(("train", s + 1)) < order.index(("checkpoint", s)) for s in (2, 4, 6))
        check(went_on, f"{what}: the step after each save trained before the save was committed")
        staging = records(async_dir, "checkpoint_staging_memory")
        rank0 = os.path.getsize(os.path.join(async_dir, "checkpoints", "step_00000008", "rank_00000.bin"))
        check(len(staging) == 1 and max(staging[0]["measured_bytes"]) == staging[0]["predicted_bytes"] == rank0,
              f"{what}: checkpoint staging measured = predicted = rank 0's file ({staging}, {rank0} bytes)")
        mem = subprocess.run([args.zerotrain, "memory", "--config", config_file(asynchronous), "--ranks", str(np_),
                              "--json"], capture_output=True, text=True, timeout=60)
        check(mem.returncode == 0 and json.loads(mem.stdout)["checkpoint_staging_bytes"] == rank0,
              f"{what}: zerotrain memory --json predicts the same staging")

        # A kill between a synchronous save's commit and its record: the log names the save (its
        # checkpoint_started record), so it is this run's, kept, and the record recovered.
        name = f"{what}: a synchronous save's record lost"
        lost = os.path.join(work, "sync_lost")
        shutil.copytree(sync_dir, lost)
        log = os.path.join(lost, "metrics.jsonl")
        with open(log) as f:
            kept_lines = [line for line in f if json.loads(line)["type"] != "summary" and
                          not ('"type":"checkpoint"' in line and json.loads(line)["step"] == 8)]
        with open(log, "w") as f:
            f.writelines(kept_lines)
        p = run(deep_merge(base, {"train": {"max_steps": 9}}), lost, ["--resume", "latest"])
        step8 = [r for r in records(lost, "checkpoint") if r["step"] == 8]
        check(p.returncode == 0 and "another run's log" not in p.stdout and
              not [n for n in os.listdir(lost) if n.startswith("metrics.") and n != "metrics.jsonl"] and
              len(step8) == 1 and "recovered" in step8[0],
              f"{name}: the log is kept as this run's and step 8's record recovered ({step8}; {p.stdout[-300:]})")

        # The same for the run's first save, which has no earlier save the log could name: the log
        # was set aside as another run's (a kill just after step 2's commit; a fuzz found it).
        name = f"{what}: the first synchronous save's record lost"
        first = os.path.join(work, "sync_first_lost")
        if ok(run(deep_merge(base, {"checkpoint": {"keep_last": 0}}), first), f"{name}: the run exits 0"):
            folder = os.path.join(first, "checkpoints")
            for d in os.listdir(folder):
                if d.startswith("step_") and d != "step_00000002":
                    shutil.rmtree(os.path.join(folder, d))
            with open(os.path.join(folder, "latest"), "w") as f:
                f.write("step_00000002\n")
            os.remove(os.path.join(first, "final.safetensors"))
            log = os.path.join(first, "metrics.jsonl")
            with open(log) as f:
                kept_lines = [line for line in f if json.loads(line).get("step", 0) <= 2 and
                              json.loads(line)["type"] not in ("summary", "checkpoint")]
            with open(log, "w") as f:
                f.writelines(kept_lines)
            p = run(deep_merge(base, {"checkpoint": {"keep_last": 0}}), first, ["--resume", "latest"])
            step2 = [r for r in records(first, "checkpoint") if r["step"] == 2]
            check(p.returncode == 0 and "another run's log" not in p.stdout and len(step2) == 1 and
                  "recovered" in step2[0] and [r["step"] for r in records(first, "train")] == list(range(1, 9)),
                  f"{name}: the log is kept, step 2's record recovered, steps 1-8 logged once ({step2}; "
                  f"{p.stdout[-300:]})")

    # kill -9 while step 4's save is written in the background (each write held 1.5 s).
    name = f"{what}: kill -9 during the background write of step 4"
    run_dir = os.path.join(work, "killed")
    proc = start(asynchronous, run_dir, {"ZT_TEST_CHECKPOINT_PAUSE_MS": "1500"})
    partial = os.path.join(run_dir, "checkpoints", ".tmp-step_00000004", f"rank_{np_ - 1:05d}.bin")
    in_save = wait_until(lambda: os.path.exists(partial) and os.path.getsize(partial) > 0)
    if in_save:
        time.sleep(0.1)
        os.kill(rank_pids(run_dir)[0], signal.SIGKILL)
    try:
        proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
    check(in_save and proc.returncode != 0, f"{name}: killed inside the save (exit {proc.returncode})")
    folder = os.path.join(run_dir, "checkpoints")
    with open(os.path.join(folder, "latest")) as f:
        check(f.read().strip() == "step_00000002", f"{name}: latest still names step_00000002")
    check(not os.path.exists(os.path.join(folder, "step_00000004")), f"{name}: no step_00000004 appeared")
    # The kill may also land between a commit and its `checkpoint` record (written at a later step
    # boundary): as if it had, step 2's record is taken out; the resume logs it again, from the manifest.
    log = os.path.join(run_dir, "metrics.jsonl")
    with open(log) as f:
        kept = [line for line in f if not ('"type":"checkpoint"' in line and json.loads(line)["step"] == 2)]
    with open(log, "w") as f:
        f.writelines(kept)
    with open(os.path.join(folder, "step_00000002", "manifest.json")) as f:
        save_id = json.load(f)["extra"]["save_id"]
    p = run(asynchronous, run_dir, ["--resume", "latest"])
    if ok(p, f"{name}: --resume latest exits 0") and os.path.exists(sync_dir):
        check("step_00000002" in p.stdout, f"{name}: resumed from step_00000002")
        same_run(name, run_dir, sync_dir)
        step2 = [r for r in records(run_dir, "checkpoint") if r["step"] == 2]
        check(len(step2) == 1 and step2[0].get("save_id") == save_id and "recovered" in step2[0],
              f"{name}: step 2's missing checkpoint record is recovered once, with its save_id ({step2})")

    # A stop request (SIGTERM; SIGUSR1 to mpirun) while a save is written in the background: the
    # stop's checkpoint is saved at the next step boundary after the one in flight is finished,
    # the run exits 0, `latest` names it and it resumes.
    name = f"{what}: a stop request during a background write"
    run_dir = os.path.join(work, "stopped")
    proc = start(deep_merge(LONG, {"checkpoint": {"async": True}}), run_dir, {"ZT_TEST_CHECKPOINT_PAUSE_MS": "1000"})
    partial = os.path.join(run_dir, "checkpoints", ".tmp-step_00000100", f"rank_{np_ - 1:05d}.bin")
    in_save = wait_until(lambda: os.path.exists(partial) and os.path.getsize(partial) > 0)
    if in_save:
        os.kill(proc.pid, signal.SIGUSR1 if np_ > 1 else signal.SIGTERM)
    try:
        proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
    stops = records(run_dir, "stop")
    saved = [r["step"] for r in records(run_dir, "checkpoint")]
    stop_step = stops[0]["step"] if stops else -1
    # (Under load the signal may land some steps later, past another periodic save: the stop's is last;
    # or before step 101 ends, when the save in flight is the stop's own: step 100.)
    check(in_save and proc.returncode == 0 and stops and saved[:1] == [100] and saved[-1] == stop_step and
          100 <= stop_step < 600,
          f"{name}: exit {proc.returncode}, the save in flight (step 100) finished and the stop's at step "
          f"{stop_step} saved ({saved})")
    if stops:
        with open(os.path.join(run_dir, "checkpoints", "latest")) as f:
            check(f.read().strip() == f"step_{stop_step:08d}", f"{name}: latest names the stop's checkpoint")
        p = run(deep_merge(LONG, {"checkpoint": {"async": True}, "train": {"max_steps": stop_step + 2}}), run_dir,
                ["--resume", "latest", "--allow-config-change"])
        ok(p, f"{name}: --resume latest continues from it")

    # A background write that fails: its temporary directory removed while the write is held.
    name = f"{what}: a save failing in the background"
    run_dir = os.path.join(work, "failing")
    config = deep_merge(LONG, {"checkpoint": {"async": True}})
    rc, out, err = fail_step_200_save(start(config, run_dir, {"ZT_TEST_CHECKPOINT_PAUSE_MS": "1000"}), run_dir,
                                      f"rank_{np_ - 1:05d}.bin")
    lines = [line for line in err.splitlines() if "checkpoint at step 200 not saved" in line]
    check(rc != 0 and len(lines) >= 1, f"{name}: the run stops non-zero naming the save (exit {rc}: {(out + err)[-400:]})")
    trained = [r["step"] for r in records(run_dir, "train")]
    check(trained and 200 < max(trained) < LONG["train"]["max_steps"],
          f"{name}: training went on past step 200 until the failure was found (last step {max(trained or [0])})")
    folder = os.path.join(run_dir, "checkpoints")
    with open(os.path.join(folder, "latest")) as f:
        check(f.read().strip() == "step_00000100", f"{name}: latest still names step_00000100")
    check(not os.path.exists(os.path.join(folder, "step_00000200")), f"{name}: no step_00000200 appeared")

    # The same under hybrid sharding (4 ranks in groups of 2): group 0 writes the files, and the
    # ranks of group 1, which write none, learn the failure at the same step boundary and say it,
    # rather than training on until the launcher stops them inside a collective.
    if mpirun:
        name = "hybrid, 4 ranks: a save failing in the background"
        run_dir = os.path.join(work, "failing_hybrid")
        hybrid = deep_merge(LONG, {"checkpoint": {"async": True}, "zero": {"stage": 3, "shard_group_size": 2}})
        rc, out, err = fail_step_200_save(start(hybrid, run_dir, {"ZT_TEST_CHECKPOINT_PAUSE_MS": "1000"}, ranks=4),
                                          run_dir, "rank_00001.bin")
        said = [line for line in err.splitlines() if "checkpoint at step 200 not saved" in line]
        check(rc != 0 and len(said) == 4 and sum("failed in rank group 0" in s for s in said) == 2,
              f"{name}: every rank stops naming the save, group 1's as group 0's failure (exit {rc}: {err[-600:]})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
