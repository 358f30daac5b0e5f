"""What the Python drivers read back from a zerotrain run: configs built by merging sections,
metrics.jsonl records and the train curve, final.safetensors tensor bytes, and the PIDs of a job's
rank processes (to signal or kill one)."""
import json
import os
import shutil
import struct
import subprocess
import sys
import time


def split_launcher(argv):
    """A driver's command line `FLAGS... [-- MPIRUN FLAGS...]` as (its own flags, the launcher's
    words, empty without one)."""
    if "--" not in argv:
        return argv, []
    return argv[:argv.index("--")], argv[argv.index("--") + 1:]


def wait_until(condition, seconds=60, poll=0.01):
    """Polls `condition` until it holds or `seconds` pass; its last answer."""
    deadline = time.time() + seconds
    while time.time() < deadline and not condition():
        time.sleep(poll)
    return condition()


def mpi_driver(checks, prefix, config=None):
    """A ranks test driver's start, from its command line `MPIRUN [FLAGS...] -- zerotrain`: the
    launcher's words, the binary's absolute path, a fresh work folder named `prefix`... (removed by
    `checks`.finish() when every check passed), `config`
    (a dict) written there as config.json (its path, or None without one), and the environment less
    the launcher's own variables (so a test run under mpirun can start mpirun again), but for
    PMIX_INSTALL_PREFIX, which a relocated OpenMPI's launcher passes on (tools/gpu_session.sh's)."""
    argv = sys.argv[1:]
    sep = argv.index("--")
    work = checks.work_folder(prefix)
    path = None
    if config is not None:
        path = os.path.join(work, "config.json")
        with open(path, "w") as f:
            json.dump(config, f)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMIX_")) or k == "PMIX_INSTALL_PREFIX"}  # a relocated PMIx's home
    return argv[:sep], os.path.abspath(argv[sep + 1]), work, path, env


def ranks_trainer(check, launcher, binary, config, work, env):
    """train(name, ranks, *sets, extra=()): `zerotrain train` of `config` on that many ranks under
    `launcher` into work/name with each "section.key=value" of `sets`, checked to exit 0 (the
    output's tail in the message otherwise); the run directory, or None when it failed. The last
    run's standard output is train.last_stdout."""
    def train(name, ranks, *sets, extra=()):
        run_dir = os.path.join(work, name)
        cmd = launcher + ["-np", str(ranks), binary, "train", "--config", config, "--run-dir", run_dir, *extra]
        for kv in sets:
            cmd += ["--set", kv]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
        train.last_stdout = p.stdout
        ok = check(p.returncode == 0,
                   f"{name}: exits 0" + ("" if p.returncode == 0 else f" ({(p.stdout + p.stderr)[-600:]})"))
        # Runs are compared by their curves: an empty one would equal any other empty one.
        ok = ok and check(logged_through_last_step(run_dir), f"{name}: a train record through its last step")
        return run_dir if ok else None
    return train


def logged_through_last_step(run_dir):
    """Whether run_dir's log holds train records up to its config's train.max_steps (none for 0)."""
    with open(os.path.join(run_dir, "config.json")) as f:
        last = json.load(f)["train"]["max_steps"]
    steps = [r["step"] for r in train_records(run_dir) if r["type"] == "train"]
    return steps[-1:] == ([last] if last > 0 else [])


def deep_merge(base, over):
    """A copy of config `base` with each section of `over` updated key by key."""
    out = json.loads(json.dumps(base))
    for section, keys in over.items():
        out.setdefault(section, {}).update(keys)
    return out


def train_records(run_dir):
    """Every record of run_dir/metrics.jsonl, in the order written."""
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def records_so_far(run_dir):
    """The records of a running job's metrics.jsonl so far: whole lines only, none before the file
    exists. One read to the end: iterating the file line by line beside the writer yields a line cut
    at the end of what was there, then its rest as a line of its own once written."""
    try:
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            text = f.read()
    except FileNotFoundError:
        return []
    # A last line still being written is not a record yet. Split at "\n" alone: a sample's text may
    # hold U+2028 or U+0085, where str.splitlines would cut a record.
    return [json.loads(line) for line in text.split("\n")[:-1]]


def curve(recs):
    """(step, loss, grad_norm, lr) of every train record, in the order written."""
    return [(r["step"], r["loss"], r["grad_norm"], r["lr"]) for r in recs if r["type"] == "train"]


def tensors(path):
    """{name: (dtype, raw bytes)} of a safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return {k: (v["dtype"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items() if k != "__metadata__"}


def peaks_from_every_rank(memory_record):
    """Whether a memory record holds a measured peak from each of its ranks (an empty list would
    compare equal to any prediction)."""
    return 1 <= len(memory_record["measured_peak_bytes"]) == memory_record["ranks"]


def memory_mismatches(run_dir):
    """The run's memory record (its first step's peaks beside the prediction) and each (rank,
    category, measured, predicted) where they differ; ("ranks", measured, ranks) where the record
    holds another number of ranks' peaks than the run's ranks (none would compare as no mismatch)."""
    m = next(r for r in train_records(run_dir) if r["type"] == "memory")
    bad = [] if peaks_from_every_rank(m) else [("ranks", len(m["measured_peak_bytes"]), m["ranks"])]
    return m, bad + [(rank, cat, got[cat], m["predicted_bytes"][cat]) for rank, got in
                     enumerate(m["measured_peak_bytes"]) for cat in m["predicted_bytes"]
                     if got[cat] != m["predicted_bytes"][cat]]


def predicted_stage(binary, config, ranks, stage, sets):
    """`zerotrain memory --json`'s prediction for `stage` on `ranks` ranks with each "key=value" of
    `sets`, or None when the command fails."""
    p = subprocess.run([binary, "memory", "--config", config, "--ranks", str(ranks), "--json",
                        *[a for kv in sets for a in ("--set", kv)]], capture_output=True, text=True, timeout=60)
    return json.loads(p.stdout)["stages"][stage] if p.returncode == 0 else None


def run_result(run_dir):
    """What the ZeRO tests compare of a finished run: its losses, gradient norms, final weights
    (tensors(): equal dicts are equal bits), the first memory record, and the run directory."""
    records = train_records(run_dir)
    return {"loss": [r["loss"] for r in records if r["type"] == "train"],
            "norm": [r["grad_norm"] for r in records if r["type"] == "train"],
            "weights": tensors(os.path.join(run_dir, "final.safetensors")),
            "memory": next((r for r in records if r["type"] == "memory"), None), "run_dir": run_dir}


def checked_run(check, name, proc, run_dir):
    """A finished training process checked as the family tests check every run: exit 0, and every
    rank's measured peak equal to the prediction in every category (the memory record). None if it
    failed; else its curve (step, loss, grad_norm), final weights as floats, run_dir and stdout."""
    if not check(proc.returncode == 0, f"{name}: exit 0" + ("" if proc.returncode == 0 else
                 f" (exit {proc.returncode}: {(proc.stdout + proc.stderr)[-800:]})")):
        return None
    recs = train_records(run_dir)
    memory = [r for r in recs if r["type"] == "memory"]
    check(bool(memory) and all(peaks_from_every_rank(r) for r in memory) and
          all(m == r["predicted_bytes"] for r in memory for m in r["measured_peak_bytes"]),
          f"{name}: every rank's measured peak equals the prediction in every category")
    weights = {n: floats(b) for n, (_, b) in tensors(os.path.join(run_dir, "final.safetensors")).items()}
    return {"curve": [(s, l, g) for s, l, g, _ in curve(recs)], "weights": weights, "dir": run_dir,
            "out": proc.stdout}


def floats(blob):
    return struct.unpack(f"<{len(blob) // 4}f", blob)


def rank_pids(marker):
    """MPI rank -> PID of the processes (mpirun excluded) whose command line holds `marker`; a
    process started without mpirun counts as rank 0."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            if marker.encode() not in b" ".join(cmd) or b"mpirun" in cmd[0]:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
            out[int(env.get(b"OMPI_COMM_WORLD_RANK", b"0"))] = int(pid)
        except (OSError, ValueError):
            pass
    return out


def copy_run_with(run_dir, dest, section, key, value):
    """A copy of run_dir at dest whose config.json sets section.key to value (an edited config, or one
    an earlier build wrote); dest is returned."""
    shutil.copytree(run_dir, dest)
    with open(os.path.join(dest, "config.json")) as f:
        doc = json.load(f)
    doc[section][key] = value
    with open(os.path.join(dest, "config.json"), "w") as f:
        json.dump(doc, f)
    return dest
