#!/usr/bin/env python3
"""Nothing inconsistent runs silently (issue 34), through the real binary and real ranks:

  * ranks launched with different configs (mpirun's `-np 1 A : -np 1 B` form: another seed,
    another model.n_layer) end at once with exit 2, every rank naming the first key that differs,
    its values and the ranks on each side; the time to the error is measured and printed;
  * a rank made to skip a unit (a data-dependent branch) stops at its first departure from the
    schedule every rank follows, naming the unit, the step and itself, and the job ends in seconds;
  * ranks whose data differ under the same config (each in its own working directory, the same
    relative data.dataset) end the same way, naming the data file, and so do ranks whose
    multiple-choice files (data.choice_file) differ;
  * ranks that do not reach one checkpoint folder (a relative run directory, other working
    directories) are refused before the first step, naming the first such rank;
  * a second run on the checkpoint folder of a live run is refused with exit 2 naming the holder
    before it writes anything, and the first run ends normally with its own checkpoints; a run
    killed with -9 leaves its lock, which the next run on the folder takes over; a lock of another
    host is refused while its heartbeat is fresh and taken over once it is older than 60 s;
  * a checkpoint records its data's identity (ckpt inspect lists it); a resume on other training data is refused naming
    the file, and with --allow-config-change it continues and says what changed; another
    validation file resumes without the flag, noted and logged.

usage: run_consistency_test.py MPIRUN [FLAGS...] -- PATH/TO/zerotrain
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402
from choice_file_util import write_choice_file  # noqa: E402
from run_dir_util import deep_merge, mpi_driver, records_so_far, train_records, wait_until  # noqa: E402

# The long runs' lock heartbeat (ZT_TEST_HEARTBEAT_S; 5 s otherwise): the takeover cases wait for
# its beats.
HEARTBEAT_S = 1

CONFIG = {
    "model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 64},
    "data": {"embedded_chars": 100000},
    "train": {"micro_batch": 4, "max_steps": 6, "eval_batches": 1, "eval_every": 0, "num_threads": 1},
    "optim": {"decay_steps": 1000},  # a longer run through max_steps is then the same trajectory
    "log": {"sample_tokens": 0, "progress": "plain"},
}


def main():
    checks = Checks()
    launcher, binary, work, _, env = mpi_driver(checks, "zt_consistency_")
    check = checks.check

    def write_config(name, over=None):
        path = os.path.join(work, name)
        with open(path, "w") as f:
            json.dump(deep_merge(CONFIG, over or {}), f)
        return path

    base = write_config("config.json")

    def errors(text):
        return [line for line in text.splitlines() if line.startswith("zerotrain: error:")]

    # Ranks with different configs, or other flags choosing where the run starts (a rank resuming
    # from another checkpoint trained on mixed state; one resuming alone waited out the timeout).
    resumable = os.path.join(work, "resumable")
    subprocess.run(launcher + ["-np", "2", binary, "train", "--config", base, "--run-dir", resumable, "--set",
                               "checkpoint.every_steps=1", "--set", "checkpoint.keep_last=0"],
                   capture_output=True, text=True, timeout=120, env=env, check=True)
    step1, step2 = (os.path.join(resumable, "checkpoints", f"step_0000000{i}") for i in (1, 2))
    for name, args_a, args_b, key in [
            ("another seed", ["--set", "train.seed=1"], ["--set", "train.seed=2"], "train.seed"),
            ("another model.n_layer", ["--set", "model.n_layer=3"], [], "model.n_layer"),
            ("another --resume", ["--resume", step1], ["--resume", step2], "--resume"),
            ("--resume on one rank only", ["--resume", step1], [], "--resume")]:
        run_dir = os.path.join(work, "mixed") if key != "--resume" else resumable
        parts = []
        for args in (args_a, args_b):
            parts += [":"] if parts else []
            parts += ["-np", "1", binary, "train", "--config", base, "--run-dir", run_dir] + args
        t0 = time.time()
        p = subprocess.run(launcher + parts, capture_output=True, text=True, timeout=120, env=env)
        seconds = time.time() - t0
        lines = errors(p.stdout + p.stderr)
        # One line for the job (rank 0's), not one a rank.
        check(p.returncode == 2 and len(lines) == 1 and all(f"ranks disagree on {key}:" in l and "rank 0" in l and
                                                            "rank 1" in l for l in lines),
              f"ranks launched with {name}: the job ends in one line naming {key} and the ranks ({lines})")
        check(seconds < 30, f"ranks launched with {name}: the error came {seconds:.1f} s after the launch")
        if key != "--resume":
            check(not os.path.exists(os.path.join(run_dir, "metrics.jsonl")), f"ranks launched with {name}: nothing trained")
        else:
            check(os.path.isdir(step2) and not os.path.isdir(os.path.join(resumable, "checkpoints", "superseded")),
                  f"ranks launched with {name}: the checkpoints left as they were")

    # Values that differ past the shown length are shown from a little before their difference (cut
    # at 80 characters from the start, two values differing later read the same).
    parts = []
    for tail in ("tail A", "tail B"):
        parts += [":"] if parts else []
        parts += ["-np", "1", binary, "train", "--config", base, "--run-dir", os.path.join(work, "long_values"),
                  "--set", f'log.sample_prompt="{"x" * 100}{tail}"']
    p = subprocess.run(launcher + parts, capture_output=True, text=True, timeout=120, env=env)
    lines = errors(p.stdout + p.stderr)
    check(p.returncode == 2 and len(lines) == 1 and "ranks disagree on log.sample_prompt:" in lines[0] and
          'xtail A" on rank 0' in lines[0] and 'xtail B" on rank 1' in lines[0],
          f"values differing past 80 characters: the difference shown ({lines})")

    # Ranks on other BLAS kernels (OPENBLAS_CORETYPE here, a CPU type on a mixed cluster): refused in
    # deterministic mode, whose bits follow them (a trial's mixed job computed other bits than one
    # rank did, under the banner's promise); outside it, trained. Cores any x86-64 CPU runs.
    cores = {}
    for core in ("Prescott", "Nehalem"):
        v = subprocess.run([binary, "version"], capture_output=True, text=True, timeout=60,
                           env=dict(env, OPENBLAS_CORETYPE=core))
        cores[core] = v.stdout if "not taken" not in v.stdout else None
    kernel_cases = ((True, True), (False, False))
    if None in cores.values() or cores["Prescott"] == cores["Nehalem"]:
        print("skipped: this OpenBLAS does not run both Prescott and Nehalem kernels (not DYNAMIC_ARCH x86-64)")
        kernel_cases = ()
    for deterministic, refused in kernel_cases:
        run_dir = os.path.join(work, f"mixed_kernels_{deterministic}")
        parts = []
        for core in ("Prescott", "Nehalem"):
            parts += ([":"] if parts else []) + ["-np", "1", "env", f"OPENBLAS_CORETYPE={core}", binary, "train",
                                                 "--config", base, "--run-dir", run_dir, "--set",
                                                 f"train.deterministic={str(deterministic).lower()}"]
        p = subprocess.run(launcher + parts, capture_output=True, text=True, timeout=120, env=env)
        lines = errors(p.stdout + p.stderr)
        if refused:
            check(p.returncode == 2 and len(lines) == 1 and "ranks disagree on the BLAS kernels" in lines[0] and
                  "Prescott" in lines[0] and "Nehalem" in lines[0],
                  f"deterministic ranks on two BLAS kernels: refused naming both ({lines})")
        else:
            check(p.returncode == 0, f"ranks on two BLAS kernels outside deterministic mode train ({lines})")

    # A rank departing from the unit schedule (ZT_TEST_SKIP_BLOCK: rank 1 skips block 1's forward,
    # as a data-dependent branch would): it stops at its first departure naming the unit, the step
    # and itself, and the job ends within seconds instead of at collective_timeout_s (300 s).
    for stage in (3, 0):
        t0 = time.time()
        p = subprocess.run(launcher + ["-np", "2", "-x", "ZT_TEST_SKIP_BLOCK", binary, "train", "--config", base,
                                       "--run-dir", os.path.join(work, "skip"), "--set", f"zero.stage={stage}"],
                           capture_output=True, text=True, timeout=240, env={**env, "ZT_TEST_SKIP_BLOCK": "1:1"})
        seconds = time.time() - t0
        lines = [l for l in errors(p.stdout + p.stderr) if "departed from the unit schedule" in l]
        check(p.returncode != 0 and len(lines) == 1 and "rank 1" in lines[0] and "at step 1" in lines[0] and
              "acquire_params(unit 3)" in lines[0] and "says acquire_params(unit 2)" in lines[0],
              f"stage {stage}: a rank skipping a unit is named with the unit and the step ({lines})")
        check(seconds < 30, f"stage {stage}: the job ended {seconds:.1f} s after the launch")

    # A periodic sample whose logits overflow on one rank alone (their last bits may differ between
    # ranks; ZT_TEST_NONFINITE_SAMPLE_ON_RANK stands for it): the ranks agree, every one logs no
    # sample and trains on (one that went back to training alone met the others' next sampling
    # collectives: at stage 3 their gathers). The job finishes with its summary and final weights.
    agreed = os.path.join(work, "nan_sample")
    p = subprocess.run(launcher + ["-np", "2", "-x", "ZT_TEST_NONFINITE_SAMPLE_ON_RANK", binary, "train", "--config",
                                   base, "--run-dir", agreed, "--set", "zero.stage=3", "--set", "log.sample_every=2",
                                   "--set", "log.sample_tokens=20"],
                       capture_output=True, text=True, timeout=120,
                       env={**env, "ZT_TEST_NONFINITE_SAMPLE_ON_RANK": "1"})
    recs = train_records(agreed) if os.path.exists(os.path.join(agreed, "metrics.jsonl")) else []
    samples = [r for r in recs if r["type"] == "sample"]
    check(p.returncode == 0 and len(samples) == 3 and all(r["text"] is None and "on another rank" in r["nonfinite"]
                                                          for r in samples) and recs[-1]["type"] == "summary"
          and os.path.exists(os.path.join(agreed, "final.safetensors")),
          f"a sample that overflows on one rank alone: the ranks agree and train on ({p.returncode}, {samples}, "
          f"{errors(p.stdout + p.stderr)})")

    # The same config and relative data path, other data on one rank.
    for d, text in (("a", "to be or not to be " * 4000), ("b", "that is the question " * 4000)):
        wd = os.path.join(work, "wd_" + d)
        os.makedirs(wd)
        with open(os.path.join(wd, "corpus.txt"), "w") as f:
            f.write(text)
        subprocess.run([binary, "prepare", "--text", "corpus.txt", "--out", "data"], cwd=wd, check=True,
                       capture_output=True)
    rel = write_config("relative.json", {"data": {"dataset": "data"}, "model": {"vocab_size": 64}})
    parts = []
    for d in ("a", "b"):
        parts += ([":"] if parts else []) + ["-np", "1", "--wdir", os.path.join(work, "wd_" + d), binary, "train",
                                             "--config", rel, "--run-dir", "run"]
    p = subprocess.run(launcher + parts, capture_output=True, text=True, timeout=120, env=env)
    lines = errors(p.stdout + p.stderr)
    check(p.returncode != 0 and lines and all("ranks disagree on data.file[0]:" in l and "train.bin" in l
                                              for l in lines),
          f"other data under the same path on rank 1: named ({lines[:1]})")
    # ... and another multiple-choice file under the same data.choice_file (same data otherwise).
    for d, label in (("a", 0), ("b", 1)):
        write_choice_file(os.path.join(work, "wd_" + d, "choices.bin"), [(label, [3], [[4], [5]])])
    parts = []
    for d in ("a", "b"):
        parts += ([":"] if parts else []) + ["-np", "1", "--wdir", os.path.join(work, "wd_" + d), binary, "train",
                                             "--config", rel, "--run-dir", "run_c", "--set",
                                             f"data.dataset={os.path.join(work, 'wd_a', 'data')}", "--set",
                                             "data.choice_file=choices.bin"]
    p = subprocess.run(launcher + parts, capture_output=True, text=True, timeout=120, env=env)
    lines = errors(p.stdout + p.stderr)
    check(p.returncode != 0 and lines and all("ranks disagree on data.choice_file's contents:" in l for l in lines),
          f"another multiple-choice file under the same path on rank 1: named ({lines[:1]})")

    # The same data, a relative run directory from other working directories: each rank would save
    # into its own folder. Refused before the first step, every rank naming rank 1.
    parts = []
    for d in ("a", "b"):
        parts += ([":"] if parts else []) + ["-np", "1", "--wdir", os.path.join(work, "wd_" + d), binary, "train",
                                             "--config", base, "--run-dir", "run_rel", "--set",
                                             "checkpoint.every_steps=2"]
    p = subprocess.run(launcher + parts, capture_output=True, text=True, timeout=120, env=env)
    lines = errors(p.stdout + p.stderr)
    check(p.returncode != 0 and len(lines) == 1 and
          all("rank 1: checkpoint folder run_rel/checkpoints" in l and "is not the one rank 0 locked" in l
              for l in lines) and not os.path.exists(os.path.join(work, "wd_a", "run_rel", "metrics.jsonl")),
          f"a relative run directory from two working directories: refused before a step ({lines[:1]})")

    # Two runs on one checkpoint folder.
    long_cfg = write_config("long.json", {"train": {"max_steps": 400}, "checkpoint": {"every_steps": 100}})
    owner_dir = os.path.join(work, "owner")
    owner = subprocess.Popen([binary, "train", "--config", long_cfg, "--run-dir", owner_dir], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    lock = os.path.join(owner_dir, "checkpoints", "LOCK")
    check(wait_until(lambda: os.path.exists(lock)), "the first run holds its checkpoint folder's LOCK")
    wait_until(lambda: os.path.exists(os.path.join(owner_dir, "metrics.jsonl")))
    p = subprocess.run([binary, "train", "--config", long_cfg, "--run-dir", owner_dir], capture_output=True, text=True,
                       timeout=120)
    lines = errors(p.stdout + p.stderr)
    check(p.returncode == 2 and len(lines) == 1 and "is in use by another run" in lines[0] and
          f"pid {owner.pid}" in lines[0], f"a second run on the folder is refused naming the holder ({lines})")
    # The run directory is held too: with another checkpoint folder, or none, a second run there
    # would interleave its metrics.jsonl, config.json and final weights with the first's.
    for what, sets in (("another checkpoint.dir", [f"checkpoint.dir={os.path.join(work, 'elsewhere')}"]),
                       ("no checkpoints", ["checkpoint.every_steps=0", "checkpoint.at_end=false",
                                           "checkpoint.save_on_signal=false"])):
        p = subprocess.run([binary, "train", "--config", long_cfg, "--run-dir", owner_dir,
                            *[a for kv in sets for a in ("--set", kv)]], capture_output=True, text=True, timeout=120)
        lines = errors(p.stdout + p.stderr)
        check(p.returncode == 2 and len(lines) == 1 and f"run directory {owner_dir} is in use by another run" in lines[0]
              and f"pid {owner.pid}" in lines[0], f"a second run in the run directory, {what}: refused ({lines})")
    out, err = owner.communicate(timeout=600)
    saves = [r["step"] for r in train_records(owner_dir) if r["type"] == "checkpoint"]
    with open(os.path.join(owner_dir, "checkpoints", "latest")) as f:
        latest = f.read().strip()
    check(owner.returncode == 0 and saves == [100, 200, 300, 400] and latest == "step_00000400" and
          not os.path.exists(lock), f"the first run ends as if alone: saves {saves}, latest {latest}, lock released")
    check(not os.path.exists(os.path.join(owner_dir, "RUN_LOCK")), "the run directory's lock is released too")

    killed = subprocess.Popen([binary, "train", "--config", long_cfg, "--run-dir", owner_dir, "--resume", "latest",
                               "--set", "train.max_steps=100000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_until(lambda: os.path.exists(lock))
    killed.kill()
    killed.wait()
    check(os.path.exists(lock), "a run killed with -9 leaves its lock")
    p = subprocess.run([binary, "train", "--config", long_cfg, "--run-dir", owner_dir, "--resume", "latest",
                        "--set", "train.max_steps=401"], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0 and "took over the checkpoint folder's lock" in p.stdout and f"pid {killed.pid}" in p.stdout,
          f"the next run takes the dead run's lock over ({(p.stdout + p.stderr)[-300:]})")

    other = {"host": socket.gethostname() + "-elsewhere", "pid": 4242, "run_dir": "x", "started": "then",
             "token": "elsewhere:4242:1"}
    remote_dir = os.path.join(work, "remote")
    os.makedirs(os.path.join(remote_dir, "checkpoints"))
    remote_lock = os.path.join(remote_dir, "checkpoints", "LOCK")
    with open(remote_lock, "w") as f:
        json.dump(other, f)
    p = subprocess.run([binary, "train", "--config", base, "--run-dir", remote_dir], capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 2 and "-elsewhere" in p.stderr, "a lock of another host with a fresh heartbeat is refused")
    old = time.time() - 120
    os.utime(remote_lock, (old, old))
    p = subprocess.run([binary, "train", "--config", base, "--run-dir", remote_dir], capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 0 and "took over" in p.stdout, "a lock of another host silent for 2 minutes is taken over")
    # On this host the pid decides, not the heartbeat: a stopped holder (SIGSTOP, a scheduler's
    # suspend) continues later and would write beside a taker; a pid started after the lock was
    # taken is another process under a reused pid.
    sleeper = subprocess.Popen(["sleep", "600"])
    os.kill(sleeper.pid, signal.SIGSTOP)
    with open(f"/proc/{sleeper.pid}/stat") as f:
        start_ticks = f.read().rsplit(")", 1)[1].split()[19]
    with open("/proc/sys/kernel/random/boot_id") as f:
        identity = {"boot_id": f.read().strip(), "pid_namespace": os.readlink("/proc/self/ns/pid")}
    for what, ticks, taken in (("stopped", start_ticks, False), ("reused pid", str(int(start_ticks) - 1), True)):
        held_dir = os.path.join(work, "held_" + what.replace(" ", "_"))
        os.makedirs(os.path.join(held_dir, "checkpoints"))
        held_lock = os.path.join(held_dir, "checkpoints", "LOCK")
        with open(held_lock, "w") as f:
            json.dump({"host": socket.gethostname(), "pid": sleeper.pid, "run_dir": "x", "started": "then",
                       "start_ticks": ticks, **identity, "token": "here"}, f)
        os.utime(held_lock, (time.time() - 120, time.time() - 120))
        p = subprocess.run([binary, "train", "--config", base, "--run-dir", held_dir], capture_output=True, text=True,
                           timeout=120)
        lines = errors(p.stderr)
        if taken:
            check(p.returncode == 0 and "took over" in p.stdout, f"a lock whose pid now runs a later process is "
                  f"taken over ({lines})")
        else:
            check(p.returncode == 2 and len(lines) == 1 and "is stopped" in lines[0] and
                  f"kill -CONT {sleeper.pid}" in lines[0],
                  f"a lock held by a stopped process on this host is refused, saying so ({lines})")
    sleeper.kill()
    sleeper.wait()
    def long_run(run_dir, env_extra=None):
        return subprocess.Popen([binary, "train", "--config", long_cfg, "--run-dir", run_dir, "--set",
                                 "train.max_steps=100000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=dict(os.environ, ZT_TEST_HEARTBEAT_S=str(HEARTBEAT_S), **(env_extra or {})))

    def forge(lock_path):
        """Another host's run takes lock_path over (replaced whole, as its link(2) would)."""
        with open(lock_path + ".forged", "w") as f:
            json.dump(other, f)
        os.replace(lock_path + ".forged", lock_path)

    def victim_end(victim, lock_path):
        """(exit code, error lines, whether the taker's lock is kept) once the victim ends."""
        try:
            _, err = victim.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            victim.kill()
            _, err = victim.communicate()
        with open(lock_path) as f:
            return victim.returncode, errors(err), json.load(f) == other

    def taken_over(run_dir, ready, env_extra=None):
        """Starts a long run in run_dir, forges another host's run into its checkpoint folder's lock
        once ready(run_dir) holds, and returns (whether it held, exit code, error lines, lock kept)."""
        victim = long_run(run_dir, env_extra)
        held = wait_until(lambda: ready(run_dir))
        lock_path = os.path.join(run_dir, "checkpoints", "LOCK")
        forge(lock_path)
        return (held, *victim_end(victim, lock_path))

    # A run whose lock another host's run took over (it was stopped past the stale time) ends at its
    # next step once its heartbeat has seen the lock taken (or at its next save, if sooner) rather
    # than write beside the taker, and leaves the taker's lock in place.
    _, code, lines, kept = taken_over(os.path.join(work, "taken"),
                                      lambda d: os.path.exists(os.path.join(d, "metrics.jsonl")))
    check(code == 1 and lines and "now belongs to pid 4242 on host" in lines[-1] and kept,
          f"a run whose checkpoint folder's lock was taken over ends, the taker's lock kept "
          f"(exit {code}, {lines[-1:]})")
    # ... and a save already under way when the lock was taken (the process stopped mid-save) is not
    # committed: the check runs again just before the rename into place.
    mid_dir = os.path.join(work, "taken_mid_save")
    in_save, code, lines, kept = taken_over(
        mid_dir, lambda d: os.path.isdir(os.path.join(d, "checkpoints", ".tmp-step_00000100")),
        {"ZT_TEST_CHECKPOINT_PAUSE_MS": "3000"})
    check(in_save and code == 1 and lines and "not committed beside its checkpoints" in lines[-1] and kept and
          not os.path.exists(os.path.join(mid_dir, "checkpoints", "step_00000100")),
          f"a save under way when the lock was taken is not committed (exit {code}, {lines[-1:]})")

    # A run stopped past the locks' staleness (SIGSTOP, a scheduler's suspend) whose run directory
    # another host's run took over meanwhile writes nothing more when continued: its next step's
    # vote ends it before any record (it saves every 100 steps, so the save's check comes too late).
    stopped_dir = os.path.join(work, "taken_while_stopped")
    victim = long_run(stopped_dir)
    stopped_metrics = os.path.join(stopped_dir, "metrics.jsonl")
    wait_until(lambda: len(records_so_far(stopped_dir)) >= 3)
    os.kill(victim.pid, signal.SIGSTOP)
    time.sleep(0.5)  # a record under way is written whole before the stop takes
    with open(stopped_metrics) as f:
        before = f.read()
    run_lock = os.path.join(stopped_dir, "RUN_LOCK")
    forge(run_lock)
    time.sleep(2 * HEARTBEAT_S + 1)  # past two of its heartbeat's beats: the continued run reads its locks at once
    os.kill(victim.pid, signal.SIGCONT)
    code, lines, kept = victim_end(victim, run_lock)
    with open(stopped_metrics) as f:
        after = f.read()
    check(code == 1 and lines and "RUN_LOCK now belongs to pid 4242 on host" in lines[-1] and
          after == before and kept,
          f"a continued run whose run directory was taken over writes no record more and ends (exit "
          f"{code}, {len(after) - len(before)} bytes more in metrics.jsonl, {lines[-1:]})")

    # A fresh run in a folder an earlier run saved into sets the earlier checkpoints aside: the
    # folder then resolves to its own (a newer step_* than latest's would otherwise be taken).
    reused = os.path.join(work, "reused")
    every2 = write_config("every2.json", {"checkpoint": {"every_steps": 2}})
    first = subprocess.run([binary, "train", "--config", every2, "--run-dir", reused], capture_output=True, text=True,
                           timeout=120)
    second = subprocess.run([binary, "train", "--config", every2, "--run-dir", reused, "--set", "train.max_steps=4"],
                            capture_output=True, text=True, timeout=120)
    folder = os.path.join(reused, "checkpoints")
    kept = sorted(d for d in os.listdir(folder) if d.startswith("step_"))
    aside = sorted(os.listdir(os.path.join(folder, "superseded"))) if os.path.isdir(
        os.path.join(folder, "superseded")) else []
    verify = subprocess.run([binary, "ckpt", "verify", folder], capture_output=True, text=True, timeout=120)
    check(first.returncode == 0 and second.returncode == 0 and "an earlier run's; this run started afresh" in second.stdout
          and kept == ["step_00000002", "step_00000004"] and aside == ["step_00000002", "step_00000004", "step_00000006"]
          and "step_00000004" in verify.stdout,
          f"a fresh run in a used folder sets the earlier run's checkpoints aside (kept {kept}, aside {aside}, "
          f"{verify.stdout.strip()})")
    # ... at its first save: a run there that never saves leaves them be.
    quick = subprocess.run([binary, "train", "--config", every2, "--run-dir", reused, "--set", "train.max_steps=1"],
                           capture_output=True, text=True, timeout=120)
    still = sorted(d for d in os.listdir(folder) if d.startswith("step_"))
    check(quick.returncode == 0 and still == kept and "an earlier run's; this run started afresh" not in quick.stdout,
          f"a fresh run that never saves leaves the folder's checkpoints in place ({still})")
    # A resume of the earlier run's last checkpoint, from superseded/ (a finished run: nothing more
    # to train or save): the later run's checkpoints, at lower steps but not its ancestors, go aside
    # too (the folder's fallback would take them for its own).
    earlier = os.path.join(folder, "superseded", "step_00000006")
    back = subprocess.run([binary, "train", "--config", every2, "--run-dir", reused, "--resume", earlier],
                          capture_output=True, text=True, timeout=120)
    now = sorted(d for d in os.listdir(folder) if d.startswith("step_"))
    aside = sorted(os.listdir(os.path.join(folder, "superseded")))
    check(back.returncode == 0 and now == [] and "not on the lineage" in back.stdout and
          "step_00000002.2" in aside and "step_00000004.2" in aside,
          f"a resume from superseded/ sets the folder's other trajectory aside (kept {now}, aside {aside}, "
          f"{(back.stdout + back.stderr)[-300:]})")

    # A rollback (a resume of an earlier checkpoint of the same run) sets the later checkpoints
    # aside before it cuts the log to its step: one that fails there (a file where superseded/ goes)
    # leaves the run as it was. It cut the log first, and a --resume latest then went on from the
    # last checkpoint, taking the cut log for another run's: the later steps' records were lost.
    rolled = os.path.join(work, "rolled")
    full = subprocess.run([binary, "train", "--config", every2, "--run-dir", rolled], capture_output=True, text=True,
                          timeout=120)
    rolled_folder = os.path.join(rolled, "checkpoints")
    with open(os.path.join(rolled, "metrics.jsonl")) as f:
        log_before = f.read()
    open(os.path.join(rolled_folder, "superseded"), "w").close()
    back = subprocess.run([binary, "train", "--config", every2, "--run-dir", rolled, "--resume",
                           os.path.join(rolled_folder, "step_00000002")], capture_output=True, text=True, timeout=120)
    with open(os.path.join(rolled, "metrics.jsonl")) as f:
        log_after = f.read()
    with open(os.path.join(rolled_folder, "latest")) as f:
        latest = f.read().strip()
    check(full.returncode == 0 and back.returncode != 0 and "superseded" in back.stderr and log_after == log_before
          and latest == "step_00000006" and os.path.exists(os.path.join(rolled, "final.safetensors")),
          f"a rollback that cannot set the later checkpoints aside leaves the log, latest and the final weights "
          f"(exit {back.returncode}, latest {latest}, log {len(log_before)} -> {len(log_after)} bytes, "
          f"{back.stderr.strip()[-200:]})")
    os.remove(os.path.join(rolled_folder, "superseded"))
    again = subprocess.run([binary, "train", "--config", every2, "--run-dir", rolled, "--resume", "latest"],
                           capture_output=True, text=True, timeout=120)
    steps = [r["step"] for r in train_records(rolled) if r["type"] == "train"]
    check(again.returncode == 0 and steps == [1, 2, 3, 4, 5, 6] and "another run's log" not in again.stdout,
          f"... and --resume latest then finds the run's whole log ({steps}; {again.stdout.strip()[-200:]})")

    # Resume on other data: other files in the same vocabulary (wd_b's text has other characters,
    # which the dataset's vocab.json could not decode, so a run refuses them beside it).
    other = os.path.join(work, "other")
    os.makedirs(other)
    with open(os.path.join(other, "corpus.txt"), "w") as f:
        f.write("be or not to be to " * 4000)
    subprocess.run([binary, "prepare", "--text", "corpus.txt", "--out", "data"], cwd=other, check=True,
                   capture_output=True)
    data_dir = os.path.join(work, "data")
    shutil.copytree(os.path.join(work, "wd_a", "data"), data_dir)
    saved_cfg = write_config("saved.json", {"data": {"dataset": data_dir}, "checkpoint": {"at_end": True}})
    run_dir = os.path.join(work, "resumed")
    p = subprocess.run([binary, "train", "--config", saved_cfg, "--run-dir", run_dir], capture_output=True, text=True,
                       timeout=120)
    step = os.path.join(run_dir, "checkpoints", "step_00000006")
    with open(os.path.join(step, "manifest.json")) as f:
        recorded = json.load(f)["extra"].get("data_identity", [])
    check(p.returncode == 0 and any(x["path"].endswith("train.bin") and x["bytes"] > 0 for x in recorded),
          f"the checkpoint records its data's identity ({recorded[:1]})")
    inspect = subprocess.run([binary, "ckpt", "inspect", step], capture_output=True, text=True, timeout=60)
    shown = [line for line in inspect.stdout.splitlines() if line.startswith("data file")]
    check(inspect.returncode == 0 and "config.data: " in inspect.stdout and len(shown) == len(recorded)
          and shown[0].startswith("data file (train): ") and shown[0].endswith(
              f"{recorded[0]['bytes']} bytes, fingerprint {recorded[0]['fingerprint']:08x}, "
              f"sampled {recorded[0].get('sampled_fingerprint', -1):08x}"),
          f"ckpt inspect shows the data section and the files a resume compares ({shown})")
    # The same files through another path (a link to the folder): the same batches, resumed.
    link = os.path.join(work, "data_link")
    os.symlink(data_dir, link)
    p = subprocess.run([binary, "train", "--config", saved_cfg, "--run-dir", run_dir, "--resume", step, "--set",
                        f"data.dataset={link}", "--set", "train.max_steps=7", "--set", "checkpoint.at_end=false"],
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"the same data through another path resumes ({(p.stdout + p.stderr)[-300:]})")
    shutil.copy(os.path.join(other, "data", "train.bin"), os.path.join(data_dir, "train.bin"))
    resume = [binary, "train", "--config", saved_cfg, "--run-dir", run_dir, "--resume", "latest", "--set",
              "train.max_steps=8"]
    p = subprocess.run(resume, capture_output=True, text=True, timeout=120)
    lines = errors(p.stderr)
    check(p.returncode == 2 and len(lines) == 1 and "train.bin" in lines[0] and "--allow-config-change" in lines[0],
          f"a resume on other data is refused naming the file ({lines})")
    # ... from the manifest, before the model's state is allocated (the header's model line follows
    # the allocation): a 1B model's refusal took 11 s and 6 GB first.
    check("\nmodel: " not in p.stdout and "resuming from" in p.stdout,
          f"... before the model's state is allocated ({p.stdout.strip()[-300:]})")
    p = subprocess.run(resume + ["--allow-config-change"], capture_output=True, text=True, timeout=120)
    changes = [r for r in train_records(run_dir) if r["type"] == "config_change"]
    check(p.returncode == 0 and changes and any("train.bin" in c for c in changes[-1]["changes"]),
          f"with --allow-config-change it continues and records what changed ({changes[-1:] })")
    # Another validation file is no change of trajectory: the resume notes it and logs it.
    shutil.copy(os.path.join(other, "data", "val.bin"), os.path.join(data_dir, "val.bin"))
    p = subprocess.run([binary, "train", "--config", saved_cfg, "--run-dir", run_dir, "--resume", "latest", "--set",
                        "train.max_steps=9"], capture_output=True, text=True, timeout=120)
    changes = [r for r in train_records(run_dir) if r["type"] == "config_change"]
    check(p.returncode == 0 and "note: resume: data file" in p.stdout and "val.bin" in p.stdout and changes
          and changes[-1]["changes"] == [] and any("val.bin" in c for c in changes[-1].get("evaluation_data", [])),
          f"another validation file resumes without the flag, noted and logged ({(p.stdout + p.stderr)[-300:]}, "
          f"{changes[-1:]})")
    batches_note = "the training batches are the saved run's"
    check(batches_note in p.stdout, "a validation file's note says the training batches are unchanged")
    vocabulary_note = "the run directory's vocabulary is now this run's"
    check(vocabulary_note not in p.stdout, "a validation file's note says nothing of the vocabulary")
    # Another vocabulary likewise, and the note says which decodes the earlier checkpoints from now on.
    with open(os.path.join(data_dir, "vocab.json"), "a") as f:
        f.write("\n")
    p = subprocess.run([binary, "train", "--config", saved_cfg, "--run-dir", run_dir, "--resume", "latest", "--set",
                        "train.max_steps=10"], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0 and "vocab.json" in p.stdout and vocabulary_note in p.stdout,
          f"another vocabulary resumes, its note says exports of earlier checkpoints take it "
          f"({(p.stdout + p.stderr)[-300:]})")
    # Training and validation files changed at once (the flag taken): the note does not say the
    # batches are the saved run's.
    for split in ("train.bin", "val.bin"):
        shutil.copy(os.path.join(work, "wd_a", "data", split), os.path.join(data_dir, split))
    p = subprocess.run([binary, "train", "--config", saved_cfg, "--run-dir", run_dir, "--resume", "latest", "--set",
                        "train.max_steps=11", "--allow-config-change"], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0 and "note: resume: data file" in p.stdout and batches_note not in p.stdout,
          f"with the training files changed too, the note does not call the batches the saved run's "
          f"({(p.stdout + p.stderr)[-400:]})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
