#!/usr/bin/env python3
"""Files as users have them: FIFOs, devices, symlinks, symlink loops, empty lock files, and folders
holding someone else's files. Each is refused in one line with exit 2 and nothing touched, or used
as named, never a hang (every command runs under a timeout) or a replaced file:

  * a FIFO or a device as --config, as a token file, as the run's metrics.jsonl at a resume (and a
    folder there) and at eval --run --val, as ckpt export --out's config.json, as plan --profile;
  * a symlink loop as data.dataset;
  * metrics.jsonl kept elsewhere through a symlink: a resume that drops records rewrites the
    linked file, and the link stays; ckpt export --format llmc --out a symlink writes its target;
  * ckpt export --out a name of NAME_MAX bytes (staged under a shorter name than its own + .tmp);
  * a file-size limit (ulimit -f) met by an export or a prepare: one line, exit 1, nothing left,
    an earlier dataset whole; an address-space limit (ulimit -v) OpenBLAS cannot start under: named;
  * ckpt export --format hf into a folder whose config.json is not a Hugging Face model's,
    train --run-dir a Hugging Face export, and prepare --out a folder with another tool's
    vocab.json or train.bin: refused, their files untouched; an export into a folder (or an llm.c
    file) another writer holds at that moment: refused;
  * a config file named "...json": its default run directory is runs/run, not runs/.. (the
    working directory);
  * an empty RUN_LOCK (a power loss): taken over, nothing left behind;
  * a fresh run in a run directory an earlier run logged into keeps that metrics.jsonl aside, and a
    resume whose metrics.jsonl has no record of its checkpoint's step (that fresh run's) too;
  * a token file cut in place while a run reads it (through its memory map): named, exit 2, not a
    bare SIGBUS;
  * ckpt verify and export, sample --ckpt and eval --ckpt of a folder whose live run deletes each
    checkpoint as it saves the next (keep_last 1): they read the folder's newest again, never fail
    for it.

usage: odd_files_test.py PATH/TO/zerotrain
"""
import fcntl
import json
import os
import resource
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402
from choice_file_util import write_choice_file  # noqa: E402
from run_dir_util import records_so_far  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "configs", "tiny_debug.json")
QUIET = ["--set", "train.num_threads=1", "--set", "log.sample_tokens=0"]


def main():
    binary = sys.argv[1]
    checks = Checks()
    work = checks.work_folder("zt_odd_files_")
    check = checks.check

    def run(*args, cwd=None):
        try:
            return subprocess.run([binary, *args], capture_output=True, text=True, timeout=60, cwd=cwd)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(args, 124, "", "(hung: killed after 60 s)")

    def refused(p, *fragments):
        lines = [line for line in p.stderr.splitlines() if line.strip()]
        return p.returncode == 2 and len(lines) == 1 and all(f in lines[0] for f in fragments), lines

    def train(run_dir, *extra):
        return run("train", "--config", CONFIG, "--run-dir", run_dir, *QUIET, *extra)

    fifo = os.path.join(work, "fifo")
    os.mkfifo(fifo)
    for what, args, fragments in [
        ("a FIFO nothing writes as --config", ["train", "--config", fifo], [fifo, "is a FIFO that nothing writes"]),
        ("/dev/zero as --config", ["train", "--config", "/dev/zero"], ["is a character device"]),
        ("a FIFO as a token file", ["train", "--config", CONFIG, "--run-dir", os.path.join(work, "f"), *QUIET,
                                    "--set", f"data.train_file={fifo}", "--set", f"data.val_file={fifo}"],
         ["token file", fifo, "is a FIFO"])]:
        ok, lines = refused(run(*args), *fragments)
        check(ok, f"{what}: refused in one line, no hang ({lines})")

    # A pipe with a writer is read as a file: --config <(...) or /dev/stdin, prepare --text /dev/stdin.
    with open(CONFIG) as f:
        config_text = f.read()
    piped = subprocess.run([binary, "train", "--config", "/dev/stdin", "--run-dir", os.path.join(work, "piped"), *QUIET,
                            "--set", "train.max_steps=1"], input=config_text, capture_output=True, text=True, timeout=60)
    check(piped.returncode == 0, f"--config /dev/stdin fed by a pipe trains ({piped.stderr[-300:]})")
    piped = subprocess.run([binary, "prepare", "--text", "/dev/stdin", "--out", os.path.join(work, "piped_tokens")],
                           input="to be or not to be " * 200, capture_output=True, text=True, timeout=60)
    check(piped.returncode == 0 and os.path.exists(os.path.join(work, "piped_tokens", "train.bin")),
          f"prepare --text /dev/stdin fed by a pipe prepares ({piped.stderr[-300:]})")

    loop = os.path.join(work, "loop")
    os.symlink(loop, loop)
    ok, lines = refused(train(os.path.join(work, "l"), "--set", f"data.dataset={loop}"), loop,
                        "Too many levels of symbolic links")
    check(ok, f"a symlink loop as data.dataset: refused naming it ({lines})")

    # A resume that drops the records of steps after its checkpoint (as after a kill).
    base = os.path.join(work, "base")
    p = train(base, "--set", "train.max_steps=6", "--set", "checkpoint.every_steps=3", "--set", "checkpoint.keep_last=0")
    check(p.returncode == 0, f"the base run trains ({p.stderr[-300:]})")
    # Each checkpoint names the build that wrote it, as `zerotrain version` does.
    with open(os.path.join(base, "checkpoints", "step_00000006", "manifest.json")) as f:
        written_by = json.load(f)["extra"].get("written_by")
    build = run("version").stdout.splitlines()[0].removeprefix("zerotrain ")
    check(written_by == build, f"the manifest names the build that wrote it ({written_by!r}, version {build!r})")

    def killed_after_step_6(name):
        run_dir = os.path.join(work, name)
        shutil.copytree(base, run_dir, symlinks=True)
        shutil.rmtree(os.path.join(run_dir, "checkpoints", "step_00000006"))
        with open(os.path.join(run_dir, "checkpoints", "latest"), "w") as f:
            f.write("step_00000003\n")
        return run_dir

    # A lock's name taken by no file a run writes: a FIFO (its open waited for a writer for ever) or a
    # link to /dev/zero (read until the allocation failed): refused in one line, left where it is.
    for name, make, said in (("checkpoints/LOCK", os.mkfifo, "is a FIFO"),
                             ("RUN_LOCK", lambda p: os.symlink("/dev/zero", p), "a character device")):
        locked = killed_after_step_6("odd_lock_" + name.replace("/", "_"))
        make(os.path.join(locked, name))
        ok, lines = refused(train(locked, "--set", "train.max_steps=6", "--resume", "latest"), name.split("/")[-1],
                            said)
        check(ok and os.path.lexists(os.path.join(locked, name)),
              f"{name} as {said.split()[-1]}: a resume refused in one line, no hang ({lines})")
    # A link named like a checkpoint that loops: no checkpoint (every reader of the folder failed).
    looped = killed_after_step_6("looped_step")
    os.symlink("step_00000009", os.path.join(looped, "checkpoints", "step_00000009"))
    p = run("ckpt", "verify", os.path.join(looped, "checkpoints"))
    check(p.returncode == 0 and "step_00000003" in p.stdout,
          f"a step_ link that loops is no checkpoint: the folder verifies ({p.stdout.strip()[-200:]} "
          f"{p.stderr.strip()[-200:]})")

    fifo_run = killed_after_step_6("fifo_metrics")
    os.remove(os.path.join(fifo_run, "metrics.jsonl"))
    os.mkfifo(os.path.join(fifo_run, "metrics.jsonl"))
    ok, lines = refused(train(fifo_run, "--set", "train.max_steps=6", "--resume", "latest"), "metrics file",
                        "FIFO that nothing reads", "give a regular file")
    check(ok, f"a FIFO as metrics.jsonl at a resume: refused, no hang ({lines})")
    # FIFOs where other commands read a file as a stream (each waited for a writer for ever): eval
    # --run --val's metrics.jsonl, ckpt export --out's config.json, plan --profile.
    fifo_eval = killed_after_step_6("fifo_eval")
    os.remove(os.path.join(fifo_eval, "metrics.jsonl"))
    os.mkfifo(os.path.join(fifo_eval, "metrics.jsonl"))
    fifo_out = os.path.join(work, "fifo_out")
    os.mkdir(fifo_out)
    os.mkfifo(os.path.join(fifo_out, "config.json"))
    for what, args, fragments in [
            ("eval --run --val, metrics.jsonl", ["eval", "--run", fifo_eval, "--val"], ["metrics file", "is a FIFO"]),
            ("ckpt export --out, config.json", ["ckpt", "export", os.path.join(base, "checkpoints"), "--format", "hf",
                                                "--out", fifo_out], ["config.json", "is a FIFO"]),
            ("plan --profile", ["plan", "--config", CONFIG, "--device-memory", "1GB", "--profile", fifo],
             [fifo, "is a FIFO"])]:
        ok, lines = refused(run(*args), *fragments)
        check(ok, f"a FIFO as {what}: refused in one line, no hang ({lines})")
    # A folder there: the run directory's fault, exit 2 before the first step (it was exit 1).
    folder_run = killed_after_step_6("folder_metrics")
    os.remove(os.path.join(folder_run, "metrics.jsonl"))
    os.mkdir(os.path.join(folder_run, "metrics.jsonl"))
    ok, lines = refused(train(folder_run, "--set", "train.max_steps=6", "--resume", "latest"), "metrics file",
                        "Is a directory")
    check(ok, f"a folder as metrics.jsonl at a resume: refused with exit 2 ({lines})")

    linked_run = killed_after_step_6("linked_metrics")
    elsewhere = os.path.join(work, "elsewhere.jsonl")
    shutil.move(os.path.join(linked_run, "metrics.jsonl"), elsewhere)
    os.symlink(elsewhere, os.path.join(linked_run, "metrics.jsonl"))
    p = train(linked_run, "--set", "train.max_steps=6", "--resume", "latest")
    with open(elsewhere) as f:
        steps = [r["step"] for r in map(json.loads, f) if r.get("type") == "train"]
    check(p.returncode == 0 and os.path.islink(os.path.join(linked_run, "metrics.jsonl")) and
          steps == [1, 2, 3, 4, 5, 6],
          f"metrics.jsonl through a symlink: the linked file rewritten, the link kept (train steps {steps})")

    # A fresh run keeps a linked log's records beside its target, the link kept; a log linked to
    # /dev/stdout (a pipe here) is written there.
    relinked = os.path.join(work, "relinked")
    shutil.copytree(linked_run, relinked, symlinks=True)
    p = train(relinked, "--set", "train.max_steps=2")
    kept = [n for n in os.listdir(work) if n.startswith("elsewhere.") and n != "elsewhere.jsonl"]
    with open(elsewhere) as f:
        steps = [r["step"] for r in map(json.loads, f) if r.get("type") == "train"]
    check(p.returncode == 0 and os.path.islink(os.path.join(relinked, "metrics.jsonl")) and len(kept) == 1 and
          steps == [1, 2], f"a fresh run over a linked log keeps the target's records aside, the link kept ({kept}, {steps})")
    to_stdout = os.path.join(work, "to_stdout")
    os.makedirs(to_stdout)
    os.symlink("/dev/stdout", os.path.join(to_stdout, "metrics.jsonl"))
    p = train(to_stdout, "--set", "train.max_steps=2")
    check(p.returncode == 0 and '"type":"train"' in p.stdout,
          f"metrics.jsonl linked to /dev/stdout, a pipe: the records come out there ({p.stderr[-200:]})")

    model = os.path.join(work, "model.bin")
    p1 = run("ckpt", "export", os.path.join(base, "checkpoints", "step_00000003"), "--format", "llmc", "--out", model)
    link = os.path.join(work, "model_link.bin")
    os.symlink(model, link)
    p2 = run("ckpt", "export", os.path.join(base, "checkpoints"), "--format", "llmc", "--out", link)
    check(p1.returncode == 0 and p2.returncode == 0 and os.path.islink(link) and "from step 6" in p2.stdout,
          f"ckpt export --out a symlink writes the file it names, the link kept ({p2.stdout.strip()[-200:]})")

    # A name as long as the file system allows: its staging name (".tmp" added) would not be.
    longest = os.path.join(work, "m" * (os.pathconf(work, "PC_NAME_MAX") - 4) + ".bin")
    p = run("ckpt", "export", os.path.join(base, "checkpoints"), "--format", "llmc", "--out", longest)
    check(p.returncode == 0 and os.path.getsize(longest) > 0 and not [n for n in os.listdir(work) if ".tmp" in n],
          f"ckpt export --out a name of NAME_MAX bytes writes it, nothing staged left ({(p.stdout + p.stderr)[-200:]})")

    # A file-size limit (ulimit -f): SIGXFSZ would end the process with a core and no word. The write
    # fails instead, in one line, nothing left; a prepare over an earlier dataset leaves it whole
    # (not its new vocabulary beside the old tokens, which trained and sampled garbage).
    def limited(args, max_bytes):
        return subprocess.run([binary, *args], capture_output=True, text=True, timeout=60,
                              preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes)))
    p = limited(["ckpt", "export", os.path.join(base, "checkpoints"), "--format", "llmc", "--out",
                 os.path.join(work, "capped.bin")], 20000)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    check(p.returncode == 1 and len(lines) == 1 and "File too large" in lines[0] and
          not [n for n in os.listdir(work) if n.startswith("capped")],
          f"an export past ulimit -f: one line, exit 1, nothing left ({p.returncode}, {lines})")
    # An address-space limit (ulimit -v) OpenBLAS's start-up buffers do not fit: it retries without
    # end inside its load; the watchdog (here after 2 s) ends the process naming the limit.
    started = time.time()
    p = subprocess.run([binary, "version"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "ZT_TEST_BLAS_STARTUP_S": "2"},
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (350 << 20, 350 << 20)))
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    # (Where this machine's OpenBLAS starts within the limit, version just runs: nothing to name.)
    check((p.returncode == 0 or (p.returncode == 1 and lines and "OpenBLAS's start-up has not returned after 2 s" in
                                 lines[-1] and "ulimit -v" in lines[-1])) and time.time() - started < 30,
          f"OpenBLAS's start-up under a low ulimit -v ends with one line naming the limit ({p.returncode}, {lines})")
    text = os.path.join(work, "corpus.txt")
    with open(text, "w") as f:
        f.write("to be or not to be, that is the question\n" * 2000)
    dataset = os.path.join(work, "dataset")
    first = run("prepare", "--text", text, "--out", dataset)
    before = {n: open(os.path.join(dataset, n), "rb").read() for n in ("vocab.json", "train.bin", "val.bin")}
    p = limited(["prepare", "--text", text, "--out", dataset, "--level", "byte"], 30000)
    after = {n: open(os.path.join(dataset, n), "rb").read() for n in ("vocab.json", "train.bin", "val.bin")}
    check(first.returncode == 0 and p.returncode == 1 and "File too large" in p.stderr and after == before and
          sorted(os.listdir(dataset)) == ["train.bin", "val.bin", "vocab.json"],
          f"a prepare failing part way over an earlier dataset leaves it whole ({p.returncode}, {p.stderr.strip()})")
    # Its vocab.json a link that leads nowhere: refused naming it (taken for no vocabulary, the run's
    # samples printed token ids).
    dangling = os.path.join(work, "dangling_vocab")
    shutil.copytree(dataset, dangling)
    os.remove(os.path.join(dangling, "vocab.json"))
    os.symlink(os.path.join(work, "no_such_vocab.json"), os.path.join(dangling, "vocab.json"))
    ok, lines = refused(train(os.path.join(work, "dangling_run"), "--set", f"data.dataset={dangling}", "--set",
                              "model.vocab_size=64", "--set", "train.max_steps=1"),
                        os.path.join(dangling, "vocab.json"))
    check(ok, f"a dataset's vocab.json linked to nothing: refused naming it ({lines})")

    # Two writers of one output at once: an export into a folder another holds (a concurrent export
    # or prepare, here this test's flock on it), or an llm.c file whose staging file another holds,
    # is refused, the output untouched; once released, the export writes it.
    held = os.path.join(work, "held")
    os.makedirs(held)
    fd = os.open(held, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    ok, lines = refused(run("ckpt", "export", os.path.join(base, "checkpoints"), "--format", "hf", "--out", held),
                        held, "another zerotrain command is writing into it, or a run training from it, now")
    # The holder named, by pid and command line (here this test's own process), from /proc/locks.
    named = f"it is held by pid {os.getpid()} ("
    check(ok and os.listdir(held) == [] and named in lines[0],
          f"an HF export into a folder another writer holds: refused, naming the holder ({lines})")
    os.close(fd)
    p = run("ckpt", "export", os.path.join(base, "checkpoints"), "--format", "hf", "--out", held)
    check(p.returncode == 0 and "config.json" in os.listdir(held), f"released, it exports ({p.stderr.strip()[-200:]})")
    llmc_out = os.path.join(work, "held.bin")
    with open(llmc_out + ".tmp", "w") as staging:
        fcntl.flock(staging, fcntl.LOCK_EX)
        ok, lines = refused(run("ckpt", "export", os.path.join(base, "checkpoints"), "--format", "llmc", "--out",
                                llmc_out), "its staging file", f"is held by pid {os.getpid()} (")
        check(ok and not os.path.exists(llmc_out) and os.path.exists(llmc_out + ".tmp"),
              f"an llm.c export whose staging file another writer holds: refused, that file left to it ({lines})")

    project = os.path.join(work, "project")
    os.makedirs(project)
    mine = {"name": "my project", "keep": True}
    with open(os.path.join(project, "config.json"), "w") as f:
        json.dump(mine, f)
    shard = os.path.join(project, "model-00001-of-00002.safetensors")
    with open(shard, "wb") as f:
        f.write(b"another model's shard")
    ok, lines = refused(run("ckpt", "export", os.path.join(base, "checkpoints"), "--format", "hf", "--out", project),
                        project, "config.json that is not a Hugging Face model's")
    with open(os.path.join(project, "config.json")) as f:
        kept = json.load(f) == mine
    check(ok and kept and os.path.exists(shard),
          f"an HF export into a folder with someone else's config.json: refused, nothing touched ({lines})")

    # prepare --out a folder holding someone else's vocab.json (a Hugging Face model's), or nanoGPT's
    # raw train.bin beside its meta.pkl, or beside a zerotrain vocab.json (the token file is still no
    # prepare's): refused, their files untouched; over an earlier prepare's dataset it prepares.
    with open(os.path.join(base, "vocab.json"), "rb") as f:
        zerotrain_vocab = f.read()
    for what, files in [("a Hugging Face model's vocab.json", {"vocab.json": b'{"<|endoftext|>": 0, "!": 1}',
                                                               "merges.txt": b"#version: 0.2\n"}),
                        ("nanoGPT's raw train.bin", {"train.bin": bytes(range(64)), "val.bin": bytes(range(32)),
                                                     "meta.pkl": b"pickle"}),
                        ("a raw train.bin beside a zerotrain vocab.json", {"train.bin": bytes(range(64)),
                                                                           "vocab.json": zerotrain_vocab})]:
        folder = os.path.join(work, "theirs_" + what.split("'")[0].replace(" ", "_"))
        os.makedirs(folder)
        for name, data in files.items():
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
        ok, lines = refused(run("prepare", "--text", text, "--out", folder), folder, "no prepare wrote"
                            if "train" in what else "not a zerotrain vocabulary", "new or empty folder")
        kept = all(open(os.path.join(folder, n), "rb").read() == d for n, d in files.items())
        check(ok and kept and sorted(os.listdir(folder)) == sorted(files),
              f"prepare --out a folder with {what}: refused, nothing touched ({lines})")
    # A training run's directory holds a vocab.json of its own: prepare --out it is refused (its
    # samples and exports would decode through the new one), and train --run-dir a prepared dataset
    # is refused (the run would write its vocab.json over the dataset's).
    run_vocab = open(os.path.join(base, "vocab.json"), "rb").read()
    ok, lines = refused(run("prepare", "--text", text, "--out", base), base, "is a training run's directory")
    check(ok and open(os.path.join(base, "vocab.json"), "rb").read() == run_vocab and
          not os.path.exists(os.path.join(base, "train.bin")),
          f"prepare --out a run's directory: refused, its vocab.json kept ({lines})")
    dataset_files = {n: open(os.path.join(dataset, n), "rb").read() for n in ("vocab.json", "train.bin", "val.bin")}
    ok, lines = refused(train(dataset, "--set", "train.max_steps=1"), dataset, "a dataset's token file")
    check(ok and sorted(os.listdir(dataset)) == sorted(dataset_files) and
          all(open(os.path.join(dataset, n), "rb").read() == d for n, d in dataset_files.items()),
          f"train --run-dir a prepared dataset: refused before writing, its files kept ({lines})")
    # A tokenized corpus's folder (prepare_tokens.py's shards beside their tokenizer.json), told by
    # the shards' llm.c headers: the run's tokenizer.json would replace the one they were encoded with.
    corpus = os.path.join(work, "corpus")
    os.makedirs(corpus)
    corpus_files = {"c_val_000000.bin": dataset_files["val.bin"], "c_train_000001.bin": dataset_files["train.bin"],
                    "tokenizer.json": b'{"model": {"type": "BPE"}}'}
    for name, data in corpus_files.items():
        with open(os.path.join(corpus, name), "wb") as f:
            f.write(data)
    ok, lines = refused(train(corpus, "--set", "train.max_steps=1"), corpus, "c_train_000001.bin", "a token shard")
    check(ok and sorted(os.listdir(corpus)) == sorted(corpus_files) and
          all(open(os.path.join(corpus, n), "rb").read() == d for n, d in corpus_files.items()),
          f"train --run-dir a tokenized corpus's folder: refused before writing, its files kept ({lines})")
    # checkpoint.dir in either folder likewise (its step_ folders, LOCK and latest landed among the
    # data's files, where a glob over the folder then met them).
    for data_folder, files, kind in ((dataset, dataset_files, "a dataset's token file"),
                                     (corpus, corpus_files, "a token shard")):
        ok, lines = refused(train(os.path.join(work, "ckpt_in_data"), "--set", "train.max_steps=1", "--set",
                                  f"checkpoint.dir={data_folder}", "--set", "checkpoint.at_end=true"),
                            "checkpoint.dir", kind)
        check(ok and sorted(os.listdir(data_folder)) == sorted(files),
              f"checkpoint.dir in {kind}'s folder: refused before writing, its files kept ({lines})")
    ok, lines = refused(run("ckpt", "export", os.path.join(base, "checkpoints"), "--format", "hf", "--out", corpus),
                        corpus, "a token shard (c_", "tokenizer.json the export would replace")
    check(ok and sorted(os.listdir(corpus)) == sorted(corpus_files) and
          all(open(os.path.join(corpus, n), "rb").read() == d for n, d in corpus_files.items()),
          f"an HF export into a tokenized corpus's folder: refused naming a token shard, not a model ({lines})")
    fifo_folder = os.path.join(work, "fifo_bin")
    os.makedirs(fifo_folder)
    os.mkfifo(os.path.join(fifo_folder, "pipe.bin"))  # its header is never read: an open would wait
    ok, lines = refused(run("ckpt", "export", os.path.join(base, "checkpoints"), "--format", "hf", "--out",
                            fifo_folder), fifo_folder, "pipe.bin")
    check(ok, f"an HF export into a folder with a FIFO named *.bin: refused, no hang ({lines})")
    again = run("prepare", "--text", text, "--out", dataset, "--level", "byte")
    check(again.returncode == 0 and json.load(open(os.path.join(dataset, "vocab.json")))["kind"] == "byte",
          f"prepare over an earlier prepare's dataset replaces it ({again.stderr.strip()[-200:]})")

    hf = os.path.join(work, "hf")
    p = run("ckpt", "export", os.path.join(base, "checkpoints"), "--format", "hf", "--out", hf)
    ok, lines = refused(train(hf, "--set", "train.max_steps=1"), hf, "not a zerotrain run's",
                        "Hugging Face model's, model_type")
    with open(os.path.join(hf, "config.json")) as f:
        still_hf = "model_type" in json.load(f)
    check(p.returncode == 0 and ok and still_hf and not os.path.exists(os.path.join(hf, "metrics.jsonl")),
          f"train --run-dir an HF export: refused before writing, its config.json kept ({lines})")

    dots = os.path.join(work, "dots")
    os.makedirs(dots)
    shutil.copy(CONFIG, os.path.join(dots, "...json"))
    with open(os.path.join(dots, "config.json"), "w") as f:
        json.dump(mine, f)
    p = run("train", "--config", "...json", *QUIET, "--set", "train.max_steps=1", cwd=dots)
    with open(os.path.join(dots, "config.json")) as f:
        kept = json.load(f) == mine
    check(p.returncode == 0 and kept and os.path.exists(os.path.join(dots, "runs", "run", "metrics.jsonl")),
          f"a config named '...json' trains into runs/run, the working directory's config.json kept "
          f"({p.stderr[-200:]})")

    empty_lock = os.path.join(work, "empty_lock")
    os.makedirs(empty_lock)
    open(os.path.join(empty_lock, "RUN_LOCK"), "w").close()
    p = train(empty_lock, "--set", "train.max_steps=1")
    check(p.returncode == 0 and "took over" in p.stdout and
          not any(name.startswith("RUN_LOCK") for name in os.listdir(empty_lock)),
          f"an empty RUN_LOCK is taken over, nothing left behind ({p.stderr[-300:]})")

    again = train(empty_lock, "--set", "train.max_steps=2")
    kept = [name for name in os.listdir(empty_lock) if name.startswith("metrics.") and name != "metrics.jsonl"]
    steps = []
    if len(kept) == 1:
        with open(os.path.join(empty_lock, kept[0])) as f:
            steps = [r["step"] for r in map(json.loads, f) if r.get("type") == "train"]
    check(again.returncode == 0 and "an earlier run's log kept as" in again.stdout and steps == [1],
          f"a fresh run keeps the earlier run's metrics.jsonl aside ({kept}, its train steps {steps})")

    # The fresh run's log has no record of step 3: a resume of the earlier run's step 3 keeps it aside.
    relaunched = os.path.join(work, "relaunched")
    shutil.copytree(base, relaunched)
    fresh = train(relaunched, "--set", "train.max_steps=4")  # past step 3, with records of it
    back = train(relaunched, "--set", "train.max_steps=6", "--resume",
                 os.path.join(relaunched, "checkpoints", "step_00000003"))
    with open(os.path.join(relaunched, "metrics.jsonl")) as f:
        steps = [r["step"] for r in map(json.loads, f) if r.get("type") == "train"]
    kept = sorted(name for name in os.listdir(relaunched) if name.startswith("metrics.") and name != "metrics.jsonl")
    check(fresh.returncode == 0 and back.returncode == 0 and "does not record the save of step 3" in back.stdout and
          steps == [4, 5, 6] and len(kept) == 2,
          f"a resume whose log is another run's starts a new one, both kept (train steps {steps}, kept {kept})")

    words = ["the", "cat", "sat", "on", "mat", "dog", "ran", "far", "away", "and", "then"]
    text = os.path.join(work, "text.txt")
    with open(text, "w") as f:
        f.write(" ".join(words[(i * 7 + i // 3) % len(words)] for i in range(20000)))
    tokens = os.path.join(work, "tokens")
    p = run("prepare", "--text", text, "--out", tokens)
    shard = os.path.join(tokens, "train.bin")
    cut_run = os.path.join(work, "cut")
    victim = subprocess.Popen([binary, "train", "--config", CONFIG, "--run-dir", cut_run, *QUIET, "--set",
                               "model.vocab_size=16", "--set", "train.max_steps=1000000", "--set",
                               f"data.train_files={shard}", "--set", f"data.val_files={tokens}/val.bin"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not os.path.exists(os.path.join(cut_run, "metrics.jsonl")):
        time.sleep(0.1)
    time.sleep(0.5)
    os.truncate(shard, 1024 + 64)  # the header and a few tokens: the map's later pages are gone
    try:
        _, err = victim.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        victim.kill()
        _, err = victim.communicate()
    ok, lines = refused(subprocess.CompletedProcess([], victim.returncode, "", err), shard,
                        "the token file changed while this run read it")
    check(p.returncode == 0 and ok, f"a token file cut under a run is named, exit 2 (exit {victim.returncode}, {lines})")

    # A run whose config.json names precision.attention = "cudnn" at a head size (48) that this build
    # refuses it for (a rule newer than the run): its weights still sample and score on the CPU.
    old_rule = os.path.join(work, "old_rule_run")
    p = train(old_rule, "--set", "train.max_steps=1", "--set", "model.n_embd=96", "--set", "model.n_head=2")
    with open(os.path.join(old_rule, "config.json")) as f:
        saved = json.load(f)
    saved["device"] = "cuda"
    saved.setdefault("precision", {}).update({"activations": "bf16", "matmul": "bf16", "attention": "cudnn"})
    with open(os.path.join(old_rule, "config.json"), "w") as f:
        json.dump(saved, f)
    q = run("sample", "--run", old_rule, "--tokens", "3")
    check(p.returncode == 0 and q.returncode == 0 and q.stdout.strip() != "",
          f"sample --run of a run whose config names a cudnn this build refuses there ({q.stderr.strip()[-200:]})")

    # A live run that saves every step and keeps one checkpoint deletes each while ckpt tools may be
    # reading it from the folder: they start over on the folder's newest, never fail for it.
    live_run = os.path.join(work, "live_keep1")
    live = subprocess.Popen([binary, "train", "--config", CONFIG, "--run-dir", live_run, *QUIET, "--set",
                             "train.max_steps=1000000", "--set", "checkpoint.every_steps=1", "--set",
                             "checkpoint.keep_last=1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    live_folder = os.path.join(live_run, "checkpoints")
    deadline = time.time() + 60
    while time.time() < deadline and not os.path.exists(os.path.join(live_folder, "latest")):
        time.sleep(0.1)
    choices = os.path.join(work, "live_choices.bin")
    write_choice_file(choices, [(0, [1, 2, 3], [[4, 5], [6]]), (1, [7, 8], [[9], [10, 11]])])
    failed = []
    for i in range(60):  # sample and eval failed about 1 call in 25-30 before they read again
        for args in (["ckpt", "verify", live_folder],
                     ["ckpt", "export", live_folder, "--format", "hf", "--out", os.path.join(work, "live_export")],
                     ["sample", "--ckpt", live_folder, "--tokens", "3"],
                     ["eval", "--ckpt", live_folder, "--choices", choices]):
            p = run(*args)
            if p.returncode != 0:
                failed.append(f"{args[0]} {args[1]}: {p.stderr.strip()[-200:]}")
    # train --resume of that folder (another run's, continued elsewhere): the checkpoint chosen is held
    # from its validation until every rank's reader holds it (the session-start binary of 2026-12-06
    # failed 6 of 6 with "missing manifest"). Each resume is stopped once it has taken a step.
    resumes = []
    for i in range(6):
        resumed_dir = os.path.join(work, f"live_resumed_{i}")
        r = subprocess.Popen([binary, "train", "--config", CONFIG, "--run-dir", resumed_dir, *QUIET, "--set",
                              "train.max_steps=1000000", "--set", "checkpoint.save_on_signal=false", "--resume",
                              live_folder], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        def stepped():
            return any(rec.get("type") == "train" for rec in records_so_far(resumed_dir))
        deadline = time.time() + 60
        while time.time() < deadline and r.poll() is None and not stepped():
            time.sleep(0.05)
        took_step = stepped()
        r.terminate()
        out, err = r.communicate(timeout=60)
        resumes.append((took_step and "resuming from" in out and "error" not in err, err.strip()[-200:]))
    live.kill()
    live.wait()
    check(not failed, f"ckpt verify and export, sample and eval --ckpt of a folder a live run prunes every step "
                      f"never fail for it ({failed[:2]})")
    check(all(ok for ok, _ in resumes), f"train --resume of a folder a live run prunes every step: each resume "
                                        f"starts and takes a step ({[e for ok, e in resumes if not ok][:2]})")

    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
