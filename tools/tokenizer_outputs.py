"""What the tools that write a tokenizer's outputs share, so that they fail, stop and write alike:
one-line failures (each tool's lines start with its name, `tool`), stop signals that unwind the
run and then end it by the signal, and the count of characters a tokenizer without byte fallback
drops (prepare_tokens.py and prepare_choices.py); files staged and synced, then put in place in a
folder held for the run (prepare_tokens.py's shards and tokenizer files).
"""
import contextlib
import errno
import fcntl
import os
import shutil
import signal
import sys


def fail(tool, message, status=2):
    """Bad input: one line naming it, exit 2 (as zerotrain's); status 1 where the machine failed the
    run (a full disk), as zerotrain's runtime errors."""
    print(f"{tool}: {message}", file=sys.stderr)
    sys.exit(status)


# Write failures of the machine's making (exit 1); any other (a folder that takes no files) is the
# command's input (exit 2).
MACHINE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO}


@contextlib.contextmanager
def fail_on_write_error(tool, path, outcome=""):
    """A write's failure in the block as one line naming `path` (then `outcome`, what became of the
    output): exit 1 for MACHINE_ERRNOS (a full disk, a file size limit), else 2."""
    try:
        yield
    except OSError as e:
        fail(tool, f"{path}: cannot be written ({e.strerror}){outcome}",
             status=1 if e.errno in MACHINE_ERRNOS else 2)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

# engine/app/io/output_file.h's kIncompleteOutputMarker: a folder whose output was cut part way
# through its replacement; zerotrain reads no token file in a folder that holds it.
INCOMPLETE_MARKER = ".zt-incomplete-output"


class Interrupted(BaseException):
    """A stop signal, raised where the run is so that it removes what it staged on the way out;
    `outcome` says what became of the output. A BaseException, as KeyboardInterrupt: no `except
    Exception` takes it for the failure of what it interrupted."""

    def __init__(self, signum, outcome):
        super().__init__(signum)
        self.signum = signum
        self.outcome = outcome


class StopSignals:
    """Ctrl-C, SIGTERM and a closed terminal (SIGHUP) as Interrupted: Python's own Ctrl-C is a
    KeyboardInterrupt traceback, and its SIGTERM ends the process with the staging files left
    behind. A signal already ignored (nohup's SIGHUP) stays ignored. Within `held()` (the renames,
    the clean-up) a signal waits until the block ends, so that it cuts neither. `outcome` is what
    the stop's line says of the output, kept current by the run. `hold_after_stop`: from the first
    stop on, every later signal waits (for good: the first ends the process), so that a second
    Ctrl-C cannot cut the clean-up that the first started."""

    def __init__(self, outcome="", hold_after_stop=False):
        self.holding = False
        self.pending = None
        self.outcome = outcome
        self.hold_after_stop = hold_after_stop
        for sig in STOP_SIGNALS:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                signal.signal(sig, self.on_signal)

    def on_signal(self, signum, _frame):
        if self.holding:
            self.pending = self.pending or signum
            return
        self.holding = self.hold_after_stop
        raise Interrupted(signum, self.outcome)

    @contextlib.contextmanager
    def held(self):
        outer = self.holding
        self.holding = True
        try:
            yield
        finally:
            self.holding = outer
        if self.pending and not outer:
            signum, self.pending = self.pending, None
            raise Interrupted(signum, self.outcome)


def end_by_signal(tool, e):
    """One line, then the process ends by the signal itself, as zerotrain's commands do: a shell sees
    128 + its number (130 for Ctrl-C, 143 for SIGTERM) and a script running the tool stops too."""
    print(f"{tool}: stopped by {signal.Signals(e.signum).name}{e.outcome}", file=sys.stderr)
    sys.stderr.flush()
    signal.signal(e.signum, signal.SIG_DFL)
    os.kill(os.getpid(), e.signum)
    sys.exit(128 + e.signum)  # where the signal did not end it


@contextlib.contextmanager
def synced_file(path):
    """`path` opened for writing, on disk once the block ends (so a full disk fails there, before
    anything is replaced, and a power loss after the renames finds its bytes)."""
    with open(path, "wb") as f:
        yield f
        f.flush()
        os.fsync(f.fileno())


def copy_synced(source, path):
    """A copy of file `source` at `path`, on disk as synced_file leaves it."""
    with open(source, "rb") as src, synced_file(path) as dst:
        shutil.copyfileobj(src, dst)


def sync_dir(path):
    """The folder's entries on disk, so that a power loss after the renames keeps the new names; a
    file system that cannot sync a folder (some FUSE ones) keeps the renames all the same."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def lock_folder(tool, out):
    """Holds the folder `out` for this run (flock, as zerotrain's prepare and ckpt export hold their
    --out): a second run into it at once would stage under the same names, and a clean-up of an
    earlier run's leftover staging files would take its files for them. Returns the descriptor to
    keep open; a file system without locks runs unlocked, as before."""
    fd = os.open(out, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        fail(tool, f"--out {out}: another {tool} or zerotrain command is writing into it now; "
             "try again once it ends")
    except OSError:
        pass
    return fd


class Staging:
    """A run's files under their staging names, put in place by commit once every one is written:
    a failure or a stop before then leaves the folder `out` as it was, and remove() takes away what
    was staged."""

    def __init__(self, out, owner):
        self.out = out
        self.owner = owner  # what INCOMPLETE_MARKER names as the output cut ("prepare_tokens.py --name data")
        self.files = []  # (staging path, final path), in the order commit renames them
        self.marker = os.path.join(out, INCOMPLETE_MARKER)

    def foreign_marker(self):
        """INCOMPLETE_MARKER's text where another output's cut left it in `out` (another set's, or
        zerotrain prepare's dataset): this run's commit must not take it away while that output is
        still mixed. None where there is none, or it is this output's own."""
        try:
            with open(self.marker, encoding="utf-8", errors="replace") as f:
                text = f.read().strip()
        except FileNotFoundError:
            return None
        return None if text.startswith(self.owner + ":") else text

    def stage(self, tmp, final):
        """Registers `tmp` before it is written, so that an interrupted write is removed too."""
        self.files.append((tmp, final))
        return tmp

    def commit(self, earlier, signals, outcome):
        """The earlier files (`earlier`: those the new ones replace) go first, then the staged files
        take their names in the order staged, so that the one staged last, the file whose absence a
        reader notices, goes last, as zerotrain's own prepare and ckpt export stage theirs
        (engine/app/io/output_file.h). Signals wait until the renames end; a stop after them says
        `outcome`. From the first step to the last, INCOMPLETE_MARKER marks the folder, as zerotrain's
        StagedFiles::commit does: a kill between them (an OOM kill, a power loss) leaves new shards
        beside old ones of the same names' set, which zerotrain then refuses to read; this tool's next
        run into the folder takes the marker away with its own commit."""
        marker = self.marker
        was_marked = os.path.lexists(marker)  # by this output's own earlier cut (foreign_marker refused another's)
        marked = len(earlier) + len(self.files) > 1 or was_marked
        changed = False
        with signals.held():
            try:
                if marked:
                    with synced_file(marker) as f:
                        f.write(f"{self.owner}: an output being replaced here was cut before it was whole: run its "
                                "command again\n".encode())
                    sync_dir(self.out)
                for p in earlier:
                    os.remove(p)
                    changed = True
                for tmp, final in self.files:
                    os.replace(tmp, final)
                    changed = True
            except OSError:
                if marked and not changed and not was_marked:
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(marker)  # the folder is as it was
                raise
            signals.outcome = outcome
            sync_dir(self.out)
            if marked:
                os.remove(marker)
                sync_dir(self.out)

    def remove(self):
        """Removes the staged files not put in place."""
        for tmp, _ in self.files:
            if os.path.lexists(tmp):
                os.remove(tmp)


def characters_left_out(tok, text, encoding, alone):
    """How many characters of `text` its `encoding` holds no token for, and the index of the first
    ((0, None) where none): a tokenizer without byte fallback (a character vocabulary, as `ckpt
    export --format hf` writes a char-level run's) drops a character it has no token for, where a
    byte-level BPE (GPT-2's, Llama 3's) has a token for every byte. Told by the tokens' spans
    (offsets), not by decoding, and looked for only where a character of the text encodes to no
    token alone (`alone` keeps each character's answer): never for a byte-level BPE's text, whose
    offsets would cost a fifth of the encoding's time. The library's offsets after a dropped
    character are shifted back by it (tokenizers 0.19), so they tell that characters are missing,
    not which: those that encode to no token alone are the ones named."""
    chars = set(text)
    for c in chars - alone.keys():
        alone[c] = not tok.encode(c, add_special_tokens=False).ids
    dropped = [c for c in chars if alone[c]]
    if not dropped:
        return 0, None
    # A list of flags, span by span: faster than numpy's bincounts over the offsets (a million
    # characters: 0.1 s against 0.2 s, most of it numpy taking in the list of pairs).
    covered = [False] * len(text)
    for start, end in encoding.offsets:
        covered[start:end] = [True] * (end - start)
    uncovered = covered.count(False)
    if uncovered == 0:  # within a special token's span ("<|endoftext|>" of characters it has none for)
        return 0, None
    # Both counts are at least the true one (a shifted span uncovers more; a character counted may
    # also sit in a special token's span).
    return min(uncovered, sum(text.count(c) for c in dropped)), min(text.index(c) for c in dropped)
