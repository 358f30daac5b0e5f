"""Running a tool that writes its result as JSON, as the tools' smoke tests do."""
import json
import os
import re
import subprocess


def run_tool_json(checks, cmd, out, timeout, what="it runs"):
    """Runs `cmd`, a tool that writes its JSON result to `out`, checked (as `what`) to exit 0 having
    written the file, its output's tail in the message otherwise. Returns the parsed JSON, or None
    when that check failed, and the finished process (its stdout holds the printed table)."""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if not checks.check(p.returncode == 0 and os.path.exists(out),
                        f"{what} (exit {p.returncode}: {(p.stdout + p.stderr)[-600:]})"):
        return None, p
    with open(out) as f:
        return json.load(f), p


def flag_help(help_text, flag):
    """`flag`'s entry in argparse's --help (its line and the wrapped lines under it), on one line:
    the tools' tests check each flag says what it is and its default."""
    m = re.search(rf"^  {re.escape(flag)}(?=[ ,\n]).*?(?=^  \S|\Z)", help_text, re.M | re.S)
    return " ".join(m.group(0).split()) if m else ""
