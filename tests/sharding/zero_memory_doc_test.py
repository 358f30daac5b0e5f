#!/usr/bin/env python3
"""Figures the docs quote from the binary are the binary's: docs/zero_memory.md's GPT-2 124M table
(bytes per rank, per category and stage, at 64 ranks) against `zerotrain memory --json` for the
command it names. The table went stale once (the largest kernel call's scratch joined workspace,
3 MiB, and every total moved) with nothing to notice it.

usage: zero_memory_doc_test.py PATH/TO/zerotrain
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from check_report import Checks  # noqa: E402

HEADING = "## GPT-2 124M (configs/gpt2_124m.json"
COMMAND = ["memory", "--config", os.path.join(ROOT, "configs", "gpt2_124m.json"), "--ranks", "64", "--set",
           "train.global_batch_tokens=1048576", "--json"]


def doc_table(text):
    """{category: [stage 0..3 bytes]} from the first table after HEADING."""
    section = text[text.index(HEADING):]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells is None:
            if rows:
                break
            continue
        if len(cells) == 5 and all(re.fullmatch(r"[\d,]+", c) for c in cells[1:]):
            rows[cells[0]] = [int(c.replace(",", "")) for c in cells[1:]]
    return rows


def main():
    binary = sys.argv[1]
    checks = Checks()
    with open(os.path.join(ROOT, "docs", "zero_memory.md")) as f:
        rows = doc_table(f.read())
    checks.check(len(rows) == 8, f"docs/zero_memory.md's GPT-2 124M table has 7 categories and a total ({sorted(rows)})")
    proc = subprocess.run([binary, *COMMAND], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        checks.check(False, f"zerotrain {' '.join(COMMAND[:1])} ran ({proc.returncode}: {proc.stderr.strip()[-300:]})")
        return checks.finish()
    stages = {s["stage"]: s for s in json.loads(proc.stdout)["stages"]}
    for category, doc in rows.items():
        binary_row = [stages[i]["total"] if category == "total" else stages[i]["bytes"][category] for i in range(4)]
        checks.check(doc == binary_row, f"{category}: the doc's {doc} are the binary's {binary_row}")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
