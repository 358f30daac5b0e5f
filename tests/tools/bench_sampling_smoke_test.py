#!/usr/bin/env python3
"""tools/bench_sampling.py end to end on tiny models (--tiny), as the GPU session's `sampling` phase runs
it on 124M-sized ones: it trains each family a step, samples through the cache and by windows (80
tokens pass the tiny context of 64, so the window slides), prints its table and writes a JSON with
every row's wall and generation seconds and tokens/s, the generation's read from the line `zerotrain
sample` prints on stderr. No speed is asserted (benchmarks report; tests do not time). --help gives
every flag a meaning and its default (they were bare).

usage: bench_sampling_smoke_test.py PATH/TO/zerotrain
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402
from tool_run_util import flag_help, run_tool_json  # noqa: E402


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
    helped = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bench_sampling.py"), "--help"],
                            capture_output=True, text=True, timeout=60)
    bare = [flag for flag in ("--zerotrain", "--tokens", "--rounds", "--device", "--dtype", "--tiny", "--out")
            if "default" not in flag_help(helped.stdout, flag)]
    checks.check(helped.returncode == 0 and not bare and "Sampling through the key/value cache" in helped.stdout,
                 f"--help: a description and each flag's meaning and default (bare: {bare})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
