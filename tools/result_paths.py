"""Where the benchmark and report tools write: runs/results/ (ignored by git) unless --out or
--out-dir names a place, so a run never replaces the committed results under docs/results/ unless
its command names them; and a check, before minutes of runs, that the place can be written, so a
bad path fails in one line (exit 2) instead of a traceback after the work. Other bad input (a
missing binary, a flag out of range) follows the same convention: refuse, check_program, OneLineParser."""
import argparse
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_DIR = os.path.join(ROOT, "runs", "results")


def default_out(name):
    """runs/results/NAME."""
    return os.path.join(RESULTS_DIR, name)


def temporary_work(prefix):
    """A temporary work folder removed at any exit, an error's or Ctrl-C's too (it holds the runs'
    weights and checkpoints: gigabytes of GPT-2 124M were left in /tmp by an interrupted benchmark)."""
    work = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, work, True)
    return work


def run_main(tool, main):
    """main()'s exit status, for sys.exit: Ctrl-C ends it with one line and 130 (its result files are
    written at the end, so none is half-written), not a traceback; a zerotrain command it runs that
    fails ends it with that command's own last line (its reason), not a CalledProcessError's."""
    try:
        return main()
    except KeyboardInterrupt:
        sys.stderr.write(f"{tool}: stopped by SIGINT (no result written)\n")
        return 130
    except subprocess.CalledProcessError as e:
        text = e.stderr or e.output or ""
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        lines = [line.strip() for line in text.splitlines()]
        # zerotrain's own error line where there is one (mpirun's banner may follow it), else the last.
        errors = [line for line in lines if "error:" in line] or [line for line in lines if line.strip("- ")]
        # The program run, past a launcher's flags (mpirun --oversubscribe ... zerotrain train).
        cmd = [str(a) for a in (e.cmd if isinstance(e.cmd, (list, tuple)) else [e.cmd])]
        program = next((i for i, a in enumerate(cmd) if os.path.basename(a) == "zerotrain" or
                        os.path.basename(a).startswith("zt_")), 0)
        sys.stderr.write(f"{tool}: {' '.join(cmd[program:program + 2])} ... failed (exit {e.returncode})"
                         f"{': ' + errors[0] if errors else ''}\n")
        return 1


def refuse(tool, message):
    """Bad input: one line naming the tool, exit 2, before any work."""
    sys.stderr.write(f"{tool}: {message}\n")
    sys.exit(2)


def _refuse(tool, flag, path, why):
    refuse(tool, f"{flag} {path}: {why}")


def whole_number_at_least(low):
    """An argparse type: a whole number no smaller than `low` (--steps 0 ended in a traceback from
    the median of nothing; --rounds 0 wrote a report marked complete with nothing measured)."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low} (got {value})")
        return value
    return parse


class OneLineParser(argparse.ArgumentParser):
    """argparse with its usage errors in refuse's one line (it printed the usage above them, exit 2)."""

    def __init__(self, tool, **kwargs):
        super().__init__(**kwargs)
        self.tool = tool

    def error(self, message):
        refuse(self.tool, f"{message} (see --help)")


def check_program(tool, path, flag="--zerotrain"):
    """Exits 2 with one line unless `path` is an executable file (a missing build gave a traceback
    from the first run, or a failure after others had run)."""
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        _refuse(tool, flag, path, "not an executable file (build it: tools/build.sh)")


def _make_folders(tool, flag, path, folder):
    """Makes `folder` and any missing parents; returns the ones made, deepest first, for
    _remove_folders."""
    missing, probe = [], os.path.abspath(folder or ".")
    while not os.path.exists(probe):
        missing.append(probe)
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        _refuse(tool, flag, path, f"{probe} is not a folder")
    for made, name in enumerate(reversed(missing)):
        try:
            os.mkdir(name)
        except OSError as e:
            _remove_folders(missing[len(missing) - made:])
            _refuse(tool, flag, path, f"cannot make {name} ({e.strerror})")
    return missing


def _remove_folders(folders):
    for folder in folders:
        try:
            os.rmdir(folder)
        except OSError:  # something else wrote into it meanwhile: it is no longer only ours
            return


def _probe_write(tool, flag, path, create, why):
    """Writes for real, as the tool will: os.access() says yes to root for a read-only filesystem
    or /proc, where the tool's own write then failed after its runs."""
    try:
        create()
    except OSError as e:
        _refuse(tool, flag, path, f"{why} ({e.strerror})")


def check_out_file(tool, path, flag="--out"):
    """Exits 2 with one line unless `path` can be written as a file; leaves an existing file as it
    was and nothing behind for a new one."""
    if os.path.isdir(path):
        _refuse(tool, flag, path, "is a folder; give a file name")
    if os.path.exists(path):
        # Opened for appending, nothing written: its contents and times stay; O_NONBLOCK so that a
        # FIFO without a reader is refused instead of hanging.
        _probe_write(tool, flag, path, lambda: os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK)),
                     "cannot be written")
        return

    # A dangling link: the tool's write makes the file it names, so that is the one probed.
    target = os.path.realpath(path) if os.path.islink(path) else path

    def create():
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
        os.remove(target)
    made = _make_folders(tool, flag, path, os.path.dirname(target))
    try:
        _probe_write(tool, flag, path, create, "cannot be created")
    finally:
        _remove_folders(made)


def check_out_dir(tool, path, flag="--out-dir"):
    """Exits 2 with one line unless `path` is, or can be made, a folder a file can be written in;
    leaves nothing behind."""
    if os.path.exists(path) and not os.path.isdir(path):
        _refuse(tool, flag, path, "exists and is not a folder")
    made = _make_folders(tool, flag, path, path)

    def create():
        fd, probe = tempfile.mkstemp(prefix=".write_probe_", dir=path)
        os.close(fd)
        os.remove(probe)
    try:
        _probe_write(tool, flag, path, create, "cannot write a file in it")
    finally:
        _remove_folders(made)
