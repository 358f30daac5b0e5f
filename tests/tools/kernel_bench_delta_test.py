#!/usr/bin/env python3
"""tools/kernel_bench_delta.py on synthetic zt_bench_kernels results: rows matched by name, the
ratio new over baseline, the rows above the threshold flagged (and only those), rows in one file
listed as such, the new run's variants (a stem and its tagged twins) each over the fastest, the
JSON written; a file of another device, a missing file, a non-JSON file and a
file without a 'kernels' list and a row of 0 ms each exit 2 with one line naming the file; a row
exactly at --slower is not flagged."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402

TOOL = os.path.join(ROOT, "tools", "kernel_bench_delta.py")


def result(path, device, commit, times):
    rows = [{"name": n, "median_ms": ms, "gbps": 1.0} for n, ms in times.items()]
    rows.append({"clocks.sm": 1980.0})  # the GPU state record zt_bench_kernels appends
    with open(path, "w") as f:
        json.dump({"device": device, "commit": commit, "kernels": rows}, f)


def run(*args):
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True, timeout=60)


def main():
    c = Checks()
    with tempfile.TemporaryDirectory() as d:
        base, new, other = (os.path.join(d, n) for n in ("base.json", "new.json", "other.json"))
        result(base, "NVIDIA H200", "a" * 40, {"ce bf16": 0.922, "ln bwd": 0.0256, "rope": 0.140, "gone": 1.0})
        result(new, "NVIDIA H200", "b" * 40, {"ce bf16": 0.450, "ln bwd": 0.0300, "rope": 0.141, "added": 2.0,
                                              "ln bwd (warp a row)": 0.0250, "fc (bias kernels)": 0.2,
                                              "fc (bias epilogue)": 0.1})
        result(other, "NVIDIA H100 80GB HBM3", "c" * 40, {"ce bf16": 1.0})
        out = os.path.join(d, "delta.json")
        r = run(base, new, "--out", out)
        c.check(r.returncode == 0, f"exit 0 (got {r.returncode}: {r.stderr.strip()})")
        table = r.stdout.split("variants in the new run")[0]  # the rows against the baseline
        lines = {line[2:].split("  ")[0].strip(): line for line in table.splitlines() if line.startswith("  ")}
        c.check("0.488x" in lines.get("ce bf16", ""), "ce bf16 at 0.450 / 0.922 = 0.488x")
        c.check("SLOWER" in lines.get("ln bwd", ""), "ln bwd (1.17x) flagged slower")
        c.check("SLOWER" not in lines.get("rope", "") and "1.007x" in lines.get("rope", ""),
                "rope at 1.007x, under the 1.05 threshold, not flagged")
        c.check("only in baseline" in lines.get("gone", ""), "a baseline-only row says so")
        c.check("only in new" in lines.get("added", ""), "a new-only row says so")
        c.check("1 slower: ln bwd" in r.stdout, "a closing line names the slower rows")
        variant_lines = r.stdout.split("variants in the new run")[-1].splitlines()
        c.check(any("ln bwd (warp a row)" in v and "1.000x" in v and "FASTEST" in v for v in variant_lines) and
                any(v.strip().startswith("ln bwd ") and "1.200x" in v for v in variant_lines),
                "variants: ln bwd at 1.200x its warp-a-row twin, the twin marked fastest")
        c.check(any("fc (bias epilogue)" in v and "FASTEST" in v for v in variant_lines) and
                any("fc (bias kernels)" in v and "2.000x" in v for v in variant_lines),
                "variants: two tagged rows of one stem compared, the faster marked")
        delta = json.load(open(out))
        c.check(delta["slower"] == ["ln bwd"] and len(delta["rows"]) == 8, "the JSON's rows and slower list")
        c.check(sorted(v["stem"] for v in delta["variants"]) == ["fc", "ln bwd"] and
                {v["stem"]: v["fastest"] for v in delta["variants"]}["ln bwd"] == "ln bwd (warp a row)",
                "the JSON's variant groups and their fastest rows")
        c.check(abs(delta["rows"][0]["new_over_baseline"] - 0.450 / 0.922) < 1e-12, "the JSON's ratio")
        r = run(base, new, "--slower", "1.2")
        c.check("none slower" in r.stdout, "a higher threshold flags nothing")
        at = os.path.join(d, "at.json")
        result(at, "NVIDIA H200", "d" * 40, {"ce bf16": 0.922 * 1.25})  # 1.25: exact in binary
        r = run(base, at, "--slower", "1.25")
        c.check(r.returncode == 0 and "none slower" in r.stdout, "a row at the threshold itself is not above it")
        bad_json = os.path.join(d, "bad.json")
        with open(bad_json, "w") as f:
            f.write("{not json")
        no_rows = os.path.join(d, "norows.json")
        with open(no_rows, "w") as f:
            json.dump({"device": "NVIDIA H200"}, f)
        zero = os.path.join(d, "zero.json")
        result(zero, "NVIDIA H200", "e" * 40, {"ce bf16": 0.0})  # a ratio over it would divide by zero
        for args, what, name in (((base, other), "another device", "other.json"),
                                 ((base, os.path.join(d, "missing.json")), "a missing file", "missing.json"),
                                 ((bad_json, new), "a file that is not JSON", "bad.json"),
                                 ((base, no_rows), "a file without kernels", "norows.json"),
                                 ((zero, new), "a row of 0 ms", "zero.json")):
            r = run(*args)
            err = r.stderr.strip().splitlines()
            c.check(r.returncode == 2 and len(err) == 1 and name in err[0] and "Traceback" not in r.stderr,
                    f"{what}: exit 2, one line naming it (got {r.returncode}: {r.stderr.strip()[:200]})")
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
