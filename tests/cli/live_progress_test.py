#!/usr/bin/env python3
"""`zerotrain train`'s live progress line on a terminal (a pseudo-terminal of a set width):

  * on 60 columns every rewrite of the step line fits in 59 characters, its last fields dropped
    but the ETA: a line wider than the terminal wraps, and the carriage return goes back to its
    last row only, so each step left the rows above behind (the line is 130 characters at this
    config, 136 at configs/tiny.json);
  * on 200 columns the line is whole (it ends with the memory figures);
  * the lines that stay (the banner, the memory table) are not cut.

usage: live_progress_test.py PATH/TO/zerotrain
"""
import errno
import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import tempfile
import termios

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
report = Checks()
check = report.check


def run_on_terminal(binary, run_dir, columns):
    """Everything `train` wrote to a terminal of `columns` columns (its stdout and stderr)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen([binary, "train", "--config", os.path.join(ROOT, "configs", "tiny_debug.json"),
                             "--run-dir", run_dir, "--set", "train.max_steps=4", "--set", "log.sample_tokens=0",
                             "--set", "train.num_threads=1"], stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError as e:  # EIO: the terminal's other side closed, the process ended
            if e.errno != errno.EIO:
                raise
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    proc.wait(timeout=300)
    return proc.returncode, out.decode("utf-8", "replace")


def step_lines(text):
    """The step line as each rewrite drew it: what follows a carriage return, to the clear."""
    pieces = text.replace("\n", "\r").split("\r")
    return [p.replace("\x1b[K", "") for p in pieces if re.match(r"step +\d+/\d+ \|", p)]


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="zt_live_progress_") as work:
        code, text = run_on_terminal(binary, os.path.join(work, "narrow"), 60)
        steps = step_lines(text)
        check(code == 0 and len(steps) >= 4 and all(len(s) <= 59 for s in steps),
              f"on 60 columns every rewrite of the step line fits in 59 (exit {code}, "
              f"widths {[len(s) for s in steps]})")
        # Fields go from the end, the ETA kept: what a user watching a long run reads first.
        check(all(" | eta " in s and " | mem " not in s and s.startswith("step ") for s in steps),
              f"... its last fields dropped, the ETA kept ({steps[-1:]})")
        kept = [line for line in text.replace("\r", "\n").split("\n") if len(line) > 60]
        check(kept, "lines that stay (the banner, the memory table) are not cut to the terminal's width")

        code, text = run_on_terminal(binary, os.path.join(work, "wide"), 200)
        steps = step_lines(text)
        check(code == 0 and len(steps) >= 4 and all(" | mem p " in s and len(s) > 60 for s in steps),
              f"on 200 columns the step line is whole (exit {code}, {steps[-1:]})")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
