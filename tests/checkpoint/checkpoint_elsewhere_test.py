#!/usr/bin/env python3
"""A checkpoint saved outside its run directory (`checkpoint.dir`, relative to where the run started)
still finds the run's text wherever a later command runs:

  * its manifest records the run directory as an absolute path (extra.run_dir);
  * `ckpt export --format hf`, run in another directory, writes the run's vocabulary as a tokenizer
    (it wrote none: it looked above the checkpoint folder), the same files as the export of a run
    in the default layout;
  * `sample --ckpt` prints text, the same text as `sample --run` (it printed token ids);
  * with the run directory gone, both say so in one note and still export and sample (ids);
  * `ckpt inspect` names the directory they read, or says it is gone;
  * in the default layout, or with checkpoint.dir inside the run directory, a run directory moved
    with its checkpoints is still the one read, not the directory its manifest recorded, which
    another run now holds;
  * a checkpoint named with a trailing slash, through a symlinked folder, or set aside in
    superseded/ finds its run directory;
  * a checkpoint folder copied on its own (the default layout's, beside another vocabulary where
    it now lies) reads its recorded run directory, not the folder above its new place.

usage: checkpoint_elsewhere_test.py ZEROTRAIN
"""
import filecmp
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402

TEXT = "Now is the winter of our discontent made glorious summer by this sun of York.\n" * 60
CONFIG = {
    "model": {"n_layer": 1, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 64},
    "train": {"micro_batch": 4, "max_steps": 4, "eval_batches": 1, "num_threads": 1},
    "checkpoint": {"at_end": True},
    "log": {"sample_every": 0, "progress": "plain"},
}
SAMPLE = ["--tokens", "16", "--prompt", "the ", "--seed", "7"]


def main():
    zerotrain = os.path.abspath(sys.argv[1])
    checks = Checks()
    check = checks.check
    work = checks.work_folder("zt_ckpt_elsewhere_")
    started, later = os.path.join(work, "started_here"), os.path.join(work, "later_here")
    os.makedirs(started)
    os.makedirs(later)

    def run(cwd, *args):
        return subprocess.run([zerotrain, *args], cwd=cwd, capture_output=True, encoding="utf-8", errors="replace",
                              timeout=300)

    with open(os.path.join(started, "text.txt"), "w") as f:
        f.write(TEXT)
    p = run(started, "prepare", "--text", "text.txt", "--out", "data")
    if not check(p.returncode == 0, f"prepare exits 0 ({p.stderr.strip()[-200:]})"):
        return checks.finish()
    config = dict(CONFIG, data={"dataset": "data"})
    with open(os.path.join(started, "config.json"), "w") as f:
        json.dump(config, f)
    # Relative paths, as a user in the project's folder types them.
    for run_dir, sets in (("run", ["--set", "checkpoint.dir=saves"]), ("default_run", []),
                          ("inside_run", ["--set", "checkpoint.dir=inside_run/checkpoints"]),
                          ("rolled", ["--set", "checkpoint.every_steps=2", "--set", "checkpoint.keep_last=0"])):
        p = run(started, "train", "--config", "config.json", "--run-dir", run_dir, *sets)
        check(p.returncode == 0, f"train --run-dir {run_dir} {' '.join(sets)} exits 0 ({p.stderr.strip()[-300:]})")
    saves, default_saves = os.path.join(started, "saves"), os.path.join(started, "default_run", "checkpoints")
    step = sorted(d for d in os.listdir(saves) if d.startswith("step_"))[-1]
    with open(os.path.join(saves, step, "manifest.json")) as f:
        recorded = json.load(f)["extra"].get("run_dir")
    check(recorded == os.path.realpath(os.path.join(started, "run")),
          f"the manifest records the run directory, absolute ({recorded})")

    def export(folder, out):
        p = run(later, "ckpt", "export", folder, "--format", "hf", "--out", out)
        folder_files = os.listdir(os.path.join(later, out)) if p.returncode == 0 else []
        return p, sorted(f for f in folder_files if f.startswith("tokenizer"))

    p, files = export(saves, "hf")
    default_p, default_files = export(default_saves, "hf_default")
    check(p.returncode == 0 and files == ["tokenizer.json", "tokenizer_config.json"] and "note" not in p.stderr,
          f"an export from another directory writes the run's vocabulary as a tokenizer ({files}; "
          f"{p.stdout.strip()} {p.stderr.strip()[-200:]})")
    check(default_p.returncode == 0 and default_files == files and all(
        filecmp.cmp(os.path.join(later, "hf", f), os.path.join(later, "hf_default", f), shallow=False) for f in files),
          f"the same tokenizer files as the default layout's export ({default_files})")

    from_ckpt = run(later, "sample", "--ckpt", saves, *SAMPLE)
    from_run = run(later, "sample", "--run", os.path.join(started, "run"), *SAMPLE)
    check(from_run.returncode == 0 and "printing token ids" not in from_run.stderr,
          f"sample --run prints text ({from_run.stderr.strip()[-200:]})")
    check(from_ckpt.returncode == 0 and from_ckpt.stdout == from_run.stdout and "printing token ids" not in
          from_ckpt.stderr, f"sample --ckpt prints the same text as sample --run ({from_ckpt.stdout!r} vs "
          f"{from_run.stdout!r}; {from_ckpt.stderr.strip()[-200:]})")

    p = run(later, "ckpt", "inspect", saves)
    check(p.returncode == 0 and f"run directory: {recorded}\n" in p.stdout,
          f"ckpt inspect names the run directory ({p.stdout[:400]!r})")
    # However the checkpoint is named: a trailing slash, a symlinked folder, one set aside in
    # superseded/ by a resume from an earlier step.
    rolled = os.path.join(started, "rolled")
    p = run(started, "train", "--config", "config.json", "--run-dir", "rolled", "--set", "checkpoint.every_steps=2",
            "--set", "checkpoint.keep_last=0", "--resume", os.path.join(rolled, "checkpoints", "step_00000002"))
    os.symlink(os.path.join(rolled, "checkpoints"), os.path.join(later, "linked"))
    for name in (os.path.join(rolled, "checkpoints", "step_00000004") + "/", "linked",
                 os.path.join(rolled, "checkpoints", "superseded", "step_00000004")):
        q = run(later, "ckpt", "inspect", name)
        check(p.returncode == 0 and q.returncode == 0 and f"run directory: {os.path.realpath(rolled)}\n" in q.stdout,
              f"ckpt inspect {name.replace(work, 'WORK')} names the run directory "
              f"({(q.stdout + q.stderr)[q.stdout.find('run directory'):][:200]!r}; {p.stderr.strip()[-200:]})")

    # The run directory gone: said, once, and the weights still export and sample.
    os.rename(os.path.join(started, "run"), os.path.join(work, "run_moved"))
    p = run(later, "ckpt", "inspect", saves)
    check(p.returncode == 0 and f"run directory: {recorded} (no longer exists)\n" in p.stdout,
          f"ckpt inspect says it is gone ({p.stdout[:400]!r})")
    p, files = export(saves, "hf_gone")
    notes = [line for line in p.stderr.splitlines() if "no longer exists" in line]
    check(p.returncode == 0 and files == [] and len(notes) == 1 and recorded in notes[0],
          f"without the run directory the export writes no tokenizer and names the directory ({p.stderr.strip()})")
    p = run(later, "sample", "--ckpt", saves, "--tokens", "16")  # the default prompt: token 0 without a tokenizer
    notes = [line for line in p.stderr.splitlines() if "no longer exists" in line]
    check(p.returncode == 0 and len(notes) == 1 and recorded in notes[0] and "printing token ids" in p.stderr,
          f"without it sample --ckpt prints ids and names the directory ({p.stderr.strip()})")

    # The default layout moved whole: its own vocabulary, not the recorded directory's, now
    # another run's (another text, so another vocabulary).
    # So does a checkpoint.dir inside the run directory, which records the directory too.
    os.rename(os.path.join(started, "default_run"), os.path.join(work, "default_moved"))
    os.rename(os.path.join(started, "inside_run"), os.path.join(work, "inside_moved"))
    with open(os.path.join(started, "text.txt"), "w") as f:
        f.write("0123456789 +-*/\n" * 200)
    shutil.rmtree(os.path.join(started, "data"))
    p = run(started, "prepare", "--text", "text.txt", "--out", "data")
    for run_dir in ("default_run", "inside_run"):
        p = run(started, "train", "--config", "config.json", "--run-dir", run_dir) if p.returncode == 0 else p
        check(p.returncode == 0, f"another run takes {run_dir}'s old directory ({p.stderr.strip()[-200:]})")
    for moved in ("default_moved", "inside_moved"):
        p, files = export(os.path.join(work, moved, "checkpoints"), f"hf_{moved}")
        check(p.returncode == 0 and files == default_files and all(
            filecmp.cmp(os.path.join(later, f"hf_{moved}", f), os.path.join(later, "hf_default", f), shallow=False)
            for f in files), f"a run moved with its checkpoints ({moved}) exports its own tokenizer ({files})")

    # A checkpoint folder copied on its own beside another vocabulary (no metrics.jsonl there: not a
    # run directory): the recorded run directory's text, not what lies beside its new place.
    loose = os.path.join(work, "loose")
    os.makedirs(loose)
    shutil.copy(os.path.join(started, "data", "vocab.json"), os.path.join(loose, "vocab.json"))
    shutil.copytree(os.path.join(rolled, "checkpoints"), os.path.join(loose, "ck"), symlinks=True)
    p, files = export(os.path.join(loose, "ck"), "hf_loose")
    check(p.returncode == 0 and files == default_files and all(
        filecmp.cmp(os.path.join(later, "hf_loose", f), os.path.join(later, "hf_default", f), shallow=False)
        for f in files), f"a checkpoint folder copied on its own exports its run's tokenizer ({files}; "
                         f"{p.stderr.strip()[-200:]})")
    q = run(later, "ckpt", "inspect", os.path.join(loose, "ck"))
    check(q.returncode == 0 and f"run directory: {os.path.realpath(rolled)}\n" in q.stdout,
          f"... and ckpt inspect names that run directory "
          f"({(q.stdout + q.stderr)[q.stdout.find('run directory'):][:200]!r})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
