#!/usr/bin/env python3
"""`zerotrain ckpt` end to end on a GPT checkpoint written by several ranks:
  * the manifest and rank files, read by an independent Python reader of docs/checkpoint_format.md,
    hold the model's initial weights exactly as `zerotrain debug-state` has them;
  * `ckpt export --format hf` (fp32 and bf16) writes config.json for GPT2LMHeadModel and a
    model.safetensors with the true vocabulary whose tensors equal those weights (bf16: rounded to
    nearest even), and a plain PyTorch GPT-2 with HF semantics computes zerotrain's loss from it;
  * `ckpt export --format llmc` writes llm.c's header and tensors ([out, in] linear weights);
  * `ckpt inspect` / `ckpt verify` report and check; bad input is one line and exit code 2;
  * a failed export (a damaged checkpoint) leaves an earlier export where it writes unchanged.

usage: ckpt_cli_test.py --zerotrain PATH --driver PATH --config tiny_debug.json [-- MPIRUN FLAGS...]
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "parity"))
from check_report import Checks  # noqa: E402
import gpt2_reference as ref  # noqa: E402
from safetensors_io import read_safetensors  # noqa: E402
from ckpt_format import read_master  # noqa: E402

LOSS_RTOL = 1e-5  # fp32 engine vs float64 reference from the same weights (as tests/parity)


def bf16_round(a):
    return torch.from_numpy(np.ascontiguousarray(a)).to(torch.bfloat16).to(torch.float32).numpy()


def main():
    argv = sys.argv[1:]
    mpirun = argv[argv.index("--") + 1:] if "--" in argv else []
    parser = argparse.ArgumentParser()
    parser.add_argument("--zerotrain", required=True)
    parser.add_argument("--driver", required=True)
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    checks = Checks()
    work = checks.work_folder("zt_ckpt_cli_")
    folder = os.path.join(work, "checkpoints")
    ranks = 3 if mpirun else 1

    def run(cmd):
        return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120)

    def ckpt(*a):
        return run([args.zerotrain, "ckpt", *a])

    saved = run(mpirun + ["-np", str(ranks)] * bool(mpirun) + [args.driver, "save", folder, "--stage", 1, "--step", 3,
                                                                  "--model-config", args.config])
    if not checks.check(saved.returncode == 0, f"GPT checkpoint saved by {ranks} ranks ({saved.stderr.strip()})"):
        return checks.finish()
    ckpt_dir = os.path.join(folder, "step_00000003")
    manifest, master = read_master(ckpt_dir)
    cfg = manifest["model"]
    V, C, L, T, Vp = cfg["vocab_size"], cfg["n_embd"], cfg["n_layer"], cfg["block_size"], cfg["padded_vocab_size"]

    # The engine's own view of the same weights and its loss on the debug batch.
    states = {}
    for dtype in ("f32", "bf16"):
        out = os.path.join(work, f"debug_{dtype}.safetensors")
        r = run([args.zerotrain, "debug-state", "--config", args.config, "--out", out,
                 "--set", f"precision.param_dtype={dtype}"])
        checks.check(r.returncode == 0, f"debug-state {dtype} runs ({r.stderr.strip()[-200:]})")
        states[dtype] = read_safetensors(out)[0]
    engine = states["f32"]
    same = all(np.array_equal(master[n][:engine[n].shape[0]], engine[n]) for n in engine if n in master)
    checks.check(same and all(n in engine for n in master),
                 "rank files (read by the Python reader) hold exactly the engine's initial weights")

    r = ckpt("inspect", folder)
    checks.check(r.returncode == 0 and "step 3 " in r.stdout and f"saved by {ranks} rank" in r.stdout
                 and "checksums: ok" in r.stdout, f"ckpt inspect FOLDER reports the checkpoint ({r.stdout[-300:]})")
    r = ckpt("verify", ckpt_dir)
    checks.check(r.returncode == 0 and r.stdout.startswith("ok:"), f"ckpt verify: ok ({r.stdout.strip()})")

    for dtype in ("f32", "bf16"):
        out = os.path.join(work, f"hf_{dtype}")
        r = ckpt("export", folder, "--format", "hf", "--out", out, "--dtype", dtype)
        if not checks.check(r.returncode == 0, f"export hf {dtype} exits 0 ({r.stderr.strip()})"):
            continue
        with open(os.path.join(out, "config.json")) as f:
            hf = json.load(f)
        checks.check(hf["architectures"] == ["GPT2LMHeadModel"] and hf["model_type"] == "gpt2"
                     and (hf["vocab_size"], hf["n_embd"], hf["n_layer"], hf["n_head"], hf["n_positions"])
                     == (V, C, L, cfg["n_head"], T) and hf["activation_function"] == "gelu_new"
                     and hf["torch_dtype"] == ("float32" if dtype == "f32" else "bfloat16")
                     # GPT2Config's default ids (50256) lie outside this vocabulary: none instead
                     and V <= 50256 and hf["bos_token_id"] is None and hf["eos_token_id"] is None,
                     f"hf {dtype}: config.json describes the model")
        tensors, dtypes, meta = read_safetensors(os.path.join(out, "model.safetensors"))
        checks.check(meta.get("format") == "pt" and set(tensors) == set(master)
                     and set(dtypes.values()) == {"F32" if dtype == "f32" else "BF16"},
                     f"hf {dtype}: every parameter, dtype {set(dtypes.values())}, metadata format=pt")
        checks.check(tensors["transformer.wte.weight"].shape == (V, C), f"hf {dtype}: wte has the true vocabulary {V}")
        expect = {n: a[:V] if n == "transformer.wte.weight" else a for n, a in master.items()}
        if dtype == "bf16":
            expect = {n: bf16_round(a) for n, a in expect.items()}
        checks.check(all(np.array_equal(tensors[n], expect[n]) for n in expect),
                     f"hf {dtype}: tensors equal the checkpoint's master weights{' rounded to bf16' if dtype == 'bf16' else ''}")
        # HF GPT-2 semantics in plain PyTorch (float64), against the engine's loss on the same batch.
        state = states[dtype]
        gcfg = ref.GPT2Config(n_layer=L, n_head=cfg["n_head"], n_embd=C, block_size=T, vocab_size=V,
                              padded_vocab_size=Vp)
        params = {n: torch.tensor(a, dtype=torch.float64) for n, a in tensors.items()}
        _, loss = ref.forward(params, torch.as_tensor(state["inputs"]).long(), torch.as_tensor(state["targets"]).long(), gcfg)
        want = float(state["loss"].reshape(-1)[0])
        err = abs(loss.item() - want) / abs(want)
        checks.check(err < LOSS_RTOL, f"hf {dtype}: PyTorch GPT-2 loss {loss.item():.7f} from the export vs zerotrain "
                                      f"{want:.7f} (rel err {err:.1e} < {LOSS_RTOL})")

    for dtype, version, width in (("f32", 3, 4), ("bf16", 5, 2)):
        out = os.path.join(work, f"model_{dtype}.bin")
        r = ckpt("export", ckpt_dir, "--format", "llmc", "--out", out, "--dtype", dtype)
        if not checks.check(r.returncode == 0, f"export llmc {dtype} exits 0 ({r.stderr.strip()})"):
            continue
        with open(out, "rb") as f:
            blob = f.read()
        header = struct.unpack("<256i", blob[:1024])
        checks.check(header[:8] == (20240326, version, T, V, L, cfg["n_head"], C, Vp),
                     f"llmc {dtype}: header magic, version {version}, maxT V L H C Vp ({header[:8]})")
        order = [("transformer.wte.weight", False), ("transformer.wpe.weight", False)]
        for suffix, transpose in (("ln_1.weight", 0), ("ln_1.bias", 0), ("attn.c_attn.weight", 1),
                                  ("attn.c_attn.bias", 0), ("attn.c_proj.weight", 1), ("attn.c_proj.bias", 0),
                                  ("ln_2.weight", 0), ("ln_2.bias", 0), ("mlp.c_fc.weight", 1), ("mlp.c_fc.bias", 0),
                                  ("mlp.c_proj.weight", 1), ("mlp.c_proj.bias", 0)):
            order += [(f"transformer.h.{l}.{suffix}", bool(transpose)) for l in range(L)]
        order += [("transformer.ln_f.weight", False), ("transformer.ln_f.bias", False)]
        parts = [master[n].T if t else master[n] for n, t in order]
        want = np.concatenate([np.ascontiguousarray(p).reshape(-1) for p in parts])
        if dtype == "f32":
            got = np.frombuffer(blob, "<f4", offset=1024)
        else:
            want = bf16_round(want)
            got = (np.frombuffer(blob, "<u2", offset=1024).astype(np.uint32) << 16).view(np.float32)
        checks.check(len(blob) == 1024 + width * want.size and np.array_equal(got, want),
                     f"llmc {dtype}: tensors in llm.c's order, wte with {Vp} rows, linear weights [out, in]")

    # Bad input: one line on stderr, exit code 2.
    shutil.copytree(ckpt_dir, os.path.join(work, "old_version"))
    with open(os.path.join(work, "old_version", "manifest.json")) as f:
        doc = json.load(f)
    doc["format_version"] = 99
    with open(os.path.join(work, "old_version", "manifest.json"), "w") as f:
        json.dump(doc, f)
    odd = os.path.join(work, "odd")
    run([args.driver, "save", odd, "--stage", 0, "--step", 1])
    cases = [
        ("unknown action", ["frob", folder], "unknown action 'frob'"),
        ("missing PATH", ["inspect"], "missing PATH"),
        ("two PATHs", ["verify", folder, folder], "one PATH, got"),
        # A misspelt flag is named, not its value taken for a second PATH.
        ("a misspelt flag", ["export", "--fromat", "hf", "--out", work + "/x", folder], "--fromat"),
        ("no such path", ["verify", os.path.join(work, "nope")], "nope: no such checkpoint"),
        ("empty folder", ["verify", work + "/hf_f32"], "no checkpoint found"),
        ("bad --format", ["export", folder, "--format", "onnx", "--out", work + "/x"], "--format must be hf or llmc"),
        ("bad --dtype", ["export", folder, "--format", "hf", "--out", work + "/x", "--dtype", "fp16"], "--dtype"),
        ("missing --out", ["export", folder, "--format", "hf"], "--out"),
        ("unknown flag", ["verify", folder, "--frob"], "--frob"),
        ("other format version", ["verify", work + "/old_version"], "format version 99 is not supported"),
        ("not a model checkpoint", ["export", odd, "--format", "llmc", "--out", work + "/x.bin"], "is not a model config"),
        ("a file, not a checkpoint", ["verify", args.config], "not a directory: a checkpoint is a step_* directory"),
        ("--max-shard-size for llmc", ["export", folder, "--format", "llmc", "--out", work + "/x.bin",
                                       "--max-shard-size", "1GB"], "--max-shard-size applies to --format hf"),
        # A size past the bound says the bound; a unit transformers lacks says the units.
        ("--max-shard-size too large", ["export", folder, "--format", "hf", "--out", work + "/x",
                                        "--max-shard-size", "1000000000000000"], "from 1 byte to below 1e15 bytes"),
        ("--max-shard-size in TB", ["export", folder, "--format", "hf", "--out", work + "/x", "--max-shard-size",
                                    "1TB"], "in B, KB, MB, GB, KiB, MiB or GiB"),
        # Refused before the work (the export was written whole, then its rename failed, exit 1).
        ("llmc --out a folder's name", ["export", ckpt_dir, "--format", "llmc", "--out", work + "/new_llmc/"],
         "not a file name"),
    ]
    for name, argv_, fragment in cases:
        r = ckpt(*argv_)
        lines = r.stderr.strip().splitlines()
        checks.check(r.returncode == 2 and len(lines) == 1 and fragment in lines[0],
                     f"bad input, {name}: exit 2, one line containing '{fragment}' (rc {r.returncode}: {r.stderr.strip()})")
    # PATH after the flags, as other commands take their arguments in any order (it was 'missing PATH').
    after = os.path.join(work, "path_after_flags")
    r = ckpt("export", "--format=hf", "--out", after, folder)
    checks.check(r.returncode == 0 and os.path.isfile(os.path.join(after, "config.json")),
                 f"ckpt export takes PATH after its flags ({r.stderr.strip()})")
    # verify FOLDER judges the checkpoint `latest` names, not an older one that passes: step 3
    # damaged beside a sound step 2 is a failure that says where a resume would go instead.
    two = os.path.join(work, "two")
    for step in (2, 3):
        r = run(mpirun + ["-np", str(ranks)] * bool(mpirun) + [args.driver, "save", two, "--stage", 1, "--step", step,
                                                                  "--model-config", args.config])
        checks.check(r.returncode == 0, f"step {step} saved into a second folder ({r.stderr.strip()})")
    with open(os.path.join(two, "step_00000003", "rank_00000.bin"), "r+b") as f:
        f.seek(5)
        b = f.read(1)
        f.seek(5)
        f.write(bytes([b[0] ^ 0x40]))
    r = ckpt("verify", two)
    lines = r.stderr.strip().splitlines()
    checks.check(r.returncode == 2 and len(lines) == 1 and "step_00000003" in lines[0] and "checksum mismatch" in lines[0]
                 and "fall back to " + os.path.join(two, "step_00000002") in lines[0],
                 f"verify FOLDER fails when the checkpoint latest names is damaged, naming the fallback "
                 f"(rc {r.returncode}: {r.stderr.strip()})")
    r = ckpt("verify", os.path.join(two, "step_00000002"))
    checks.check(r.returncode == 0, f"the older checkpoint itself verifies ({r.stderr.strip()})")
    # A rank file the manifest does not list (copied in from another checkpoint): named beside the
    # "ok", which covered it in silence.
    step2 = os.path.join(two, "step_00000002")
    shutil.copy(os.path.join(two, "step_00000003", "rank_00000.bin"), os.path.join(step2, "rank_00099.bin"))
    r = ckpt("verify", step2)
    checks.check(r.returncode == 0 and "also holds rank_00099.bin, which its manifest does not list" in r.stderr,
                 f"verify names a file its manifest does not list ({r.stderr.strip()})")
    os.remove(os.path.join(step2, "rank_00099.bin"))
    # The newest checkpoint's manifest.json a directory: named, and the folder falls back (a bare
    # 'basic_filebuf::underflow error' with exit 1 ended every command on the folder).
    dir_manifest = os.path.join(work, "dir_manifest")
    shutil.copytree(two, dir_manifest)
    os.remove(os.path.join(dir_manifest, "step_00000003", "manifest.json"))
    os.mkdir(os.path.join(dir_manifest, "step_00000003", "manifest.json"))
    r = ckpt("verify", dir_manifest)
    lines = r.stderr.strip().splitlines()
    checks.check(r.returncode == 2 and len(lines) == 1 and "manifest.json: is a directory" in lines[0] and
                 "fall back to " + os.path.join(dir_manifest, "step_00000002") in lines[0],
                 f"verify FOLDER whose newest manifest.json is a directory: named (rc {r.returncode}: {lines})")
    r = ckpt("inspect", dir_manifest)
    checks.check(r.returncode == 0 and "step 2 " in r.stdout and "falling back" in r.stderr,
                 f"inspect FOLDER whose newest manifest.json is a directory falls back to step 2 "
                 f"(rc {r.returncode}: {r.stderr.strip()})")
    # A manifest nested 100,000 deep (a fuzzer's): refused by its depth, and the folder falls back
    # (every command that read it died of a segmentation fault); one whose field was edited by hand
    # is refused as edited, by its seal, before the field's type is read ('type must be boolean').
    def with_manifest(name, edit):
        """A copy of the two-checkpoint folder whose newest manifest.json is edit(its text)."""
        folder = os.path.join(work, name)
        shutil.copytree(two, folder)
        path = os.path.join(folder, "step_00000003", "manifest.json")
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(edit(text))
        return folder

    deep = with_manifest("deep_manifest", lambda t: '{"deep": ' + "[" * 100000 + "]" * 100000 + "," + t.lstrip()[1:])
    r = ckpt("inspect", deep)
    checks.check(r.returncode == 0 and "step 2 " in r.stdout and "JSON nested deeper than 64 levels" in r.stderr,
                 f"a manifest nested 100,000 deep: refused by its depth, the folder falls back (rc {r.returncode}: "
                 f"{r.stderr.strip()[-300:]})")
    edited = with_manifest("edited_manifest", lambda t: t.replace('"decays": true', '"decays": "yes"', 1))
    r = ckpt("verify", os.path.join(edited, "step_00000003"))
    lines = r.stderr.strip().splitlines()
    checks.check(r.returncode == 2 and len(lines) == 1 and "manifest checksum mismatch" in lines[0],
                 f"a field edited by hand: refused as an edit, by the seal ({lines})")
    # A FIFO as `latest`: read as unreadable, not waited on for a writer (verify and inspect hung).
    fifo_latest = os.path.join(work, "fifo_latest")
    shutil.copytree(folder, fifo_latest)
    os.remove(os.path.join(fifo_latest, "latest"))
    os.mkfifo(os.path.join(fifo_latest, "latest"))
    for action in ("verify", "inspect"):
        try:
            r = subprocess.run([args.zerotrain, "ckpt", action, fifo_latest], capture_output=True, text=True,
                               timeout=30)
            checks.check(r.returncode == 0 and "latest is unreadable" in r.stderr,
                         f"{action} FOLDER whose latest is a FIFO: the newest checkpoint, with a note "
                         f"(rc {r.returncode}: {r.stderr.strip()})")
        except subprocess.TimeoutExpired:
            checks.check(False, f"{action} FOLDER whose latest is a FIFO: did not hang")

    # An export that fails (the damaged checkpoint, met at its first tensor) leaves its destination
    # as it was: an earlier export in the folder, or the file, whole, and no .tmp beside them.
    def snapshot(path):
        names = sorted(os.listdir(path)) if os.path.isdir(path) else [""]
        contents = {}
        for n in names:
            with open(os.path.join(path, n) if n else path, "rb") as f:
                contents[n] = f.read()
        return contents

    damaged = os.path.join(two, "step_00000003")
    for fmt_, out in (("hf", os.path.join(work, "hf_f32")), ("llmc", os.path.join(work, "model_f32.bin"))):
        if not os.path.exists(out):
            continue  # its export failed above
        before = snapshot(out)
        r = ckpt("export", damaged, "--format", fmt_, "--out", out)
        lines = r.stderr.strip().splitlines()
        left = [n for n in os.listdir(work) + (os.listdir(out) if os.path.isdir(out) else []) if n.endswith(".tmp")]
        checks.check(r.returncode == 2 and len(lines) == 1 and "checksum mismatch" in lines[0] and
                     snapshot(out) == before and not left,
                     f"export {fmt_} of a damaged checkpoint over an earlier export: exit 2, one line, the earlier "
                     f"export unchanged ({sorted(before)}), no .tmp (rc {r.returncode}: {r.stderr.strip()}; {left})")
    r = ckpt("export", folder, "--format", "llmc", "--out", os.path.join(work, "hf_f32"))
    lines = r.stderr.strip().splitlines()
    checks.check(r.returncode == 2 and len(lines) == 1 and "is a directory" in lines[0] and
                 not os.path.exists(os.path.join(work, "hf_f32.tmp")),
                 f"export llmc with --out a directory: exit 2 before writing, one line ({r.stderr.strip()})")

    # A folder whose newest checkpoint is damaged: export falls back to the older one, as --resume
    # latest does (a note on stderr), instead of failing on it.
    r = ckpt("export", two, "--format", "llmc", "--out", os.path.join(work, "fallback.bin"))
    checks.check(r.returncode == 0 and "from step 2" in r.stdout and "falling back" in r.stderr,
                 f"export of a folder whose newest checkpoint is damaged falls back to step 2 "
                 f"(rc {r.returncode}: {r.stdout.strip()} {r.stderr.strip()})")
    # An llm.c file into folders that do not exist yet: made, as an HF export makes its own (the
    # export failed naming its .tmp, exit 1).
    nested = os.path.join(work, "new", "dir", "model.bin")
    r = ckpt("export", folder, "--format", "llmc", "--out", nested)
    checks.check(r.returncode == 0 and os.path.isfile(nested), f"export llmc into new folders ({r.stderr.strip()})")
    # --out naming a training run's directory: its config.json is the run's, not an HF one's.
    run_dir = os.path.join(work, "a_run")
    os.makedirs(run_dir)
    run_config = json.dumps({"model": {"n_layer": 2}, "train": {"max_steps": 3}})
    for name, text in (("config.json", run_config), ("metrics.jsonl", "")):
        with open(os.path.join(run_dir, name), "w") as f:
            f.write(text)
    r = ckpt("export", folder, "--format", "hf", "--out", run_dir)
    lines = r.stderr.strip().splitlines()
    with open(os.path.join(run_dir, "config.json")) as f:
        kept = f.read() == run_config
    checks.check(r.returncode == 2 and len(lines) == 1 and "training run's directory" in lines[0] and kept and
                 sorted(os.listdir(run_dir)) == ["config.json", "metrics.jsonl"],
                 f"export hf into a run directory: exit 2, one line, its config.json kept ({r.stderr.strip()})")
    # ... also one whose checkpoints are its directory itself (checkpoint.dir = the run directory:
    # a `latest` beside metrics.jsonl), which weights_at calls a checkpoint folder.
    with open(os.path.join(run_dir, "latest"), "w") as f:
        f.write("step_00000003\n")
    r = ckpt("export", folder, "--format", "hf", "--out", run_dir)
    lines = r.stderr.strip().splitlines()
    checks.check(r.returncode == 2 and len(lines) == 1 and "is a training run's directory" in lines[0],
                 f"export hf into a run directory holding its own latest: refused as one ({r.stderr.strip()})")

    # --out inside the checkpoint it reads (a rank file, the manifest, a folder beside the steps)
    # would write over it; over a file that is no llm.c model it would lose that file.
    rank_file = os.path.join(ckpt_dir, "rank_00000.bin")
    other_file = os.path.join(work, "notes.json")
    with open(other_file, "w") as f:
        f.write('{"keep": true}')
    for fmt_, out, says in (("llmc", rank_file, "is inside the checkpoint"),
                            ("llmc", os.path.join(ckpt_dir, "manifest.json"), "is inside the checkpoint"),
                            ("hf", os.path.join(folder, "hf"), "is inside the checkpoint"),
                            ("llmc", other_file, "is not an llm.c model file")):
        before = {p: open(p, "rb").read() for p in (rank_file, os.path.join(ckpt_dir, "manifest.json"), other_file)}
        r = ckpt("export", folder, "--format", fmt_, "--out", out)
        lines = r.stderr.strip().splitlines()
        after = {p: open(p, "rb").read() for p in before}
        checks.check(r.returncode == 2 and len(lines) == 1 and says in lines[0] and after == before and
                     not os.path.exists(os.path.join(folder, "hf")),
                     f"export {fmt_} --out {os.path.relpath(out, work)}: exit 2, one line, nothing written "
                     f"({r.stderr.strip()})")
    # A relative --out whose first part does not exist yet, from inside the checkpoint.
    r = subprocess.run([args.zerotrain, "ckpt", "export", ".", "--format", "hf", "--out", "hf"], cwd=ckpt_dir,
                       capture_output=True, text=True, timeout=120)
    checks.check(r.returncode == 2 and "is inside the checkpoint" in r.stderr and
                 not os.path.exists(os.path.join(ckpt_dir, "hf")),
                 f"export --out hf from inside the checkpoint: refused ({r.stderr.strip()})")
    r = ckpt("verify", folder)
    checks.check(r.returncode == 0, f"the checkpoint verifies after the refused exports ({r.stderr.strip()})")

    # An HF export killed between the renames that move its files into place (the test hook ends
    # it there) leaves no config.json, so no loader reads the new tensors under an earlier config;
    # the next export completes the folder.
    cut = os.path.join(work, "hf_cut")
    first = ckpt("export", folder, "--format", "hf", "--out", cut)
    env = dict(os.environ, ZT_TEST_EXPORT_EXIT_AFTER_RENAMES="1")
    killed = subprocess.run([args.zerotrain, "ckpt", "export", folder, "--format", "hf", "--out", cut, "--dtype",
                             "bf16"], capture_output=True, text=True, timeout=120, env=env)
    cut_names = sorted(os.listdir(cut))
    again = ckpt("export", folder, "--format", "hf", "--out", cut)
    checks.check(first.returncode == 0 and killed.returncode == 137 and "config.json" not in cut_names and
                 "model.safetensors" in cut_names and again.returncode == 0 and
                 "config.json" in os.listdir(cut) and not any(n.endswith(".tmp") for n in os.listdir(cut)),
                 f"an HF export cut between its renames leaves no config.json ({cut_names}); the next one completes "
                 f"the folder ({sorted(os.listdir(cut))})")

    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
