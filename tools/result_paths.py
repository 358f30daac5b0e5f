"""Where the benchmark and report tools write: runs/results/ (ignored by git) unless --out or
--out-dir names a place, so a run never replaces the committed results under docs/results/ unless
its command names them; and a check, before minutes of runs, that the place can be written, so a
bad path fails in one line (exit 2) instead of a traceback after the work."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_DIR = os.path.join(ROOT, "runs", "results")


def default_out(name):
    """runs/results/NAME."""
    return os.path.join(RESULTS_DIR, name)


def _refuse(tool, flag, path, why):
    sys.stderr.write(f"{tool}: {flag} {path}: {why}\n")
    sys.exit(2)


def _check_folder(tool, flag, path, folder):
    """`folder` exists as a writable folder, or can be made: its nearest existing ancestor is one."""
    probe = os.path.abspath(folder or ".")
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        _refuse(tool, flag, path, f"{probe} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        _refuse(tool, flag, path, f"cannot write in {probe}")


def check_out_file(tool, path, flag="--out"):
    """Exits 2 with one line unless `path` can be written as a file."""
    if os.path.isdir(path):
        _refuse(tool, flag, path, "is a folder; give a file name")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        _refuse(tool, flag, path, "cannot be written")
    _check_folder(tool, flag, path, os.path.dirname(path))


def check_out_dir(tool, path, flag="--out-dir"):
    """Exits 2 with one line unless `path` is, or can be made, a writable folder."""
    if os.path.exists(path) and not os.path.isdir(path):
        _refuse(tool, flag, path, "exists and is not a folder")
    _check_folder(tool, flag, path, path)
