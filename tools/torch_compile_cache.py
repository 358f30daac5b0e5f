#!/usr/bin/env python3
"""torch.compile's caches for the PyTorch anchors on a lent GPU, kept from one lease to the next.

The anchors of tools/bench_gpu.py and tools/bench_llama_gpu.py compile before they run: about 40 s
for GPT-2 under torch.compile's defaults and 25 s for FSDP2's Llama on the H200, and more than
200 s under mode="max-autotune", which is why that anchor has never fitted into a lease. Every lease
starts on a bare machine, so each paid it again. PyTorch keeps what it compiled in
TORCHINDUCTOR_CACHE_DIR (the AOTAutograd and FX-graph caches, the autotuning results, the generated
code) and validates every entry against its own version, the GPU and the graph, so a cache made on
one machine of a kind serves the next: a hit skips the compile (and max-autotune's tuning) and runs
the same kernels; a miss compiles as before. The workers report their cache hits and misses with
their start-up time, so a result says which it was (tools/bench_gpu_torch.py: compile_cache).

  seed ARCHIVE --into DIR    unpack a cache written by `save` (members must stay inside DIR) and
                             record what DIR then holds, so `save` can tell what is new
  save DIR --out ARCHIVE     pack DIR, without Triton's own cache (triton/: per-kernel IR and
                             binaries, rebuilt from the cached code; the bulk of the size), when it
                             holds anything `seed` did not put there, and the archive is at most
                             --max-bytes; otherwise writes nothing and says why

tools/gpu_session.sh seeds from tools/torch_compile_cache/<device>.tar.gz before its phases and saves
into $OUT after them; that archive, committed, is what the next lease starts from
(tools/torch_compile_cache/README.md). Exit status: 0 (including "nothing to write"), 1 on bad input.
"""
import argparse
import datetime
import importlib.metadata
import io
import json
import os
import sys
import tarfile

MANIFEST = "zt_cache_manifest.json"
SEEDED = ".zt_seeded"  # what `seed` left in the cache folder: relative path -> size
NOTES = ("zt_warm_autotune.json",)  # notes kept with a cache, never a reason alone to write one
EXCLUDED_TOP = ("triton",)
DEFAULT_MAX_BYTES = 12 << 20  # under the device tool's 16 MiB a file, beside the pack in 64 MiB


def fail(msg):
    print(f"torch_compile_cache: error: {msg}", file=sys.stderr)
    sys.exit(1)


def kept(rel):
    """Whether a file of the cache goes into the archive: not Triton's, no locks, not our own notes."""
    parts = rel.split(os.sep)
    if parts[0] in EXCLUDED_TOP or rel in (SEEDED, MANIFEST):
        return False
    return not (parts[-1].endswith(".lock") or "locks" in parts[:-1])


def listing(folder):
    """{relative path: size} of the files under folder that an archive would hold."""
    files = {}
    for top, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(top, name)
            rel = os.path.relpath(path, folder)
            if os.path.isfile(path) and not os.path.islink(path) and kept(rel):
                files[rel] = os.path.getsize(path)
    return files


def torch_version():
    """The installed torch's version (with its CUDA tag, e.g. 2.11.0+cu130) from its package metadata:
    importing torch would cost seconds of the session's set-up; None where there is none."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def seed(archive, into):
    if not os.path.isfile(archive):
        fail(f"{archive}: no such archive")
    os.makedirs(into, exist_ok=True)
    root = os.path.realpath(into)
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = tar.getmembers()
            for m in members:
                target = os.path.realpath(os.path.join(root, m.name))
                if not (m.isfile() or m.isdir()) or os.path.commonpath([root, target]) != root:
                    fail(f"{archive}: member {m.name!r} is not a plain file or folder inside the cache")
            manifest = {}
            if MANIFEST in tar.getnames():
                manifest = json.load(tar.extractfile(MANIFEST))
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # checked above as well
            tar.extractall(root, members=[m for m in members if m.name != MANIFEST], **safe)
    except (tarfile.TarError, OSError, EOFError, json.JSONDecodeError) as e:
        fail(f"{archive}: not a readable cache archive ({e})")
    files = listing(root)
    with open(os.path.join(root, SEEDED), "w") as f:
        json.dump(files, f)
    here = torch_version()
    made = ", ".join(f"{k} {manifest[k]}" for k in ("written", "torch", "device", "commit") if manifest.get(k))
    mismatch = ""
    if manifest.get("torch") and here and manifest["torch"] != here:
        mismatch = f"; this machine has torch {here}, so expect misses"
    print(f"torch compile cache: seeded {root} from {archive} ({len(files)} files, "
          f"{sum(files.values()) / 2**20:.1f} MiB; {made or 'no manifest'}){mismatch}")


def save(folder, out, max_bytes, device, commit):
    if not os.path.isdir(folder):
        print(f"torch compile cache: nothing to write ({folder} does not exist: nothing was compiled)")
        return
    files = listing(folder)
    seeded = {}
    seeded_path = os.path.join(folder, SEEDED)
    if os.path.isfile(seeded_path):
        with open(seeded_path) as f:
            seeded = json.load(f)
    # A note beside the cache (tools/gpu_session.sh --warm-autotune's marker) travels with it but is not
    # itself something compiled.
    new = [rel for rel in files if rel not in seeded and rel not in NOTES]
    if not new:
        print(f"torch compile cache: nothing to write ({len(files)} files, none new since it was seeded)")
        return
    manifest = {"written": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "torch": torch_version(), "device": device, "commit": commit, "files": len(files),
                "bytes": sum(files.values()), "excluded": [f"{t}/" for t in EXCLUDED_TOP]}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        data = json.dumps(manifest, indent=1).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size, info.mtime = len(data), int(datetime.datetime.now().timestamp())
        tar.addfile(info, io.BytesIO(data))
        for rel in sorted(files):
            tar.add(os.path.join(folder, rel), arcname=rel, recursive=False)
    size = buf.tell()
    what = f"{len(files)} files ({len(new)} new), {manifest['bytes'] / 2**20:.1f} MiB -> {size / 2**20:.1f} MiB packed"
    if size > max_bytes:
        print(f"torch compile cache: not written: {what}, over the {max_bytes / 2**20:.1f} MiB limit")
        return
    tmp = out + ".partial"
    with open(tmp, "wb") as f:
        f.write(buf.getvalue())
    os.replace(tmp, out)
    print(f"torch compile cache: wrote {out}: {what}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="verb", required=True)
    s = sub.add_parser("seed")
    s.add_argument("archive")
    s.add_argument("--into", required=True)
    v = sub.add_parser("save")
    v.add_argument("folder")
    v.add_argument("--out", required=True)
    v.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES)
    v.add_argument("--device", default=None, help="recorded in the manifest")
    v.add_argument("--commit", default=None, help="recorded in the manifest")
    a = ap.parse_args()
    if a.verb == "seed":
        seed(a.archive, a.into)
    else:
        save(a.folder, a.out, a.max_bytes, a.device, a.commit)


if __name__ == "__main__":
    main()
