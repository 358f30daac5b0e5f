#!/usr/bin/env python3
"""The GPU's state as nvidia-smi reads it, recorded beside every benchmark figure: SM and memory
clocks (current and maximum), power draw and limit, temperature, performance state and the active
clock-throttle reasons, so a slow figure can be told from a throttled card. Read only: the card's
settings are never changed.

As a library: gpu_state() -> {field: value} (or {"error": ...} where nvidia-smi is missing or fails).
As a command: prints that JSON on one line; `--into FILE.json KEY` adds it to FILE's object under KEY
(a list, appended to), so the session can stamp a C++ benchmark's result file too.
"""
import json
import os
import shutil
import subprocess
import sys

FIELDS = ["clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem", "power.draw", "power.limit",
          "temperature.gpu", "pstate", "clocks_throttle_reasons.active", "utilization.gpu", "memory.used"]


def gpu_state():
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return {"error": "nvidia-smi not found"}
    p = subprocess.run([smi, f"--query-gpu={','.join(FIELDS)}", "--format=csv,noheader,nounits"], capture_output=True,
                       text=True)
    if p.returncode != 0 or not p.stdout.strip():
        return {"error": f"nvidia-smi exit {p.returncode}: {(p.stdout + p.stderr).strip()[-300:]}"}
    values = [v.strip() for v in p.stdout.strip().splitlines()[0].split(",")]
    state = {}
    for field, value in zip(FIELDS, values):
        try:
            state[field] = float(value)
        except ValueError:
            state[field] = value
    return state


def main(argv):
    state = gpu_state()
    if len(argv) == 3 and argv[0] == "--into":
        path, key = argv[1], argv[2]
        with open(path) as f:
            doc = json.load(f)
        doc.setdefault(key, []).append(state)
        with open(path + ".tmp", "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(path + ".tmp", path)
        return 0
    if argv:
        print("usage: gpu_state.py [--into FILE.json KEY]", file=sys.stderr)
        return 2
    print(json.dumps(state))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
