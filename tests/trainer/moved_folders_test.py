#!/usr/bin/env python3
"""A run's folders moved or removed under it, through the real binary:

  * the run directory moved away (its open metrics.jsonl with it): the run ends in one line naming
    it, found by the run-directory lock's heartbeat (no save comes: checkpoint.every_steps = 0),
    and nothing is made again under the old name -- neither the run directory nor the checkpoint
    folder inside it (the run trained on into a folder made again there, without log or config,
    and said it wrote its final weights);
  * the same found by the next save, where it comes before the heartbeat;
  * moved during a save: the save's failure says so, not the file it could not create;
  * a checkpoint folder elsewhere removed: made again, the saves go on there, said once;
  * a checkpoint folder removed during a save: that save is said lost and the run goes on
    (synchronous: saved again at once; asynchronous: the next save makes the folder again).

usage: moved_folders_test.py PATH/TO/zerotrain
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402
from run_dir_util import records_so_far, train_records, wait_until  # noqa: E402

HEARTBEAT_S = 1  # ZT_TEST_HEARTBEAT_S: the lock's heartbeat every second (5 s otherwise)
CONFIG = {
    "model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 64},
    "data": {"embedded_chars": 100000},
    "train": {"micro_batch": 4, "max_steps": 100000, "eval_batches": 1, "eval_every": 0, "num_threads": 1},
    "optim": {"decay_steps": 1000},
    "log": {"sample_tokens": 0, "progress": "plain"},
}


def last_train_step(run_dir):
    """The last step a running job has logged, or 0."""
    steps = [r["step"] for r in records_so_far(run_dir) if r["type"] == "train"]
    return steps[-1] if steps else 0


def main():
    binary = sys.argv[1]
    checks = Checks()
    work = checks.work_folder("zt_moved_")

    def start(run_dir, *sets, heartbeat_s=HEARTBEAT_S, env=None):
        config = os.path.join(work, f"config_{os.path.basename(run_dir)}.json")
        with open(config, "w") as f:
            json.dump(CONFIG, f)
        args = [binary, "train", "--config", config, "--run-dir", run_dir]
        for s in sets:
            args += ["--set", s]
        return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, ZT_TEST_HEARTBEAT_S=str(heartbeat_s), **(env or {})))

    def end(proc):
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        return out, [line for line in err.splitlines() if line.startswith("zerotrain: error:")]

    # No save at all; or a save far behind the move (step 2000, the move near step 3) and a heartbeat
    # that would beat only after it: never a move in the middle of a save, whose files would name
    # the staging folder instead.
    for how, sets, heartbeat_s in (("its lock's heartbeat", ["checkpoint.every_steps=0"], HEARTBEAT_S),
                                   ("the next save", ["checkpoint.every_steps=2000"], 60)):
        moving = os.path.join(work, f"moving_{heartbeat_s}")
        proc = start(moving, *sets, heartbeat_s=heartbeat_s)
        started = wait_until(lambda: last_train_step(moving) >= 2)
        os.rename(moving, moving + "_moved")
        _, lines = end(proc)
        checks.check(started and proc.returncode == 1 and len(lines) == 1 and
                     f"the run directory {moving} was moved or removed" in lines[0] and not os.path.exists(moving),
                     f"a run whose run directory was moved ends at {how}, naming it, nothing made again under the "
                     f"old name (exit {proc.returncode}, {lines}, old name there: {os.path.exists(moving)})")
        checks.check(len(train_records(moving + "_moved")) >= 1,
                     "its log went with the moved folder and holds the steps before")

    # Moved in the middle of a save (held between its rank file and its commit by the test hook):
    # the save fails, and says why in the run's one line, not as the file it could not create.
    moving = os.path.join(work, "moving_in_save")
    proc = start(moving, "checkpoint.every_steps=2", heartbeat_s=60, env={"ZT_TEST_CHECKPOINT_PAUSE_MS": "3000"})
    staging = os.path.join(moving, "checkpoints", ".tmp-step_00000002")
    in_save = wait_until(lambda: os.path.isdir(staging) and os.listdir(staging) != [])
    os.rename(moving, moving + "_moved")
    _, lines = end(proc)
    checks.check(in_save and proc.returncode == 1 and len(lines) == 1 and "checkpoint at step 2 not saved" in lines[0]
                 and f"the run directory {moving} was moved or removed" in lines[0] and not os.path.exists(moving),
                 f"a run directory moved during a save: the save's failure names the move (exit {proc.returncode}, "
                 f"{lines})")

    # The checkpoint folder removed in the middle of a save (a clean-up script racing the run): the
    # save is said lost and the run goes on (it ended with exit 1, the training since the start lost
    # with it: a trial). A synchronous save is made again at once into a folder made again; an
    # asynchronous one is made up by the next save, or by a save at the run's end where it was the
    # last step's (lost as the run finished it).
    for mode, sets, lost_step, then in (
            ("synchronous", [], 2, "saving it again into a new folder there"),
            ("asynchronous", ["checkpoint.async=true"], 2, "the next save (at the latest the run's end) makes"),
            ("asynchronous, the last step's", ["checkpoint.async=true"], 6, "the next save (at the latest the run's end) makes")):
        run_dir = os.path.join(work, f"lost_save_{len(os.listdir(work))}")
        proc = start(run_dir, "train.max_steps=6", "checkpoint.every_steps=2", *sets, heartbeat_s=60,
                     env={"ZT_TEST_CHECKPOINT_PAUSE_MS": "2000"})
        folder = os.path.join(run_dir, "checkpoints")
        staging = os.path.join(folder, f".tmp-step_{lost_step:08d}")
        in_save = wait_until(lambda: os.path.isdir(staging) and os.listdir(staging) != [])
        shutil.rmtree(folder, ignore_errors=True)
        out, lines = end(proc)
        records = train_records(run_dir)
        lost = [r for r in records if r["type"] == "checkpoint_lost"]
        saved = sorted(r["step"] for r in records if r["type"] == "checkpoint")
        said = f"warning: checkpoint at step {lost_step} not saved: its folder {folder} was moved or removed while"
        checks.check(in_save and proc.returncode == 0 and not lines and out.count(said) == 1 and then in out and
                     [r["step"] for r in lost] == [lost_step] and max(r["step"] for r in records if r["type"] == "train") == 6,
                     f"{mode} save: a checkpoint folder removed during it loses that save, said once, and the run "
                     f"trains on to its end (exit {proc.returncode}, {lines}, lost {lost}, saved {saved})")
        kept = sorted(d for d in os.listdir(folder) if d.startswith("step_")) if os.path.isdir(folder) else []
        # Synchronous: step 2 saved again, then 4 and 6; asynchronous: 4 and 6 (6 saved again where lost).
        want = ["step_00000002", "step_00000004", "step_00000006"] if mode == "synchronous" else \
            ["step_00000004", "step_00000006"] if lost_step == 2 else ["step_00000006"]
        latest = os.path.join(folder, "latest")
        checks.check(kept == want and os.path.exists(latest) and open(latest).read().strip() == "step_00000006",
                     f"... and the folder made again holds the saves after it ({kept}, latest "
                     f"{open(latest).read().strip() if os.path.exists(latest) else None})")

    # Lost twice in a row (a clean-up that keeps removing the folder): the run ends, exit 1, rather
    # than training on with no checkpoint kept; and while a live run writes its first save, the
    # folder is said to be that, not a save cut off.
    run_dir = os.path.join(work, "lost_twice")
    proc = start(run_dir, "train.max_steps=8", "checkpoint.every_steps=2", "checkpoint.async=true", heartbeat_s=60,
                 env={"ZT_TEST_CHECKPOINT_PAUSE_MS": "2000"})
    folder = os.path.join(run_dir, "checkpoints")
    first = wait_until(lambda: os.path.isdir(os.path.join(folder, ".tmp-step_00000002")))
    verify = subprocess.run([binary, "ckpt", "verify", folder], capture_output=True, text=True, timeout=60)
    for step in (2, 4):
        staging = os.path.join(folder, f".tmp-step_{step:08d}")
        in_save = wait_until(lambda: os.path.isdir(staging) and os.listdir(staging) != [])
        shutil.rmtree(folder, ignore_errors=True)
    out, lines = end(proc)
    checks.check(first and verify.returncode == 2 and "a live run (" in verify.stderr and
                 "trains there and is writing its first save (step 2, .tmp-step_00000002): wait for it" in verify.stderr,
                 f"ckpt verify during a live run's first save says so ({verify.stderr.strip()})")
    checks.check(in_save and proc.returncode == 1 and len(lines) == 1 and
                 "checkpoint at step 4 not saved: its folder was moved or removed during two saves in a row" in lines[0],
                 f"two asynchronous saves lost in a row end the run (exit {proc.returncode}, {lines})")

    elsewhere = os.path.join(work, "elsewhere_ckpt")
    # Slower steps (micro_batch 64): the folder goes right after step 100's save, long before step 200's.
    # After the save's commit, which step 101's record follows: step_00000100 appears before the
    # commit's folder fsync and `latest`, and a folder moved between them failed that save (seen on a
    # loaded 2-core machine).
    keeps_on = os.path.join(work, "keeps_on")
    proc = start(keeps_on, "train.max_steps=400", "checkpoint.every_steps=100", f"checkpoint.dir={elsewhere}",
                 "train.micro_batch=64")
    saved = wait_until(lambda: os.path.isdir(os.path.join(elsewhere, "step_00000100")) and
                       last_train_step(keeps_on) > 100)
    os.rename(elsewhere, elsewhere + "_gone")  # at once, where a removal races the heartbeat's files
    shutil.rmtree(elsewhere + "_gone")
    out, lines = end(proc)
    checks.check(saved and proc.returncode == 0 and
                 out.count(f"warning: the checkpoint folder {elsewhere} was moved or removed") == 1 and
                 os.path.isdir(os.path.join(elsewhere, "step_00000400")),
                 f"a removed checkpoint folder is made again, said once, and saved into (exit {proc.returncode}, "
                 f"{lines})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
