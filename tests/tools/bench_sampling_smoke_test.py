#!/usr/bin/env python3
"""tools/bench_sampling.py end to end on tiny models (--tiny), as the GPU session's `sampling` phase runs
it on 124M-sized ones: it trains each family a step, samples through the cache and by windows (80
tokens pass the tiny context of 64, so the window slides), prints its table and writes a JSON with
every row's wall and generation seconds and tokens/s, the generation's read from the line `zerotrain
sample` prints on stderr. No speed is asserted (benchmarks report; tests do not time).

usage: bench_sampling_smoke_test.py PATH/TO/zerotrain
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402
from tool_run_util import run_tool_json  # noqa: E402


def main():
    binary = sys.argv[1]
    checks = Checks()
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "sampling.json")
        result, p = run_tool_json(checks, [sys.executable, os.path.join(ROOT, "tools", "bench_sampling.py"),
                                           "--zerotrain", binary, "--tiny", "--tokens", "4", "80", "--rounds", "1",
                                           "--out", out], out, timeout=300)
        if result is None:
            return checks.finish()
        rows = [(name, r) for name, m in result["models"].items() for r in m["rows"]]
        checks.check(len(result["models"]) == 2 and len(rows) == 4, f"two families, two lengths each ({list(result['models'])})")
        keys = ("cached_s", "window_s", "cached_generate_s", "window_generate_s", "cached_tokens_per_s",
                "window_tokens_per_s", "same_text")
        checks.check(all(all(k in r for k in keys) and r["cached_tokens_per_s"] > 0 and
                         r["cached_generate_s"] <= r["cached_s"] for _, r in rows),
                     "each row has its wall and generation seconds and tokens/s, the generation within the wall clock")
        checks.check(result["device"] == "cpu" and "cached tok/s" in p.stdout,
                     "the table is printed")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
