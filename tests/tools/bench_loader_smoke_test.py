#!/usr/bin/env python3
"""tools/zt_bench_loader on a small corpus (20 MB of generated shards): it runs, prints its table,
and writes a JSON result with a sequential epoch and a run of random windows over a tenth of the
shards and over all of them, each with its tokens/s and resident memory, the tokens an epoch reads
equal to the shards' windows, and the shards removed afterwards. No speed is asserted (benchmarks
report; tests do not time).

usage: bench_loader_smoke_test.py PATH/TO/zt_bench_loader
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402
from tool_run_util import run_tool_json  # noqa: E402


def main():
    binary = sys.argv[1]
    checks = Checks()
    with tempfile.TemporaryDirectory() as work:
        shards, out = os.path.join(work, "shards"), os.path.join(work, "loader.json")
        report, p = run_tool_json(checks, [binary, "--gb", "0.02", "--shard-tokens", "1000000", "--random-windows",
                                           "4096", "--dir", shards, "--out", out, "--commit", "test"], out, timeout=300)
        if report is None:
            return checks.finish()
        rows = report["rows"]
        checks.check([(r["read"], r["shards"]) for r in rows] ==
                     [("sequential epoch", 1), ("random windows", 1), ("sequential epoch", 10),
                      ("random windows", 10)], f"four reads over 1 and 10 shards ({[r['read'] for r in rows]})")
        # Each 1M-token shard holds (1M - 1) // 1024 = 976 windows; an epoch reads whole batches of 16.
        checks.check(rows[2]["tokens_read"] == 9760 // 16 * 16 * 1024 and rows[3]["tokens_read"] == 4096 * 1024,
                     f"an epoch reads every window ({rows[2]['tokens_read']}), random reads what was asked")
        checks.check(all(r["tokens_per_s"] > 0 and r["rss_peak_bytes"] >= r["rss_before_bytes"] > 0 for r in rows),
                     "each read has its tokens/s and resident memory")
        checks.check("slowest:" in p.stdout and "tokens/s" in p.stdout, "the table is printed")
        checks.check(not os.path.exists(shards), "the generated shards are removed")
    p = subprocess.run([binary, "--gb", "-1"], capture_output=True, text=True, timeout=60)
    checks.check(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, "a bad argument: one line, exit 2")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
