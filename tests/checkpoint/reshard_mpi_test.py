#!/usr/bin/env python3
"""Checkpoints saved by N MPI ranks at ZeRO stage s load bit-exact on M ranks at stage t: the
issue's pairs (4->2, 2->4, 3->2, 1->4, 4->1 across stage changes 3->0, 1->3, 2->2) and more, on a
table whose units divide by no rank count and on one whose rank files span several checksum
chunks. Each loading rank reports how many bytes it read; with M = N it must read no more than
its own file (resharding reads only the ranges it needs).

usage: reshard_mpi_test.py --driver PATH -- MPIRUN [MPIRUN FLAGS...]
"""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from check_report import Checks  # noqa: E402

# (table, saving ranks N, save stage s, loading ranks M, load stage t)
CASES = [
    ("odd", 4, 3, 2, 0), ("odd", 2, 1, 4, 3), ("odd", 3, 2, 2, 2), ("odd", 1, 0, 4, 1), ("odd", 4, 0, 1, 3),
    ("odd", 3, 3, 3, 1), ("odd", 2, 0, 3, 0), ("odd", 4, 2, 4, 2),
    ("big", 3, 1, 2, 3), ("big", 2, 2, 4, 0), ("big", 4, 3, 3, 2), ("big", 3, 2, 3, 3),
]


def main():
    argv = sys.argv[1:]
    split = argv.index("--")
    parser = argparse.ArgumentParser()
    parser.add_argument("--driver", required=True)
    args = parser.parse_args(argv[:split])
    mpirun = argv[split + 1:]
    checks = Checks()
    work = checks.work_folder("zt_reshard_")

    def launch(np_, *driver_args):
        cmd = mpirun + ["-np", str(np_), args.driver] + [str(a) for a in driver_args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    for i, (table, n, s, m, t) in enumerate(CASES):
        folder = os.path.join(work, f"case{i}")
        what = f"{table} table: saved by {n} ranks at stage {s}, loaded on {m} ranks at stage {t}"
        saved = launch(n, "save", folder, "--stage", s, "--step", 10 + i, "--table", table)
        if not checks.check(saved.returncode == 0, f"{what}: save exits 0" +
                            ("" if saved.returncode == 0 else f" (rc {saved.returncode}) {saved.stderr.strip()[-300:]}")):
            continue
        loaded = launch(m, "load", folder, "--stage", t, "--table", table)
        lines = [l for l in loaded.stdout.splitlines() if " loaded " in l]
        exact = loaded.returncode == 0 and len(lines) == m and all("exact" in l for l in lines)
        checks.check(exact, f"{what}: every rank's master, exp_avg, exp_avg_sq bit-exact" +
                     ("" if exact else f" (rc {loaded.returncode}) {loaded.stdout[-400:]} {loaded.stderr[-300:]}"))
        if n == m and s != 0 and t != 0:
            read = [int(re.search(r"read (\d+) bytes", l).group(1)) for l in lines]
            sizes = sorted(os.path.getsize(os.path.join(folder, f"step_{10 + i:08d}", f)) for f in
                           os.listdir(os.path.join(folder, f"step_{10 + i:08d}")) if f.startswith("rank_"))
            checks.check(sorted(read) == sizes, f"{what}: each rank reads exactly its own file ({read} vs {sizes})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
