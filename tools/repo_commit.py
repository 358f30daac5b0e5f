"""The commit a tool's results name: ZT_COMMIT where set (a copy of the tree without .git, as the
device calls carry), else the checkout's HEAD, else None (no git, or not a checkout: a tool then
says "unknown" rather than failing after its runs); and the commit a built binary reports, which
is the code a benchmark measured (the checkout's HEAD may have moved on since the build).
"""
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _git(*args):
    try:
        p = subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True)
    except OSError:  # no git on this machine
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def head_commit(short=False, env=True):
    """The commit, or None; `short` for the abbreviated hash; `env=False` ignores ZT_COMMIT."""
    named = os.environ.get("ZT_COMMIT") if env else None
    if named:
        return named[:7] if short else named
    return _git("rev-parse", "--short", "HEAD") if short else _git("rev-parse", "HEAD")


def tree_dirty():
    """Whether tracked files differ from HEAD; None without git."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    return None if status is None else bool(status)


def binary_commit(binary):
    """The commit `BINARY version` names on its first line ("zerotrain 0.1.0 (commit abc123+dirty)":
    "abc123+dirty", uncommitted changes in its build marked), or None when it names none or does not run."""
    try:
        p = subprocess.run([binary, "version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return version_commit(p.stdout) if p.returncode == 0 else None


def version_commit(version_text):
    """The commit in `zerotrain version`'s output (its first line), or None where it names none."""
    first = (version_text.splitlines() or [""])[0]
    m = re.search(r"\(commit ([0-9a-fA-F]+(?:\+dirty)?)\)", first)
    return m.group(1) if m else None
