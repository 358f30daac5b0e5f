#!/usr/bin/env python3
"""Two zt_bench_kernels results side by side: each kernel row's median time in a baseline file and
in a new one, the new over the baseline, and the rows that got slower by more than a threshold, so a
GPU session sees at once which kernel changes to keep (docs/performance.md keeps only what a GPU
measured faster). Rows are matched by name; a row in one file only is listed as such. Both files
must come from the same device (the tool refuses otherwise: a ratio across cards says nothing).
Then the new file's variants side by side: rows whose names differ only by a trailing
parenthesised tag ("layernorm_backward bf16" and "layernorm_backward bf16 (warp a row)"; "... (bias
kernels)" and "... (bias epilogue)") are timings of alternatives in one run, each given over the
fastest of its group, which says which one a kernel's default should be.

usage: python3 tools/kernel_bench_delta.py BASELINE.json NEW.json [--slower 1.05] [--out DELTA.json]
Exit 0 (slower rows are reported, not an error); 2 with one line on a missing or malformed file.
"""
import argparse
import json
import sys


def fail(msg):
    print(f"kernel_bench_delta: {msg}", file=sys.stderr)
    sys.exit(2)


def load(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    except json.JSONDecodeError as e:
        fail(f"{path}: not JSON ({e.msg} at line {e.lineno})")
    rows = data.get("kernels") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        fail(f"{path}: no 'kernels' list (not a zt_bench_kernels result)")
    times = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or "name" not in row:
            continue  # the GPU state record at the end of the list
        ms = row.get("median_ms")
        if not isinstance(ms, (int, float)) or ms <= 0:
            fail(f"{path}: kernels[{i}] ({row['name']}) has no positive median_ms")
        times[row["name"]] = float(ms)
    return data, times


def variant_groups(times):
    """{stem: [(name, ms), ...]} for the stems (a name less a trailing ' (...)') with two or more rows."""
    groups = {}
    for name, ms in times.items():
        stem = name[:name.rindex(" (")] if name.endswith(")") and " (" in name else name
        groups.setdefault(stem, []).append((name, ms))
    return {stem: rows for stem, rows in groups.items() if len(rows) > 1}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("baseline")
    p.add_argument("new")
    p.add_argument("--slower", type=float, default=1.05, help="new/baseline above which a row is flagged")
    p.add_argument("--out", help="write the rows and ratios as JSON here")
    a = p.parse_args()
    base, base_ms = load(a.baseline)
    new, new_ms = load(a.new)
    if base.get("device") != new.get("device"):
        fail(f"{a.baseline} is from {base.get('device')!r}, {a.new} from {new.get('device')!r}")
    rows, slower = [], []
    for name in list(base_ms) + [n for n in new_ms if n not in base_ms]:
        b, n = base_ms.get(name), new_ms.get(name)
        ratio = n / b if b is not None and n is not None else None
        rows.append({"name": name, "baseline_ms": b, "new_ms": n, "new_over_baseline": ratio})
        if ratio is not None and ratio > a.slower:
            slower.append(name)
    width = max(len(r["name"]) for r in rows) if rows else 4
    print(f"zt_bench_kernels on {new.get('device')}: {str(new.get('commit', '?'))[:7]} against "
          f"{str(base.get('commit', '?'))[:7]} (median ms; flagged above {a.slower}x)")
    for r in rows:
        b = f"{r['baseline_ms']:.4f}" if r["baseline_ms"] is not None else "-"
        n = f"{r['new_ms']:.4f}" if r["new_ms"] is not None else "-"
        ratio = f"{r['new_over_baseline']:.3f}x" if r["new_over_baseline"] is not None else \
            ("only in new" if r["baseline_ms"] is None else "only in baseline")
        flag = "  SLOWER" if r["name"] in slower else ""
        print(f"  {r['name']:<{width}}  {b:>9}  {n:>9}  {ratio}{flag}")
    print(f"{len(slower)} slower: {', '.join(slower)}" if slower else "none slower")
    variants = []
    for stem, group in variant_groups(new_ms).items():
        fastest = min(ms for _, ms in group)
        variants.append({"stem": stem, "rows": [{"name": n, "ms": ms, "over_fastest": ms / fastest} for n, ms in group],
                         "fastest": min(group, key=lambda r: r[1])[0]})
    if variants:
        print("variants in the new run (median ms; over the fastest of each group):")
        for v in variants:
            for r in v["rows"]:
                mark = "  FASTEST" if r["name"] == v["fastest"] else ""
                print(f"  {r['name']:<{width}}  {r['ms']:>9.4f}  {r['over_fastest']:.3f}x{mark}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"device": new.get("device"), "baseline_commit": base.get("commit"),
                       "new_commit": new.get("commit"), "slower_threshold": a.slower, "rows": rows,
                       "slower": slower, "variants": variants}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
