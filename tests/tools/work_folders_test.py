#!/usr/bin/env python3
"""The test drivers leave nothing in the temporary directory when they pass, and keep what a failure
needs to be looked into (tests/check_report.py):
1. In child processes, as drivers run: a driver whose checks pass removes its work folders (one from
   `work_folder`, one handed to `remove_on_pass`, with a read-only file inside); one whose check
   fails keeps them and names each on standard output; one that checked nothing or crashed before
   `finish` keeps them; ZT_KEEP_TEST_FOLDERS=1 keeps them after a pass.
2. Over the tree: no Python driver under tests/ makes a temporary folder that nothing removes: each
   `tempfile.mkdtemp(` outside check_report.py sits in a file that hands it to
   `close_work_folders`, and each `mkdtemp(` in a C++ test sits in a file that calls `remove_all`;
   no driver removes a folder of Checks' itself (finish would name it kept on a failure, gone).

usage: work_folders_test.py
"""
import os
import re
import subprocess
import sys
import tempfile

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TESTS)
from check_report import Checks  # noqa: E402

# A driver in miniature: two work folders, one check (passing or not), then finish (or a crash).
DRIVER = """
import os, stat, sys, tempfile
sys.path.insert(0, {tests!r})
from check_report import Checks
checks = Checks()
made = checks.work_folder("zt_work_folders_probe_")
handed = checks.remove_on_pass(tempfile.mkdtemp(prefix="zt_work_folders_probe_", dir={parent!r}))
inner = os.path.join(made, "run", "final.bin")
os.makedirs(os.path.dirname(inner))
with open(inner, "w") as f:
    f.write("weights")
os.chmod(inner, stat.S_IRUSR)
print("FOLDERS", made, handed)
mode = sys.argv[1]
if mode == "crash":
    raise RuntimeError("the driver crashed before finish")
if mode != "none":
    checks.check(mode == "pass", "the probe's only check")
sys.exit(checks.finish())
"""


def run_driver(mode, parent, keep=None):
    """The miniature driver's exit code, output and two folders, in `mode` (pass, fail, none, crash)."""
    env = {k: v for k, v in os.environ.items() if k != "ZT_KEEP_TEST_FOLDERS"}
    env["TMPDIR"] = parent  # work_folder's mkdtemp lands where this test can look
    if keep is not None:
        env["ZT_KEEP_TEST_FOLDERS"] = keep
    p = subprocess.run([sys.executable, "-c", DRIVER.format(tests=TESTS, parent=parent), mode],
                       capture_output=True, text=True, timeout=60, env=env)
    line = next((l for l in p.stdout.splitlines() if l.startswith("FOLDERS ")), "FOLDERS ? ?")
    return p.returncode, p.stdout, line.split()[1:]


def tail(out):
    """A driver's last output, on one line (for a check's message)."""
    return " | ".join(out.strip().splitlines()[-3:])


def unremoved_temporary_folders(root):
    """The files under tests/ that make a temporary folder without a visible way to remove it."""
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            if rel == "check_report.py" or "__pycache__" in rel:
                continue
            if name.endswith(".py"):
                text = open(path).read()
                if re.search(r"tempfile\.mkdtemp\((?![^)]*dir=)", text) and "close_work_folders" not in text:
                    found.append(rel)
            elif name.endswith((".cpp", ".h", ".cu")):
                text = open(path).read()
                if "mkdtemp(" in text and "remove_all" not in text:
                    found.append(rel)
    return found


def removed_before_finish(root):
    """The drivers that remove a work folder of Checks' themselves: finish then names as kept, on a
    failure, a folder that is gone."""
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            if not name.endswith(".py") or name == "check_report.py":
                continue
            text = open(os.path.join(folder, name)).read()
            if re.search(r"work_folder\(|mpi_driver\(checks", text) and re.search(r"shutil\.rmtree\(work\b", text):
                found.append(os.path.relpath(os.path.join(folder, name), root))
    return found


def main():
    checks = Checks()
    check = checks.check
    with tempfile.TemporaryDirectory(prefix="zt_work_folders_test_") as parent:
        rc, out, folders = run_driver("pass", parent)
        check(rc == 0 and len(folders) == 2 and not any(os.path.exists(f) for f in folders) and "kept" not in out,
              f"a passing driver removes both work folders, read-only file and all ({rc}: {tail(out)})")

        rc, out, folders = run_driver("fail", parent)
        check(rc == 1 and len(folders) == 2 and all(os.path.isdir(f) for f in folders) and
              all(f"work folder kept: {f}" in out for f in folders),
              f"a failing driver keeps both folders and names each ({rc}: {tail(out)})")

        rc, out, folders = run_driver("none", parent)
        check(rc == 1 and len(folders) == 2 and all(os.path.isdir(f) for f in folders),
              f"a driver that checked nothing fails and keeps its folders ({rc}: {tail(out)})")

        rc, out, folders = run_driver("crash", parent)
        check(rc != 0 and len(folders) == 2 and all(os.path.isdir(f) for f in folders),
              f"a driver that crashes before finish keeps its folders ({rc})")

        rc, out, folders = run_driver("pass", parent, keep="1")
        check(rc == 0 and len(folders) == 2 and all(os.path.isdir(f) for f in folders) and
              all(f"work folder kept: {f}" in out for f in folders),
              f"ZT_KEEP_TEST_FOLDERS=1 keeps a passing driver's folders and names them ({rc}: {tail(out)})")

        rc, out, folders = run_driver("pass", parent, keep="0")
        check(rc == 0 and len(folders) == 2 and not any(os.path.exists(f) for f in folders),
              f"ZT_KEEP_TEST_FOLDERS=0 is not a request to keep ({rc})")
        for folder, dirs, files in os.walk(parent):  # the read-only files the kept folders hold
            for name in files:
                os.chmod(os.path.join(folder, name), 0o600)

    leaks = unremoved_temporary_folders(TESTS)
    check(not leaks, f"every temporary folder a test makes is removed when it passes (not so in: {leaks})")
    early = removed_before_finish(TESTS)
    check(not early, f"no driver removes its Checks work folder itself before finish (does: {early})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
