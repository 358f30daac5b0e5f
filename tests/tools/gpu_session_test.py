#!/usr/bin/env python3
"""tools/gpu_session.sh's refusals, which must hold before a GPU minute is spent: it prints its plan
and refuses (exit 2) phases whose budgets exceed the outer limit, that leave more files than
the 8 a device call brings back, or that it does not know
(--warm-autotune is an option, not a phase: it leaves the plan as it is); in a copy
of the tree it refuses to run without a pack, with a pack built from other sources (naming the file),
with a pack built from uncommitted sources, and with a pack of another commit than ZT_COMMIT; a pack
that matches gets past every check (to the carried packages, absent here); a set-up that runs late
comes out of the first phase's budget and the call ends by its limit, the next phase's step still
running within its deadline; a step that fails fails the session, the warm compile stops before a
timed phase, an $OUT already full gets no compile cache, and a step its phase leaves under 10 s
is skipped without starting. Needs no GPU.

usage: gpu_session_test.py REPO_ROOT
"""
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402


def session(tree, out, *args, env=None):
    e = dict(os.environ, OUT=out, **(env or {}))
    e.pop("ZT_SESSION_SECONDS", None)
    p = subprocess.run(["bash", os.path.join(tree, "tools", "gpu_session.sh"), *args], capture_output=True,
                       text=True, timeout=120, env=e)
    summary = os.path.join(out, "session.txt")
    text = open(summary).read() if os.path.exists(summary) else ""
    return p.returncode, text, p.stderr


def make_pack(tree, commit, files, dirty=False, binary=None):
    """A pack of `files`' sums at `commit`; `binary` (a path) goes in as its zerotrain."""
    pack = os.path.join(tree, ".gpu_build")
    shutil.rmtree(pack, ignore_errors=True)
    os.makedirs(pack)
    with tarfile.open(os.path.join(pack, "build-gpu.tar.gz"), "w:gz") as tar:
        if binary:
            tar.add(binary, arcname="zerotrain")
    with open(os.path.join(pack, "source_sums"), "w") as f:
        for rel in files:
            with open(os.path.join(tree, rel), "rb") as src:
                f.write(f"{hashlib.sha256(src.read()).hexdigest()}  {rel}\n")
    with open(os.path.join(pack, "commit"), "w") as f:
        f.write(commit + "\n")
    with open(os.path.join(pack, "build_info.txt"), "w") as f:
        f.write(f"commit: {commit}{' + uncommitted changes to sources' if dirty else ''}\n")
    with open(os.path.join(pack, "build_dir"), "w") as f:
        f.write(os.path.join(tree, "build-gpu") + "\n")


def late_setup_cuts_the_first_phase(check, tree, work, out, sources, on_h100):
    """A set-up past its 30 s reserve comes out of the first phase, and the call still ends by
    --limit (a slow set-up or a warm compile's 15 s stop ran the last phase past it). Past every
    check with a python whose torch check takes 33 s and whose phases hang until their limits, the
    last one past its SIGTERM, until the 10 s `timeout -k` grants it (a checkpoint saved on the signal)."""
    python = "/usr/bin/python3"
    cublaslt = "/usr/local/cuda/lib64/libcublasLt.so.13"
    if subprocess.run([python, "-c", f"import numpy, torch, ctypes; ctypes.CDLL('{cublaslt}')"],
                      capture_output=True).returncode != 0:
        print(f"SKIP the deadline check: {python} lacks torch or numpy, or {cublaslt} does not open")
        return
    slow = os.path.join(work, "slow_python")
    with open(slow, "w") as f:
        f.write(f"""#!/bin/sh
case "$*" in
  *"import numpy, torch"*) sleep 33 ;;
  *tools/llmc_interop.py*) exec sleep 100 ;;
  *tools/bench_sampling.py*) exec sh -c 'trap "sleep 30" TERM; while :; do sleep 1; done' ;;
esac
exec {python} "$@"
""")
    os.chmod(slow, 0o755)
    make_pack(tree, "a" * 40, sources, binary=shutil.which("true"))
    rc, text, _ = session(tree, out, "--limit", "60", "llmc=15", "sampling=15",
                          env=dict(on_h100, ZT_SESSION_PYTHON=slow, ZT_COMMIT="a" * 40, ZT_KERNEL_BASELINE="none"))
    llmc = [line for line in text.splitlines() if line.startswith("phase llmc (")]
    ended = [line for line in text.splitlines() if line.startswith("session: ")]
    seconds = int(ended[0].split()[-2]) if ended else None
    check("; 5 of the 8 files" in text, f"the plan counts session.txt and each phase's log and result ({text[:200]})")
    check(len(llmc) == 1 and "cut to" in llmc[0] and "the phases before it ran late" in llmc[0],
          f"a late set-up: the first phase's budget cut ({llmc})")
    check(rc == 1 and seconds is not None and seconds <= 60,
          f"the call ends by its limit, 60 s ({rc}: {ended}; {text[-400:]})")
    # The last phase runs to the call's end (its limit less the 15 s kept for the end), no later
    # phase's budget kept from it; its step, where that leaves it one, ends by the phase's deadline,
    # past its SIGTERM by the 10 s `timeout -k` grants at most. (How late the set-up ran decides
    # whether the step has its 10 s.)
    sampling = [line for line in text.splitlines() if line.startswith("phase sampling (")]
    began = re.search(r"phase llmc done at (\d+) s", text)
    cut = re.search(r"cut to (\d+) s", sampling[0]) if sampling else None
    check(began is not None and cut is not None and abs(int(cut.group(1)) - (60 - 15 - int(began.group(1)))) <= 1,
          f"the last phase has what is left of the call ({sampling}, began at {began and began.group(1)} s)")
    step = [line for line in text.splitlines() if "bench_sampling:" in line]
    took = re.search(r" in (\d+) s", step[0]) if step else None
    if cut is not None and took is not None and "skipped" not in step[0]:
        check(int(took.group(1)) <= int(cut.group(1)) + 11, f"its step ends by the phase's deadline ({step})")


def failing_steps_and_the_warm_compile(check, tree, work, sources, on_h100):
    """A step that fails (not one skipped for want of time) fails the session; the max-autotune warm
    compile is stopped before the timed phase begins (it would share the GPU with it); an $OUT that
    already holds the 8 files a call brings back gets no compile cache in a ninth; a step its phase
    leaves under 10 s is skipped without starting."""
    python = os.path.join(work, "failing_python")
    with open(python, "w") as f:
        f.write("""#!/bin/sh
case "$*" in
  *--warm-only*) exec sleep 100 ;;
  *tools/bench_gpu.py*|*tools/llmc_interop.py*) echo failed >&2; exit 1 ;;
  *tools/bench_sampling.py*) touch "$(dirname "$0")/sampling_ran"; exit 0 ;;
esac
exec /usr/bin/python3 "$@"
""")
    os.chmod(python, 0o755)
    make_pack(tree, "a" * 40, sources, binary=shutil.which("true"))
    out = os.path.join(work, "out_failing")
    os.makedirs(out)
    for k in range(5):  # with session.txt and the two phases' logs: 8
        open(os.path.join(out, f"earlier_{k}.json"), "w").close()
    rc, text, _ = session(tree, out, "--limit", "200", "--warm-autotune", "bench=60", "llmc=30", "sampling=8",
                          env=dict(on_h100, ZT_SESSION_PYTHON=python, ZT_COMMIT="a" * 40, ZT_KERNEL_BASELINE="none"))
    lines = text.splitlines()
    check(rc == 1 and "session: some steps FAILED" in text and any("llmc_interop: FAILED (exit 1)" in x for x in lines),
          f"a step that fails fails the session ({rc}: {text[-400:]})")
    stopped = [i for i, x in enumerate(lines) if "warm compile: stopped unfinished" in x]
    bench = [i for i, x in enumerate(lines) if x.startswith("phase bench (")]
    check(stopped and bench and stopped[0] < bench[0], f"the warm compile stops before the timed phase ({stopped}, {bench})")
    check("already holds the 8 files" in text, f"no compile cache into a ninth file ({text[-300:]})")
    # A step left under 10 s of its phase is skipped, not started to be killed by its timeout.
    check(any("bench_sampling: skipped (the phase's budget is spent)" in x for x in lines)
          and not os.path.exists(os.path.join(work, "sampling_ran")),
          f"a step with under 10 s left: skipped, never started ({[x for x in lines if 'sampling' in x]})")


def main():
    root = sys.argv[1]
    checks = Checks()
    check = checks.check
    work = checks.work_folder("zt_gpu_session_")
    out = os.path.join(work, "out")

    rc, text, err = session(root, out, "--limit", "300", "tests=200", "bench=200")
    check(rc == 2 and "plan: set-up 30 s + tests 200 s + bench 200 s = 430 s of the 300 s limit" in text
          and "refused" in text, f"budgets over the limit: the plan is printed and refused ({rc}: {text[-300:]})")
    rc, text, err = session(root, out, "--limit", "300", "--warm-autotune", "tests=200", "bench=200")
    check(rc == 2 and "plan: set-up 30 s + tests 200 s + bench 200 s = 430 s of the 300 s limit" in text,
          f"--warm-autotune is an option, not a phase: the same plan, refused on its budgets ({rc}: {err.strip()[-200:]})")
    # A call brings back 8 files: tests, multirank, bench and llama leave 9 with session.txt.
    rc, text, err = session(root, out, "--limit", "600", "tests=60", "multirank=60", "bench=60", "llama=60")
    check(rc == 2 and "; 9 of the 8 files a call brings back" in text and "split them over two calls" in text,
          f"phases leaving more files than a call brings back: refused ({rc}: {text[-300:]})")
    rc, text, err = session(root, out, "--limit", "600", "bench=60", "llama=60", "multirank=60")
    check("; 8 of the 8 files a call brings back" in text and "split them" not in text,
          f"phases leaving exactly the 8 files a call brings back: not refused for them ({rc}: {text[-300:]})")
    rc, text, err = session(root, out, "tests", "warp")
    check(rc == 2 and "usage" in err, f"an unknown phase is refused with the usage line ({rc}: {err.strip()})")
    # Counts that are no whole seconds, a phase twice, a limit past a device command's 600 s: refused
    # before any set-up (a word passed the plan check and ended the session mid-way).
    for args, said in ((["--limit", "abc", "tests=5"], "--limit takes whole seconds (got 'abc')"),
                       (["--limit"], "--limit takes whole seconds (got '')"),
                       (["tests=abc"], "tests takes whole seconds (got 'abc')"),
                       (["tests=-100"], "tests takes whole seconds (got '-100')"),
                       (["tests="], "tests takes whole seconds (got '')"),
                       (["tests=60", "tests=60"], "phase tests given twice"),
                       (["--limit", "5000", "tests=5"], "--limit 5000 is past the 600 s")):
        rc, text, err = session(root, out, *args)
        check(rc == 2 and "usage" in err and said in err and not os.path.exists(os.path.join(out, "session.txt")) or
              rc == 2 and said in err, f"{' '.join(args)}: refused in the usage line ({rc}: {err.strip()[-200:]})")

    # A copy of the tree, where packs can be faked.
    tree = os.path.join(work, "tree")
    listed = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True)
    if listed.returncode != 0:
        print("SKIP: not a git checkout; the pack checks need the tracked files")
        return 1 if checks.finish() else 77  # ctest shows the skip (SKIP_RETURN_CODE)
    for rel in listed.stdout.splitlines():
        if os.path.isfile(os.path.join(root, rel)):
            os.makedirs(os.path.dirname(os.path.join(tree, rel)), exist_ok=True)
            shutil.copy2(os.path.join(root, rel), os.path.join(tree, rel))
    sources = ["CMakeLists.txt", "engine/distributed/comm/communicator.cpp", "kernels/ops.cpp"]
    rc, text, _ = session(tree, out, "tests=60")
    check(rc == 2 and "refused: no pack" in text, f"no pack: refused, saying how to make one ({text[-200:]})")
    # The kernel baseline follows the card: an H100 lease told to compare with an H200 file takes
    # the newest committed H100 one instead (kernel_bench_delta.py refuses two cards).
    fake_bin = os.path.join(work, "bin")
    os.makedirs(fake_bin, exist_ok=True)
    with open(os.path.join(fake_bin, "nvidia-smi"), "w") as f:
        f.write("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3'\n")
    os.chmod(os.path.join(fake_bin, "nvidia-smi"), 0o755)
    h200 = "docs/results/gpu_session_2026-11-28_h200/call2_gpu_kernels_nvidia_h200.json"
    on_h100 = {"PATH": fake_bin + os.pathsep + os.environ.get("PATH", "")}
    rc, text, _ = session(tree, out, "tests=60", env=dict(on_h100, ZT_KERNEL_BASELINE=h200))
    chosen = [line for line in text.splitlines() if line.startswith("kernel baseline: ")]
    check(len(chosen) == 1 and chosen[0].split()[2].endswith("gpu_kernels_nvidia_h100_80gb_hbm3.json")
          and "gpu_session_" in chosen[0].split()[2], f"another card's kernel baseline: this card's newest instead ({chosen})")
    rc, text, _ = session(tree, out, "tests=60", env=dict(on_h100, ZT_KERNEL_BASELINE="none",
                                                          ZT_BENCH_ARGS="--engines zerotrain-s0 pytorch"))
    check("kernel baseline: none" in text, "ZT_KERNEL_BASELINE=none: no kernel baseline")
    check("bench args: --engines zerotrain-s0 pytorch" in text, "the bench phase's ZT_BENCH_ARGS recorded in session.txt")
    make_pack(tree, "a" * 40, sources)
    with open(os.path.join(tree, "kernels", "ops.cpp"), "a") as f:
        f.write("// edited after packing\n")
    rc, text, _ = session(tree, out, "tests=60", env={"ZT_COMMIT": "a" * 40})
    check(rc == 2 and "built from other sources" in text and "kernels/ops.cpp" in text,
          f"a pack of other sources: refused, naming the file ({text[-300:]})")
    shutil.copy2(os.path.join(root, "kernels", "ops.cpp"), os.path.join(tree, "kernels", "ops.cpp"))
    make_pack(tree, "a" * 40, sources, dirty=True)
    rc, text, _ = session(tree, out, "tests=60", env={"ZT_COMMIT": "a" * 40})
    check(rc == 2 and "uncommitted sources" in text, f"a pack of uncommitted sources: refused ({text[-200:]})")
    make_pack(tree, "a" * 40, sources)
    rc, text, _ = session(tree, out, "tests=60", env={"ZT_COMMIT": "b" * 40})
    check(rc == 2 and "ZT_COMMIT is " + "b" * 40 in text, f"a pack of another commit: refused ({text[-200:]})")
    shutil.rmtree(os.path.join(tree, ".gpu_deps"), ignore_errors=True)
    rc, text, _ = session(tree, out, "tests=60", env={"ZT_COMMIT": "a" * 40})
    check(rc == 2 and "no .gpu_deps" in text and "plan:" in text.splitlines()[0],
          f"a matching pack passes every pack check (then needs the carried packages) ({text[-200:]})")
    # Carried packages (an empty one here): then a machine without a GPU, or a python without
    # PyTorch, is refused before any phase (each phase failed in turn); with no ZT_COMMIT and no git
    # in the tree the results take the pack's commit (they were named "unknown").
    if shutil.which("dpkg-deb"):
        package = os.path.join(work, "empty_pkg")
        os.makedirs(os.path.join(package, "DEBIAN"), exist_ok=True)
        with open(os.path.join(package, "DEBIAN", "control"), "w") as f:
            f.write("Package: zt-empty\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@t>\nDescription: t\n")
        os.makedirs(os.path.join(tree, ".gpu_deps"), exist_ok=True)
        subprocess.run(["dpkg-deb", "--build", package, os.path.join(tree, ".gpu_deps", "zt-empty_1.0_all.deb")],
                       capture_output=True, check=True)
        no_gpu = {"PATH": os.environ.get("PATH", ""), "ZT_KERNEL_BASELINE": "none"}
        rc, text, _ = session(tree, out, "tests=60", env=no_gpu)
        check(rc == 2 and "refused: no GPU visible" in text and f"commit: {'a' * 40} (the pack's" in text,
              f"no GPU: refused after the pack and packages, the pack's commit taken ({text[-300:]})")
        with open(os.path.join(fake_bin, "nvidia-smi"), "w") as f:
            f.write("#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)'\n")
        rc, text, _ = session(tree, out, "tests=60", env=dict(on_h100, ZT_SESSION_PYTHON="/bin/false"))
        check(rc == 2 and "refused: /bin/false has no PyTorch or numpy" in text,
              f"a python without PyTorch: refused ({text[-300:]})")
        late_setup_cuts_the_first_phase(check, tree, work, out, sources, on_h100)
        failing_steps_and_the_warm_compile(check, tree, work, sources, on_h100)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
