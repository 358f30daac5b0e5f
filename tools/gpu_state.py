#!/usr/bin/env python3
"""The GPU's state as nvidia-smi reads it, recorded beside every benchmark figure: SM and memory
clocks (current and maximum), power draw and limit, temperature, performance state and the active
clock-throttle reasons, so a slow figure can be told from a throttled card. Read only: the card's
settings are never changed.

As a library: gpu_state() -> {field: value} (or {"error": ...} where nvidia-smi is missing or fails);
GpuSampler samples the clocks, power and temperature while a block runs.
As a command: prints that JSON on one line; `--into FILE.json KEY` adds it to FILE's object under KEY
(a list, appended to), so the session can stamp a C++ benchmark's result file too.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading

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


# Sampled while a benchmark block runs (GpuSampler): what the between-block readings cannot show, as
# the card's power controller settles within a block of a second or two.
DURING_FIELDS = ["clocks.sm", "power.draw", "temperature.gpu", "clocks_throttle_reasons.active", "utilization.gpu"]


class GpuSampler:
    """`with GpuSampler() as s:` runs `nvidia-smi --loop-ms=PERIOD` beside the block and s.summary then
    holds the samples' SM clock (min, median, max), power and temperature peaks, median utilisation
    and every throttle-reason mask seen (or {"error": ...} without nvidia-smi)."""

    def __init__(self, period_ms=100):
        self.period_ms, self.lines, self.summary, self.proc, self.reader = period_ms, [], None, None, None

    def __enter__(self):
        smi = shutil.which("nvidia-smi")
        if smi is None:
            self.summary = {"error": "nvidia-smi not found"}
            return self
        self.proc = subprocess.Popen([smi, f"--query-gpu={','.join(DURING_FIELDS)}", "--format=csv,noheader,nounits",
                                      f"--loop-ms={self.period_ms}"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True)
        self.reader.start()
        return self

    def __exit__(self, *exc):
        if self.proc is None:
            return False
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.reader.join(timeout=5)
        self.summary = summarise_samples(self.lines)
        return False


def summarise_samples(lines):
    """DURING_FIELDS' CSV lines, one a sample, into the block's summary."""
    samples = []
    for line in lines:
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(DURING_FIELDS):
            continue
        try:
            samples.append((float(values[0]), float(values[1]), float(values[2]), values[3], float(values[4])))
        except ValueError:
            continue
    if not samples:
        return {"error": "no samples (a block shorter than the sampling period, or nvidia-smi failed)"}
    clocks = sorted(s[0] for s in samples)
    return {"samples": len(samples), "sm_clock_min": clocks[0], "sm_clock_median": statistics.median(clocks),
            "sm_clock_max": clocks[-1], "power_max": max(s[1] for s in samples),
            "temperature_max": max(s[2] for s in samples),
            "utilization_median": statistics.median(s[4] for s in samples),
            "throttle_reasons_seen": sorted({s[3] for s in samples})}


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
