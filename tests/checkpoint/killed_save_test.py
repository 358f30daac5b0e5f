#!/usr/bin/env python3
"""A save killed with SIGKILL (inside the test hook's pause, after its rank file and before the
manifest and rename) leaves the previous checkpoint loadable and `latest` naming it; the next
save cleans up the leftovers; a corrupt newest checkpoint makes `ckpt verify FOLDER` fail (it judges
the one `latest` names) with one line naming the file and the older checkpoint a resume would fall
back to, and `ckpt verify` of that checkpoint itself fail likewise (a resume's fallback, which
checks every checksum, is tested in tests/checkpoint/checkpoint_folder_test.cpp).

usage: killed_save_test.py --zerotrain PATH --driver PATH
"""
import argparse
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from check_report import Checks  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zerotrain", required=True)
    parser.add_argument("--driver", required=True)
    args = parser.parse_args()
    checks = Checks()
    work = checks.work_folder("zt_killed_save_")
    folder = os.path.join(work, "checkpoints")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_"))}

    def driver(*a, extra_env=None):
        return subprocess.run([args.driver, *map(str, a)], capture_output=True, text=True, timeout=60,
                              env={**env, **(extra_env or {})})

    def ckpt(*a):
        return subprocess.run([args.zerotrain, "ckpt", *map(str, a)], capture_output=True, text=True, timeout=60)

    checks.check(driver("save", folder, "--stage", 0, "--step", 1, "--table", "big").returncode == 0, "step 1 saved")

    # Step 2 pauses after writing its rank file; it is killed there.
    proc = subprocess.Popen([args.driver, "save", folder, "--stage", "0", "--step", "2", "--table", "big"],
                            env={**env, "ZT_TEST_CHECKPOINT_PAUSE_MS": "60000"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    partial = os.path.join(folder, ".tmp-step_00000002", "rank_00000.bin")
    deadline = time.time() + 30
    while time.time() < deadline and not (os.path.exists(partial) and os.path.getsize(partial) > 0):
        time.sleep(0.05)
    time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    checks.check(proc.returncode == -signal.SIGKILL, f"the save of step 2 was killed mid-save (rc {proc.returncode})")
    checks.check(os.path.exists(partial), "the killed save left its temporary directory")
    checks.check(not os.path.exists(os.path.join(folder, "step_00000002")), "no step_00000002 appeared")
    with open(os.path.join(folder, "latest")) as f:
        checks.check(f.read().strip() == "step_00000001", "latest still names step_00000001")
    v = ckpt("verify", folder)
    checks.check(v.returncode == 0 and "step_00000001" in v.stdout and not v.stderr,
                 f"ckpt verify FOLDER: step 1 valid, no fallback needed (rc {v.returncode}: {v.stdout}{v.stderr})")
    loaded = driver("load", folder, "--stage", 0, "--table", "big")
    checks.check(loaded.returncode == 0 and "step_00000001" in loaded.stdout and "exact" in loaded.stdout,
                 f"step 1 loads bit-exact after the kill: {loaded.stdout.strip()} {loaded.stderr.strip()}")

    again = driver("save", folder, "--stage", 0, "--step", 2, "--table", "big")
    checks.check(again.returncode == 0, "step 2 saved again after the kill")
    checks.check(not os.path.exists(os.path.dirname(partial)), "the next save removed the leftover directory")
    with open(os.path.join(folder, "latest")) as f:
        checks.check(f.read().strip() == "step_00000002", "latest names step_00000002")

    # Corrupt the newest: verifying the folder fails on it, naming the fallback; the checkpoint
    # itself is refused.
    newest = os.path.join(folder, "step_00000002", "rank_00000.bin")
    with open(newest, "r+b") as f:
        f.seek(1 << 20)  # inside the second checksum chunk
        byte = f.read(1)
        f.seek(1 << 20)
        f.write(bytes([byte[0] ^ 0x01]))
    v = ckpt("verify", folder)
    lines = v.stderr.strip().splitlines()
    checks.check(v.returncode == 2 and len(lines) == 1
                 and "rank_00000.bin: checksum mismatch in bytes [1048576, 2097152)" in lines[0]
                 and "fall back to " + os.path.join(folder, "step_00000001") in lines[0],
                 f"ckpt verify FOLDER fails on the damaged step 2 latest names, naming the bad file and the fallback "
                 f"({v.stdout.strip()} | {v.stderr.strip()})")
    v = ckpt("verify", os.path.join(folder, "step_00000002"))
    lines = v.stderr.strip().splitlines()
    checks.check(v.returncode == 2 and len(lines) == 1 and "rank_00000.bin: checksum mismatch" in lines[0],
                 f"ckpt verify CHECKPOINT: exit 2, one line naming the file ({v.returncode}: {v.stderr.strip()})")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
