#!/usr/bin/env python3
"""tools/torch_compile_cache.py on a made-up cache folder: `save` packs it without Triton's cache,
lock files or its own notes, with a manifest; `seed` unpacks that into a fresh folder byte for
byte; a save with nothing new since the seed writes nothing, a new file makes it write again; an
archive over --max-bytes is not written (and no partial file is left); a missing archive, a corrupt
one and one whose member would land outside the folder each exit 1 with one line naming the
archive, and write nothing outside the folder."""
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402

TOOL = os.path.join(ROOT, "tools", "torch_compile_cache.py")


def run(*args):
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True, timeout=60)


def write(folder, rel, data):
    path = os.path.join(folder, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def tree(folder):
    out = {}
    for top, _, names in os.walk(folder):
        for n in names:
            path = os.path.join(top, n)
            out[os.path.relpath(path, folder)] = open(path, "rb").read()
    return out


def main():
    c = Checks()
    with tempfile.TemporaryDirectory() as d:
        cache = os.path.join(d, "cache")
        kept = {"aotautograd/ab/entry": os.urandom(3000), "fxgraph/cd/entry": os.urandom(5000),
                "xy/cxy.py": b"# generated kernel source\n", "xy/cxy.best_config": b"{}"}
        for rel, data in kept.items():
            write(cache, rel, data)
        write(cache, "triton/0/hash/kernel.cubin", os.urandom(200000))
        write(cache, "fxgraph/cd/entry.lock", b"")
        write(cache, "locks/abc", b"")
        archive = os.path.join(d, "out", "cache.tar.gz")
        os.makedirs(os.path.dirname(archive))

        r = run("save", cache, "--out", archive, "--device", "nvidia_h200", "--commit", "f" * 40)
        c.check(r.returncode == 0 and os.path.isfile(archive), f"save writes the archive ({r.stdout.strip()} {r.stderr.strip()})")
        c.check("4 files (4 new)" in r.stdout, f"save counts the 4 kept files ({r.stdout.strip()})")
        with tarfile.open(archive) as tar:
            names = set(tar.getnames())
            manifest = json.load(tar.extractfile("zt_cache_manifest.json"))
        c.check(names == set(kept) | {"zt_cache_manifest.json"},
                f"the archive holds the kept files and the manifest only, no triton/ or locks ({sorted(names)})")
        c.check(manifest.get("device") == "nvidia_h200" and manifest.get("commit") == "f" * 40 and
                manifest.get("files") == 4 and manifest.get("excluded") == ["triton/"],
                f"the manifest names device, commit, files and what it leaves out ({manifest})")

        fresh = os.path.join(d, "fresh")
        r = run("seed", archive, "--into", fresh)
        c.check(r.returncode == 0 and "seeded" in r.stdout and "4 files" in r.stdout and "nvidia_h200" in r.stdout,
                f"seed unpacks and says what it unpacked ({r.stdout.strip()} {r.stderr.strip()})")
        got = {k: v for k, v in tree(fresh).items() if k != ".zt_seeded"}
        c.check(got == kept, "the seeded folder holds the kept files byte for byte (and not the manifest)")

        again = os.path.join(d, "out", "again.tar.gz")
        r = run("save", fresh, "--out", again)
        c.check(r.returncode == 0 and not os.path.exists(again) and "none new" in r.stdout,
                f"a save with nothing new since the seed writes nothing ({r.stdout.strip()})")
        write(fresh, "zt_warm_autotune.json", b'{"tuned_beside": "tests multirank"}')
        r = run("save", fresh, "--out", again)
        c.check(r.returncode == 0 and not os.path.exists(again) and "none new" in r.stdout,
                f"gpu_session.sh's marker alone is nothing new either ({r.stdout.strip()})")
        write(fresh, "fxgraph/ef/entry", b"another graph")
        write(fresh, "triton/0/other/kernel.cubin", b"not packed")
        r = run("save", fresh, "--out", again)
        c.check(r.returncode == 0 and os.path.isfile(again) and "6 files (1 new)" in r.stdout,
                f"a new cache entry makes it write again ({r.stdout.strip()})")

        small = os.path.join(d, "out", "small.tar.gz")
        r = run("save", cache, "--out", small, "--max-bytes", "1000")
        c.check(r.returncode == 0 and "not written" in r.stdout and not os.path.exists(small) and
                not os.path.exists(small + ".partial"), f"an archive over --max-bytes is not written ({r.stdout.strip()})")
        r = run("save", os.path.join(d, "nothing"), "--out", small)
        c.check(r.returncode == 0 and "nothing to write" in r.stdout and not os.path.exists(small),
                "a cache folder that was never made: nothing to write, exit 0")

        for name, make in (("missing.tar.gz", None), ("corrupt.tar.gz", b"not a tar archive at all"),
                           ("escape.tar.gz", "../outside"), ("link.tar.gz", "link")):
            path = os.path.join(d, name)
            if isinstance(make, bytes):
                write(d, name, make)
            elif make is not None:
                with tarfile.open(path, "w:gz") as tar:
                    info = tarfile.TarInfo(make)
                    if make == "link":
                        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                        tar.addfile(info)
                    else:
                        info.size = 4
                        tar.addfile(info, io.BytesIO(b"evil"))
            target = os.path.join(d, "bad_into", "cache")
            r = run("seed", path, "--into", target)
            lines = r.stderr.strip().splitlines()
            c.check(r.returncode == 1 and len(lines) == 1 and name in lines[0] and "Traceback" not in r.stderr,
                    f"seed {name}: exit 1 with one line naming the archive ({r.stderr.strip()})")
        c.check(not os.path.exists(os.path.join(d, "bad_into", "outside")),
                "a member naming ../ wrote nothing outside the cache folder")
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
