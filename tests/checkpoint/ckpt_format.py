"""An independent Python reader of docs/checkpoint_format.md (numpy only): the test drivers use it
to check what the engine wrote without going through the engine's own reader."""
import json
import os

import numpy as np

STATES = ("master", "exp_avg", "exp_avg_sq")


def read_units(ckpt_dir):
    """(manifest, {state: [one fp32 array per unit]}) assembled from every rank file's segments."""
    with open(os.path.join(ckpt_dir, "manifest.json")) as f:
        manifest = json.load(f)
    units = {s: [np.zeros(u["numel"], np.float32) for u in manifest["units"]] for s in STATES}
    for entry in manifest["files"]:
        with open(os.path.join(ckpt_dir, entry["name"]), "rb") as f:
            blob = f.read()
        for s in entry["segments"]:
            n = s["end"] - s["begin"]
            units[s["state"]][s["unit"]][s["begin"]:s["end"]] = np.frombuffer(blob, "<f4", n, s["offset"])
    return manifest, units


def read_master(ckpt_dir):
    """(manifest, {parameter name: fp32 array in its stored shape}) of the master weights; a tensor
    split by rows across units (row parts, `row_offset`) is put back together in row order."""
    manifest, units = read_units(ckpt_dir)
    parts = {}
    for p in manifest["params"]:
        n = int(np.prod(p["shape"]))
        rows = units["master"][p["unit"]][p["offset"]:p["offset"] + n].reshape(p["shape"])
        parts.setdefault(p["name"], []).append((p.get("row_offset", 0), rows))
    out = {name: np.concatenate([r for _, r in sorted(ps, key=lambda x: x[0])]) if len(ps) > 1 else ps[0][1]
           for name, ps in parts.items()}
    return manifest, out
