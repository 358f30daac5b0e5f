"""The commit a tool's results name: ZT_COMMIT where set (a copy of the tree without .git, as the
device calls carry), else the checkout's HEAD, else None (no git, or not a checkout: a tool then
says "unknown" rather than failing after its runs).
"""
import os
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
