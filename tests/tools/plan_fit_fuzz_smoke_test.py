#!/usr/bin/env python3
"""tools/plan_fit_fuzz.py end to end on two picks: each is planned, trained under mpirun (2 steps,
the final evaluation, a sample, the final gather) and its whole run's peak set beside the budget it
was planned for (the categories' sum at its highest moment), in a table and a JSON with every
pick's budget, requirement, choice and peak; and one pick with --choices, whose run scores a
multiple-choice file. The picks must fit: a pick over its budget fails the test. Bad arguments
exit 2 with one line and write nothing.

usage: plan_fit_fuzz_smoke_test.py PATH/TO/zerotrain
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402
from tool_run_util import run_tool_json  # noqa: E402

TOOL = os.path.join(ROOT, "tools", "plan_fit_fuzz.py")


def main():
    binary = sys.argv[1]
    checks = Checks()
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "fuzz.json")
        doc, p = run_tool_json(checks, [sys.executable, TOOL, "--zerotrain", binary, "--picks", "2", "--seed", "3",
                                        "--out", out], out, timeout=600)
        if doc is None:
            return checks.finish()
        rows = doc["results"]["zerotrain"]
        checks.check(len(rows) == 2 and all("peak_bytes" in r for r in rows),
                     f"both picks trained ({[r.get('error') for r in rows]})")
        checks.check(rows and all("pick" in r and r["pick"] and 0 < r["required_bytes"] <= r["budget_bytes"]
                                  for r in rows),
                     "each pick's requirement is within its budget")
        checks.check(doc["summary"]["zerotrain"]["runs"] == 2 and doc["summary"]["zerotrain"]["over"] == 0,
                     f"no pick over its budget ({[(r.get('peak_bytes'), r.get('budget_bytes')) for r in rows]})")
        checks.check(os.path.exists(os.path.splitext(out)[0] + ".md")
                     and "| zerotrain | total_peak | 2 | 0 |" in p.stdout,
                     "the table is printed and written beside the JSON, measured by the peak total")
        # With a multiple-choice file nearly as long as the context: scored, and within the budget.
        out = os.path.join(work, "fuzz_choices.json")
        doc, _ = run_tool_json(checks, [sys.executable, TOOL, "--zerotrain", binary, "--picks", "1", "--seed", "3",
                                        "--choices", "--out", out], out, timeout=600, what="--choices: it runs")
        rows = doc["results"]["zerotrain"] if doc else []
        checks.check(len(rows) == 1 and rows[0].get("choices_scored") == 8 and rows[0].get("over") is False,
                     f"--choices: the pick scored its 8 examples within its budget ({rows})")
        bad_args = ((["--picks", "0"], "--picks 0"), (["--zerotrain", os.path.join(work, "none")], "a missing binary"))
        for args, what in bad_args:
            bad_out = os.path.join(work, "bad.json")
            p = subprocess.run([sys.executable, TOOL, "--out", bad_out, *args], capture_output=True, text=True,
                               timeout=60)
            checks.check(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and not os.path.exists(bad_out),
                         f"{what}: exit 2, one line, nothing written ({p.returncode}: {p.stderr.strip()[:200]})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
