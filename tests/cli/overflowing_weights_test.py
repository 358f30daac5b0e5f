#!/usr/bin/env python3
"""Finite weights whose forward overflows (a Hugging Face folder whose final norm's gain is 3e38):
`zerotrain eval` over a choice file and over a token file, and `zerotrain sample`, each end with
one line saying the forward overflowed and exit 1, printing no score, loss or text. Before, eval
printed a NaN loss, and a choice score in which every NaN comparison fell to the first completion,
with exit 0. The same folder unchanged is scored (the check is not what refuses).

usage: overflowing_weights_test.py PATH/TO/zerotrain
"""
import json
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from check_report import Checks  # noqa: E402
from choice_file_util import write_choice_file  # noqa: E402

CONFIG = {"model": {"n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 16, "vocab_size": 64},
          "train": {"micro_batch": 2, "max_steps": 1, "num_threads": 1},
          "checkpoint": {"at_end": True}, "log": {"sample_tokens": 0, "progress": "plain"}}


def set_tensor(path, name, value):
    """Writes `value` into every element of the F32 tensor `name` of a safetensors file in place."""
    with open(path, "r+b") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        entry = header[name]
        assert entry["dtype"] == "F32", entry
        begin, end = entry["data_offsets"]
        f.seek(8 + header_len + begin)
        f.write(struct.pack(f"<{(end - begin) // 4}f", *([value] * ((end - begin) // 4))))


def main():
    binary = sys.argv[1]
    checks = Checks()
    work = checks.work_folder("zt_overflow_")
    config = os.path.join(work, "config.json")
    with open(config, "w") as f:
        json.dump(CONFIG, f)
    run_dir = os.path.join(work, "run")
    p = subprocess.run([binary, "train", "--config", config, "--run-dir", run_dir], capture_output=True, text=True,
                       timeout=300)
    checks.check(p.returncode == 0, f"a tiny run trains and saves ({p.stderr.strip()[-300:]})")
    sound, hot = os.path.join(work, "hf"), os.path.join(work, "hf_overflowing")
    for out in (sound, hot):
        p = subprocess.run([binary, "ckpt", "export", os.path.join(run_dir, "checkpoints"), "--format", "hf", "--out",
                            out], capture_output=True, text=True, timeout=300)
        checks.check(p.returncode == 0, f"exports to {os.path.basename(out)} ({p.stderr.strip()[-300:]})")
    set_tensor(os.path.join(hot, "model.safetensors"), "transformer.ln_f.weight", 3e38)

    choices = os.path.join(work, "choices.bin")
    write_choice_file(choices, [(i % 3, [1 + i, 2, 3], [[4, 5], [6 + i], [7, 8, 9]]) for i in range(6)])
    tokens = os.path.join(work, "tokens.bin")
    with open(tokens, "wb") as f:  # llm.c's token file: a 256-int32 header, then uint16 ids
        ids = [(7 * i) % 64 for i in range(200)]
        f.write(struct.pack("<256i", 20240520, 1, len(ids), *([0] * 253)))
        f.write(struct.pack(f"<{len(ids)}H", *ids))
    commands = {
        "eval --choices": ["eval", "--choices", choices],
        "eval --tokens": ["eval", "--tokens", tokens, "--windows", "2", "--seq-len", "16"],
        "sample": ["sample", "--tokens", "4"],
    }
    for what, args in commands.items():
        good = subprocess.run([binary, *args, "--from", sound], capture_output=True, text=True, timeout=300)
        bad = subprocess.run([binary, *args, "--from", hot], capture_output=True, text=True, timeout=300)
        lines = [line for line in bad.stderr.splitlines() if line.strip()]
        checks.check(good.returncode == 0 and good.stdout.strip() != "",
                     f"{what}: the sound export scores ({good.returncode}: {good.stdout.strip()[-120:]} "
                     f"{good.stderr.strip()[-200:]})")
        checks.check(bad.returncode == 1 and len(lines) == 1 and "overflowed" in lines[0] and bad.stdout.strip() == "",
                     f"{what}: the overflowing export ends with one line, exit 1, nothing printed "
                     f"({bad.returncode}: {lines}; stdout {bad.stdout.strip()[-120:]!r})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
