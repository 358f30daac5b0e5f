#!/usr/bin/env python3
"""A Llama checkpoint written by several ranks, exported for Hugging Face (issue 22), untied and tied:
  * the rank files (read by the independent Python reader) hold the initial weights debug-state has,
    also with the head in vocabulary chunks (the head's table split by rows across units) and with
    each layer in two units (train.block_units = 2);
  * `ckpt export --format hf` (fp32 and bf16) writes config.json for LlamaForCausalLM (GQA heads,
    SwiGLU width, RoPE base, RMSNorm epsilon, tie) and a model.safetensors with exactly
    LlamaForCausalLM's tensors (lm_head only when untied, the true vocabulary) equal to the
    checkpoint's master weights (bf16: rounded to nearest even);
  * a plain PyTorch Llama built from that config.json and those tensors (tests/parity/
    llama_reference.py, float64) computes zerotrain's loss on debug-state's batch;
  * `ckpt export --format llmc` refuses with one line (llm.c's file holds GPT-2 only);
  * `sample --ckpt` generates from it.

usage: llama_export_test.py --zerotrain PATH --driver PATH --config llama_tiny_debug.json [-- MPIRUN FLAGS...]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "parity"))
from check_report import Checks  # noqa: E402
import llama_reference as ref  # noqa: E402
from safetensors_io import read_safetensors  # noqa: E402
from ckpt_format import read_master  # noqa: E402

LOSS_RTOL = 1e-5  # fp32 engine vs float64 reference from the same weights (as tests/parity)


def main():
    argv = sys.argv[1:]
    mpirun = argv[argv.index("--") + 1:] if "--" in argv else []
    parser = argparse.ArgumentParser()
    parser.add_argument("--zerotrain", required=True)
    parser.add_argument("--driver", required=True)
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    checks = Checks()
    work = checks.work_folder("zt_llama_export_")
    ranks = 3 if mpirun else 1

    def run(cmd):
        return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120)

    with open(args.config) as f:
        base = json.load(f)
    for tied, chunks, block_units in ((False, 1, 1), (True, 1, 1), (False, 2, 2), (True, 2, 1)):
        what = ("tied" if tied else "untied") + (f", head in {chunks} chunk units" if chunks > 1 else "") + (
            ", layers in two units" if block_units > 1 else "")
        config = os.path.join(work, f"{tied}_{chunks}.json")
        with open(config, "w") as f:
            json.dump({**base, "model": {**base["model"], "tie_embeddings": tied},
                       "train": {**base.get("train", {}), "head_chunks": chunks, "block_units": block_units}}, f)
        folder = os.path.join(work, f"ckpt_{tied}_{chunks}")
        saved = run(mpirun + ["-np", str(ranks)] * bool(mpirun) + [args.driver, "save", folder, "--stage", 2, "--step", 4,
                                                                      "--model-config", config])
        if not checks.check(saved.returncode == 0, f"{what}: Llama checkpoint saved by {ranks} ranks at stage 2 "
                                                   f"({saved.stderr.strip()[-300:]})"):
            continue
        ckpt_dir = os.path.join(folder, "step_00000004")
        manifest, master = read_master(ckpt_dir)
        model = manifest["model"]
        checks.check(model["type"] == "llama" and model["tie_embeddings"] == tied
                     and model["n_kv_head"] == base["model"]["n_kv_head"],
                     f"{what}: the manifest's model is the Llama ({model})")
        V = model["vocab_size"]
        state_path = os.path.join(work, f"debug_{tied}_{chunks}.safetensors")
        r = run([args.zerotrain, "debug-state", "--config", config, "--out", state_path])
        if not checks.check(r.returncode == 0, f"{what}: debug-state runs ({r.stderr.strip()[-200:]})"):
            continue
        state, _, state_meta = read_safetensors(state_path)
        checks.check(all(np.array_equal(master[n][:state[n].shape[0]], state[n]) for n in master),
                     f"{what}: rank files hold exactly the engine's initial weights")
        if chunks > 1:
            units = [u["name"] for u in manifest["units"]]
            checks.check(len(units) == 2 + block_units * base["model"]["n_layer"] + (1 if tied else 2),
                         f"{what}: the head's table (and the layers' halves) in units of their own ({units})")

        for dtype in ("f32", "bf16"):
            out = os.path.join(work, f"hf_{tied}_{chunks}_{dtype}")
            r = run([args.zerotrain, "ckpt", "export", folder, "--format", "hf", "--out", out, "--dtype", dtype])
            if not checks.check(r.returncode == 0, f"{what} {dtype}: export hf exits 0 ({r.stderr.strip()})"):
                continue
            with open(os.path.join(out, "config.json")) as f:
                text = f.read()
            hf = json.loads(text)
            cfg = ref.LlamaConfig.from_hf(text)
            m = base["model"]
            checks.check(hf["architectures"] == ["LlamaForCausalLM"] and hf["model_type"] == "llama"
                         and (cfg.n_layer, cfg.n_head, cfg.n_kv_head, cfg.n_embd, cfg.intermediate_size, cfg.vocab_size)
                         == (m["n_layer"], m["n_head"], m["n_kv_head"], m["n_embd"], m["intermediate_size"], V)
                         and cfg.tie_embeddings == tied and hf["rope_theta"] == m["rope_theta"]
                         and hf["rms_norm_eps"] == m["norm_eps"] and hf["hidden_act"] == "silu"
                         and hf["torch_dtype"] == ("float32" if dtype == "f32" else "bfloat16"),
                         f"{what} {dtype}: config.json describes the LlamaForCausalLM")
            if dtype == "f32":
                checks.check(json.loads(state_meta.get("hf_config", "{}")) == hf,
                             f"{what}: debug-state's hf_config metadata is the fp32 export's config.json")
            tensors, dtypes, meta = read_safetensors(os.path.join(out, "model.safetensors"))
            shapes = ref.param_shapes(cfg)
            checks.check(meta.get("format") == "pt" and set(tensors) == set(shapes)
                         and all(tuple(tensors[n].shape) == s for n, s in shapes.items())
                         and set(dtypes.values()) == {"F32" if dtype == "f32" else "BF16"},
                         f"{what} {dtype}: exactly LlamaForCausalLM's tensors and shapes "
                         f"({'no lm_head' if tied else 'lm_head'}, vocabulary {V})")
            expect = {n: a[:V] if a.shape[0] > V and n in ("model.embed_tokens.weight", "lm_head.weight") else a
                      for n, a in master.items()}
            if dtype == "bf16":
                expect = {n: ref.bf16_round(torch.from_numpy(np.ascontiguousarray(a))).numpy() for n, a in expect.items()}
            checks.check(all(n in tensors and np.array_equal(tensors[n], expect[n]) for n in expect),
                         f"{what} {dtype}: tensors equal the checkpoint's master weights"
                         f"{' rounded to bf16' if dtype == 'bf16' else ''}")
            if dtype == "f32":
                params = {n: torch.tensor(a, dtype=torch.float64) for n, a in tensors.items()}
                _, loss = ref.forward(params, torch.as_tensor(state["inputs"]).long(),
                                      torch.as_tensor(state["targets"]).long(), cfg)
                want = float(state["loss"].reshape(-1)[0])
                err = abs(loss.item() - want) / abs(want)
                checks.check(err < LOSS_RTOL, f"{what}: PyTorch Llama loss {loss.item():.7f} from the export vs "
                                              f"zerotrain {want:.7f} (rel err {err:.1e} < {LOSS_RTOL})")

        r = run([args.zerotrain, "ckpt", "export", folder, "--format", "llmc", "--out", os.path.join(work, "x.bin")])
        lines = r.stderr.strip().splitlines()
        checks.check(r.returncode == 2 and len(lines) == 1 and "GPT-2 models only" in lines[0]
                     and not os.path.exists(os.path.join(work, "x.bin")),
                     f"{what}: export llmc refuses a Llama in one line, writing nothing ({r.stderr.strip()})")
        r = run([args.zerotrain, "sample", "--ckpt", folder, "--tokens", "12"])
        checks.check(r.returncode == 0 and len(r.stdout.split()) == 12,
                     f"{what}: sample --ckpt generates 12 tokens ({r.stdout.strip()[:80]} {r.stderr.strip()[-200:]})")

    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
