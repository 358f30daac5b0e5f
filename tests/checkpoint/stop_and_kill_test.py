#!/usr/bin/env python3
"""A training run stopped from outside, through the real binary and real ranks:

  * SIGTERM (as Slurm or Kubernetes send it, to every rank) and SIGINT (Ctrl-C) make `train` save a
    checkpoint at the next step boundary and exit 0, with a "stop" record in metrics.jsonl and no
    final weights; `--resume latest` then finishes the run BITWISE equal (losses, gradient norms,
    final weights) to the uninterrupted one -- alone, and on 2 ranks at stage 3 with grad_accum 2;
  * SIGUSR1 sent to mpirun (which forwards it to every rank) does the same, also during MPI's
    start-up (before the first step); a lone process acknowledges the request on stderr at once;
  * SIGTERM to one rank only: every rank agrees at the step boundary, all save and exit 0;
  * kill -9 of a rank in the middle of a trainer save (inside the test hook's pause, after the
    rank files, before the commit): `latest` still names the previous complete checkpoint, and
    `--resume latest` resumes from it and finishes bitwise equal to the uninterrupted run;
  * SIGTERM while a periodic save is written: the run stops on that checkpoint (no step more, no
    second save), and the resume finishes bitwise equal to the uninterrupted run;
  * SIGTERM during a long evaluation (its validation loss or its multiple-choice scoring) or
    sample: the run stops there on its step's checkpoint, and the resume makes the evaluation
    (bitwise as uninterrupted);
  * SIGTERM in the last step: the run finishes, its checkpoint saved before its final weights;
  * with checkpoint.save_on_signal false, SIGTERM ends the process at once, nothing saved;
  * one acknowledgement of a stop for the job, rank 0's.

The step at which a signal lands is whatever it is; the checks hold for any step.

usage: stop_and_kill_test.py --zerotrain PATH [-- MPIRUN FLAGS...]   (without mpirun: 1-process cases)
"""
import argparse
import json
import os
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402
from run_dir_util import curve, deep_merge, rank_pids, records_so_far, tensors, train_records  # noqa: E402

# ~4 ms a step alone on a fast machine (28 ms on a slow 2-core one), ~13 ms on 2 ranks with
# grad_accum 2: 200 steps leave most of a second after step 5 to signal mid-run. (With 600, these
# runs were about half of this test's 145 s on the slow machine under ctest -j2.)
LONG = {
    "model": {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 64, "vocab_size": 64},
    "data": {"embedded_chars": 50000},
    "train": {"micro_batch": 8, "max_steps": 200, "eval_batches": 2, "num_threads": 1},
    "optim": {"lr": 3e-3, "warmup_steps": 2, "decay_steps": 600},
    "log": {"sample_tokens": 8, "progress": "plain", "every_steps": 100},
}
SHORT = {
    "model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 64},
    "data": {"embedded_chars": 50000},
    "train": {"micro_batch": 6, "max_steps": 8, "eval_batches": 2, "num_threads": 1, "eval_every": 4},
    "optim": {"lr": 3e-3, "warmup_steps": 2, "decay_steps": 8},
    "checkpoint": {"every_steps": 2},
    "log": {"sample_tokens": 8, "progress": "plain", "sample_every": 4},
}


def train_steps_logged(run_dir):
    try:
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            return sum(1 for line in f if '"type":"train"' in line)
    except OSError:
        return 0


def checkpoint_logged(run_dir, step):
    """Whether metrics.jsonl (as a running job has it so far) records the save of `step`."""
    return any(r["type"] == "checkpoint" and r["step"] == step for r in records_so_far(run_dir))


def main():
    argv = sys.argv[1:]
    mpirun = []
    if "--" in argv:
        mpirun = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    parser = argparse.ArgumentParser()
    parser.add_argument("--zerotrain", required=True)
    args = parser.parse_args(argv)
    checks = Checks()
    check = checks.check
    work = checks.work_folder("zt_stop_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_"))}
    counter = [0]

    def command(np_, config, run_dir, extra=()):
        counter[0] += 1
        path = os.path.join(work, f"config{counter[0]}.json")
        with open(path, "w") as f:
            json.dump(config, f)
        launcher = mpirun + ["-np", str(np_)] if np_ > 1 else []
        return launcher + [args.zerotrain, "train", "--config", path, "--run-dir", run_dir] + list(extra)

    def run(np_, config, run_dir, extra=()):
        return subprocess.run(command(np_, config, run_dir, extra), capture_output=True, text=True, timeout=180,
                              env=env)

    def start(np_, config, run_dir, extra_env=None):
        return subprocess.Popen(command(np_, config, run_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env={**env, **(extra_env or {})})

    def wait_until(condition, seconds=60):
        deadline = time.time() + seconds
        while time.time() < deadline and not condition():
            time.sleep(0.02)
        return condition()

    def ok(p, what):
        return check(p.returncode == 0, what + ("" if p.returncode == 0 else
                                                f": exit {p.returncode}: {(p.stdout + p.stderr)[-600:]}"))

    def same_as_reference(name, run_dir, ref_dir, max_steps):
        got = curve(train_records(run_dir))
        check([s for s, *_ in got] == list(range(1, max_steps + 1)),
              f"{name}: metrics.jsonl holds each of steps 1-{max_steps} once after the resume")
        check(got == curve(train_records(ref_dir)), f"{name}: losses, grad norms and LRs bitwise equal to the uninterrupted run")
        ref_w, got_w = tensors(os.path.join(ref_dir, "final.safetensors")), tensors(os.path.join(run_dir, "final.safetensors"))
        check(ref_w.keys() == got_w.keys() and all(ref_w[k] == got_w[k] for k in ref_w),
              f"{name}: final weights bitwise equal ({len(ref_w)} tensors)")

    acknowledged = {}  # each stopped run's count of acknowledgements on stderr

    def stopped_run(name, np_, config, run_dir, send):
        """Starts a run, lets it train a few steps, calls send(proc, run_dir); checks the stop."""
        proc = start(np_, config, run_dir)
        if not wait_until(lambda: train_steps_logged(run_dir) >= 5):
            proc.kill()
            check(False, f"{name}: training started ({proc.communicate()[1][-400:]})")
            return None
        send(proc)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        if not check(proc.returncode == 0, f"{name}: exits 0" +
                     ("" if proc.returncode == 0 else f" (exit {proc.returncode}: {(out + err)[-500:]})")):
            return None
        acks = err.count("received: the run stops at the end of the current step (or of its first), with a checkpoint")
        if np_ == 1:  # at once, not after the step and the save (a user who saw nothing pressed again)
            check(acks == 1, f"{name}: the request is acknowledged on stderr ({err.strip()[-200:]})")
        else:  # by rank 0 alone, once for the job (where rank 0 was signalled)
            check(acks <= 1, f"{name}: acknowledged by one rank at most ({acks} times)")
        acknowledged[name] = acks
        stops = [r for r in train_records(run_dir) if r["type"] == "stop"]
        step = stops[0]["step"] if stops else -1
        check(len(stops) == 1 and 5 <= step < config["train"]["max_steps"],
              f"{name}: one stop record, after step {step}")
        folder = os.path.join(run_dir, "checkpoints")
        with open(os.path.join(folder, "latest")) as f:
            latest = f.read().strip()
        files = sorted(os.listdir(os.path.join(folder, latest)))
        check(latest == f"step_{step:08d}" and files == ["manifest.json"] + [f"rank_{r:05d}.bin" for r in range(np_)],
              f"{name}: latest names the checkpoint of step {step}, with {np_} rank file(s) ({latest}: {files})")
        check(f"stopped after step {step} of" in out and not os.path.exists(os.path.join(run_dir, "final.safetensors")),
              f"{name}: says where it stopped; no final weights yet")
        return out

    # Alone: SIGTERM and SIGINT; the SIGTERM run is resumed and compared.
    ref_dir = os.path.join(work, "ref1")
    if ok(run(1, LONG, ref_dir), "1 process: uninterrupted run exits 0"):
        for sig in (signal.SIGTERM, signal.SIGINT):
            name = f"1 process, {sig.name}"
            run_dir = os.path.join(work, f"alone_{sig.name}")
            out = stopped_run(name, 1, LONG, run_dir, lambda p, sig=sig: p.send_signal(sig))
            if out is not None and sig == signal.SIGTERM:
                check(f"on {sig.name}" in out, f"{name}: names the signal")
                if ok(run(1, LONG, run_dir, ["--resume", "latest"]), f"{name}: --resume latest exits 0"):
                    same_as_reference(name, run_dir, ref_dir, LONG["train"]["max_steps"])

    # checkpoint.save_on_signal = false: SIGTERM keeps its default effect (the process ends at once,
    # killed by it), no stop record and no checkpoint (the handlers stayed, saving and exiting 0).
    name = "1 process, SIGTERM with checkpoint.save_on_signal false"
    run_dir = os.path.join(work, "no_save_on_signal")
    proc = start(1, deep_merge(LONG, {"checkpoint": {"save_on_signal": False}}), run_dir)
    if check(wait_until(lambda: train_steps_logged(run_dir) >= 5), f"{name}: training started"):
        proc.send_signal(signal.SIGTERM)
    else:
        proc.kill()
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    folder = os.path.join(run_dir, "checkpoints")
    saved = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    check(proc.returncode == -signal.SIGTERM and not saved and
          not any(r["type"] == "stop" for r in train_records(run_dir)),
          f"{name}: ended by the signal, nothing saved (exit {proc.returncode}, {saved}, {(out + err)[-300:]})")

    # A stop in the run's last step (one step of seconds, the signal sent as the run directory is
    # made): the run finishes, its checkpoint saved before final.safetensors is gathered and written,
    # so that a second signal during those costs only them (the final weights came first, and a
    # second SIGTERM then left no checkpoint at all).
    name = "1 process, SIGTERM in the last step"
    last = os.path.join(work, "last_step")
    one_long_step = deep_merge(LONG, {"model": {"n_layer": 4, "n_embd": 256, "n_head": 4, "block_size": 128},
                                      "train": {"max_steps": 1, "micro_batch": 32}})
    proc = start(1, one_long_step, last)
    begun = wait_until(lambda: os.path.exists(os.path.join(last, "RUN_LOCK")))
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=180)
    manifest = os.path.join(last, "checkpoints", "step_00000001", "manifest.json")
    final = os.path.join(last, "final.safetensors")
    stops = [r["step"] for r in train_records(last) if r["type"] == "stop"]
    check(begun and proc.returncode == 0 and stops == [1] and os.path.exists(manifest) and os.path.exists(final) and
          os.stat(manifest).st_mtime_ns <= os.stat(final).st_mtime_ns,
          f"{name}: saves step 1's checkpoint before it writes final.safetensors (exit {proc.returncode}, stops "
          f"{stops}, {(out + err)[-300:]})")

    if mpirun:
        # 150 steps (decay_steps stays 600): about 2 s at ~13 ms a step, still long enough to signal.
        config = deep_merge(LONG, {"zero": {"stage": 3}, "train": {"grad_accum": 2, "max_steps": 150}})
        ref_dir = os.path.join(work, "ref2")
        if ok(run(2, config, ref_dir), "2 ranks, stage 3, grad_accum 2: uninterrupted run exits 0"):
            name = "2 ranks, stage 3, grad_accum 2, SIGTERM to every rank"
            run_dir = os.path.join(work, "both_sigterm")

            def signal_ranks(proc, ranks=(0, 1), run_dir=run_dir):
                pids = rank_pids(run_dir)
                for r in ranks:
                    os.kill(pids[r], signal.SIGTERM)
            if stopped_run(name, 2, config, run_dir, signal_ranks) is not None:
                if ok(run(2, config, run_dir, ["--resume", "latest"]), f"{name}: --resume latest exits 0"):
                    same_as_reference(name, run_dir, ref_dir, config["train"]["max_steps"])

        name = "2 ranks, SIGUSR1 to mpirun"
        stopped_run(name, 2, LONG, os.path.join(work, "usr1"), lambda p: p.send_signal(signal.SIGUSR1))
        check(acknowledged.get(name) == 1, f"{name}: every rank got it, rank 0 acknowledged it ({acknowledged.get(name)})")
        # The same in deterministic mode, whose ranks vote through an all-gather averaged into the
        # one vote (a stop every rank saw counted twice was read as a lost lock: exit 1, no checkpoint).
        name = "2 ranks, deterministic, SIGUSR1 to mpirun"
        stopped_run(name, 2, deep_merge(LONG, {"train": {"deterministic": True}}), os.path.join(work, "usr1_det"),
                    lambda p: p.send_signal(signal.SIGUSR1))
        # SIGHUP to a rank, the job's output in a file: mpirun gives each rank a pseudo-terminal,
        # which closed nothing; the rank detached from it as from a closed terminal and lost its stop lines.
        name = "2 ranks, SIGHUP to rank 0, output to a file"
        run_dir = os.path.join(work, "hup")
        out = stopped_run(name, 2, LONG, run_dir, lambda p: os.kill(rank_pids(run_dir)[0], signal.SIGHUP))
        if out is not None:
            check("on SIGHUP" in out and "--resume latest" in out, f"{name}: the stop's lines reach the output")
        name = "2 ranks, SIGTERM to rank 1 only"
        run_dir = os.path.join(work, "one_rank")
        out = stopped_run(name, 2, LONG, run_dir, lambda p: os.kill(rank_pids(run_dir)[1], signal.SIGTERM))
        if out is not None:
            check("on a signal to another rank" in out, f"{name}: rank 0 says another rank got the signal")

    # kill -9 in the middle of the step-4 save (each save pauses 1.5 s after its rank files).
    np_ = 2 if mpirun else 1
    name = f"{np_} rank(s), kill -9 during the save of step 4"
    ref_dir = os.path.join(work, "ref_short")
    run_dir = os.path.join(work, "killed")
    if ok(run(np_, SHORT, ref_dir), f"{name}: uninterrupted run exits 0"):
        proc = start(np_, SHORT, run_dir, {"ZT_TEST_CHECKPOINT_PAUSE_MS": "1500"})
        partial = os.path.join(run_dir, "checkpoints", ".tmp-step_00000004", f"rank_{np_ - 1:05d}.bin")
        in_save = wait_until(lambda: os.path.exists(partial) and os.path.getsize(partial) > 0)
        if in_save:
            time.sleep(0.1)
            os.kill(rank_pids(run_dir)[0], signal.SIGKILL)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        check(in_save and proc.returncode != 0, f"{name}: killed inside the save (exit {proc.returncode})")
        if np_ > 1:  # the surviving rank says where it was stopped (it said the step's micro-batch)
            check("at the checkpoint save of step 4" in err,
                  f"{name}: rank 1 says it was stopped in the save of step 4 ({err.strip()[-300:]})")
        folder = os.path.join(run_dir, "checkpoints")
        with open(os.path.join(folder, "latest")) as f:
            check(f.read().strip() == "step_00000002", f"{name}: latest still names step_00000002")
        check(not os.path.exists(os.path.join(folder, "step_00000004")), f"{name}: no step_00000004 appeared")
        p = run(np_, SHORT, run_dir, ["--resume", "latest"])
        if ok(p, f"{name}: --resume latest exits 0"):
            check("step_00000002" in p.stdout, f"{name}: resumed from step_00000002")
            check(not os.path.exists(os.path.dirname(partial)), f"{name}: the leftover temporary directory is gone")
            same_as_reference(name, run_dir, ref_dir, SHORT["train"]["max_steps"])

        # SIGTERM while the periodic save of step 2 is written: no evaluation or sample follows it (step
        # 4's would see the stop themselves), so the ranks' vote after the save is what stops the run
        # on that checkpoint, not after a step more and a second save.
        def stopped_in_save(name, run_dir, step):
            """SIGTERM to a 1-rank SHORT run while its periodic save of `step` is written: it stops on
            that checkpoint, the saves before it kept, no step more and no second save."""
            proc = start(1, SHORT, run_dir, {"ZT_TEST_CHECKPOINT_PAUSE_MS": "1500"})
            in_save = wait_until(lambda: os.path.isdir(os.path.join(run_dir, "checkpoints", f".tmp-step_{step:08d}")))
            if in_save:
                proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=120)
            stops = [r["step"] for r in train_records(run_dir) if r["type"] == "stop"]
            saved = sorted(d for d in os.listdir(os.path.join(run_dir, "checkpoints")) if d.startswith("step_"))
            every = SHORT["checkpoint"]["every_steps"]
            check(in_save and proc.returncode == 0 and stops == [step] and
                  saved == [f"step_{s:08d}" for s in range(every, step + 1, every)],
                  f"{name}: stops on step {step}'s checkpoint (exit {proc.returncode}, stops {stops}, saved {saved}, "
                  f"{(out + err)[-300:]})")

        stopped_in_save("1 rank, SIGTERM during the save of step 2", os.path.join(work, "term_in_save_2"), 2)
        # SIGTERM while the periodic save of step 4 is written: the run stops on that checkpoint,
        # not after a step more and a second save.
        name = "1 rank, SIGTERM during the save of step 4"
        run_dir = os.path.join(work, "term_in_save")
        stopped_in_save(name, run_dir, 4)
        p = run(1, SHORT, run_dir, ["--resume", "latest"])
        if ok(p, f"{name}: --resume latest exits 0"):
            # The reference above ran on np_ ranks; the bits match a run on the same rank count.
            ref_one = ref_dir
            if np_ != 1:
                ref_one = os.path.join(work, "ref_short_1")
                ok(run(1, SHORT, ref_one), f"{name}: uninterrupted 1-rank run exits 0")
            same_as_reference(name, run_dir, ref_one, SHORT["train"]["max_steps"])
            # Step 4's evaluation and sample come after its save: the stop left them to the resumed
            # run, which makes them before its first step, as the uninterrupted run did.
            def made(d):
                return [(r["type"], r["step"], r.get("val_loss", r.get("text")))
                        for r in train_records(d) if r["type"] in ("eval", "sample")]
            check(made(run_dir) == made(ref_one) and [m[:2] for m in made(run_dir)][:2] == [("eval", 4), ("sample", 4)],
                  f"{name}: step 4's evaluation and sample made by the resumed run, as uninterrupted "
                  f"({made(run_dir)} vs {made(ref_one)})")

    # SIGTERM during a long evaluation (2000 batches, about 2 s on a slow 2-core machine: each of the
    # three runs below makes two; 20000 took 160 s of the serial MPI tests' time, 4000 about 35 s) or
    # sample (100000 tokens): the run stops there, unlogged, on the checkpoint of its step (not after
    # a step more and a save), and the resume makes them, as the uninterrupted run did.
    slow_eval = deep_merge(SHORT, {"train": {"eval_batches": 2000}})
    slow_sample = deep_merge(SHORT, {"log": {"sample_tokens": 100000}, "train": {"eval_every": 0}})
    # ... or its multiple-choice scoring (4000 examples of 2 completions in llm.c's format, whose
    # scorer never asked for a stop: a full HellaSwag file is minutes of forwards on the CPU).
    choices = os.path.join(work, "choices.bin")
    n = 4000
    with open(choices, "wb") as f:
        f.write(struct.pack("<256i", 20240522, 1, n, 24, *([0] * 252)))
        for i in range(n):  # 65535, bytes, index, label, 2 completions, context (5, 6), endings (7) and (8)
            f.write(struct.pack("<12H", 65535, 24, i % 65536, 0, 2, 2, 5, 6, 1, 7, 1, 8))
    slow_choices = deep_merge(SHORT, {"data": {"choice_file": choices}})
    ref_dir = os.path.join(work, "ref_slow_eval")
    if ok(run(1, slow_eval, ref_dir), "1 rank, a long evaluation: uninterrupted run exits 0"):
        for what, kind, config in (("evaluation", "eval", slow_eval), ("sample", "sample", slow_sample),
                                   ("evaluation's multiple-choice scoring", "eval", slow_choices)):
            name = f"1 rank, SIGTERM during the {what} of step 4"
            run_dir = os.path.join(work, f"term_in_{what}")
            proc = start(1, config, run_dir)
            saved = wait_until(lambda: checkpoint_logged(run_dir, 4))
            if saved:
                proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=120)
            recs = [(r["type"], r["step"]) for r in train_records(run_dir) if r["type"] in ("eval", "sample", "stop")]
            check(saved and proc.returncode == 0 and recs[-1:] == [("stop", 4)] and (kind, 4) not in recs
                  and train_steps_logged(run_dir) == 4
                  # In it, as a rule; just before it (the vote after the save, or the one before its
                  # first forward) where the signal lands in those microseconds.
                  and (f"step 4: the {what} (after " in out or "wait for a resume" in out or
                       "step 4: stopping on SIGTERM" in out),
                  f"{name}: stops there on step 4's checkpoint, nothing of it logged (exit {proc.returncode}, "
                  f"{recs}, {(out + err)[-300:]})")
            resumed = config if kind == "eval" else deep_merge(slow_sample, {"log": {"sample_tokens": 8}})
            p = run(1, resumed, run_dir, ["--resume", "latest"])
            if ok(p, f"{name}: --resume latest exits 0") and kind == "sample":
                made = [r["step"] for r in train_records(run_dir) if r["type"] == "sample"]
                check(made == [4, 8], f"{name}: the resume makes step 4's sample ({made})")
            elif p.returncode == 0:
                same_as_reference(name, run_dir, ref_dir, SHORT["train"]["max_steps"])
                # (The scoring's run validates on 2 batches, the reference on 2000: its steps alone.)
                whole = config is slow_choices
                made = [(r["type"], r["step"], None if whole else r.get("val_loss"), "choice_correct" in r)
                        for r in train_records(run_dir) if r["type"] == "eval"]
                ref = [(r["type"], r["step"], None if whole else r.get("val_loss"), whole)
                       for r in train_records(ref_dir) if r["type"] == "eval"]
                check(made == ref, f"{name}: the resume makes step 4's evaluation, as uninterrupted ({made} vs {ref})")
        # Resumed into another run directory from a checkpoint of ref_dir's folder, the evaluation of
        # step 4 is pending (this run's log lacks it); stopped in it, the run saves step 4 into its
        # own folder, so the --resume latest it advises works (it saved nothing: no checkpoint).
        name = "1 rank, SIGTERM during a resumed run's pending evaluation"
        elsewhere = os.path.join(work, "resumed_elsewhere")
        proc = subprocess.Popen(command(1, slow_eval, elsewhere,
                                        ["--resume", os.path.join(ref_dir, "checkpoints", "step_00000004")]),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        resumed = wait_until(lambda: os.path.exists(os.path.join(elsewhere, "metrics.jsonl")) and
                             '"type":"resume"' in open(os.path.join(elsewhere, "metrics.jsonl")).read())
        if resumed:
            time.sleep(0.3)
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        latest = os.path.join(elsewhere, "checkpoints", "latest")
        check(resumed and proc.returncode == 0 and os.path.exists(latest) and
              open(latest).read().strip() == "step_00000004",
              f"{name}: stops on step 4, saved in its own folder (exit {proc.returncode}, {(out + err)[-300:]})")
        p = run(1, slow_eval, elsewhere, ["--resume", "latest"])
        ok(p, f"{name}: the --resume latest it advises exits 0")

        # ... and in the final evaluation, one train.eval_every does not call for (every 3 of 8
        # steps): the resumed run, at its last step already, still owes it, and makes it.
        name = "1 rank, SIGTERM during the final evaluation (eval_every 3, max_steps 8)"
        final_eval = deep_merge(slow_eval, {"train": {"eval_every": 3}})
        ref_final = os.path.join(work, "ref_final_eval")
        if ok(run(1, final_eval, ref_final), f"{name}: the uninterrupted run exits 0"):
            run_dir = os.path.join(work, "term_in_final_eval")
            proc = start(1, final_eval, run_dir)
            saved = wait_until(lambda: checkpoint_logged(run_dir, 8))
            if saved:
                proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=120)
            recs = [(r["type"], r["step"]) for r in train_records(run_dir) if r["type"] in ("eval", "stop")]
            check(saved and proc.returncode == 0 and recs[-1:] == [("stop", 8)] and ("eval", 8) not in recs,
                  f"{name}: stops on step 8's checkpoint, its evaluation not logged (exit {proc.returncode}, {recs}, "
                  f"{(out + err)[-300:]})")
            p = run(1, final_eval, run_dir, ["--resume", "latest"])
            made = [(r["step"], r["val_loss"]) for r in train_records(run_dir) if r["type"] == "eval"]
            ref = [(r["step"], r["val_loss"]) for r in train_records(ref_final) if r["type"] == "eval"]
            check(p.returncode == 0 and made == ref and made[-1:] and made[-1][0] == 8,
                  f"{name}: the resume makes the final evaluation, as uninterrupted ({made} vs {ref}; "
                  f"{p.stderr.strip()[-200:]})")

        # A stop asked during MPI's start-up (Slurm's --signal can land there): rank 1 starts 2 s
        # late, so rank 0 waits in MPI_Init when mpirun forwards SIGUSR1 (rank 1 ignores it until
        # it starts). Rank 0's request holds: both stop after step 1 on its checkpoint (the signal
        # killed rank 0 there, with only mpirun's banner).
        name = "2 ranks, SIGUSR1 during MPI's start-up"
        early = os.path.join(work, "early")
        rank0 = command(1, SHORT, early)
        rank1 = " ".join(rank0)
        proc = subprocess.Popen(mpirun + ["-np", "1"] + rank0 + [":", "-np", "1", "sh", "-c",
                                                                f"trap '' USR1; sleep 2; trap - USR1; exec {rank1}"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        # Once rank 0 has taken SIGUSR1 (its /proc status's SigCgt) while rank 1 is not zerotrain yet.
        def program(pid):
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return f.read().split(b"\0")[0]

        def rank0_catches_usr1_alone():
            pids = rank_pids(early)
            try:
                with open(f"/proc/{pids[0]}/status") as f:
                    caught = next(int(l.split()[1], 16) for l in f if l.startswith("SigCgt:"))
                return (b"zerotrain" in program(pids[0]) and b"zerotrain" not in program(pids[1]) and
                        caught & (1 << (signal.SIGUSR1 - 1)) != 0)
            except (OSError, StopIteration, KeyError):
                return False
        in_start_up = wait_until(rank0_catches_usr1_alone, seconds=10)
        proc.send_signal(signal.SIGUSR1)
        out, err = proc.communicate(timeout=120)
        latest = os.path.join(early, "checkpoints", "latest")
        check(in_start_up and proc.returncode == 0 and "stopped after step 1 of" in out and os.path.exists(latest) and
              open(latest).read().strip() == "step_00000001",
              f"{name}: both ranks stop after step 1 with its checkpoint (exit {proc.returncode}, {(out + err)[-400:]})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
