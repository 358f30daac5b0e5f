#!/usr/bin/env python3
"""Pretrained weights as transformers and llm.c leave them, read as they read them (`eval --from`'s
loss against transformers' on the same windows, 1e-5):

  * a folder holding model.safetensors beside a sharded save's model.safetensors.index.json (what
    save_pretrained leaves when a whole save follows a sharded one; with the shards still there
    too): the single file, as from_pretrained takes it (zerotrain read the index: "cannot open file",
    or the stale shards' weights without a word);
  * a GPT-2 config.json without n_positions (or other shape keys): GPT2Config's defaults (refused);
  * an llm.c model file padded to a multiple of 128, as llm.c's train_gpt2.py writes it (refused
    where that was not zerotrain's multiple of 64);
  * model.rope_scaling under transformers' older key "type" beside a folder whose config says the
    same: accepted (refused as a conflict), and another factor still refused;
  * ckpt export --max-shard-size in transformers' spellings: "20kB" as "20KB", "160kb" in bits;
  * the hub's gpt2 layout: the base model's names without "transformer.", the head tied, and the
    attention's old mask buffers beside them.

usage: pretrained_folders_test.py ZEROTRAIN   (under .venv-hf's python; skipped, exit 77, without it)
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from check_report import Checks  # noqa: E402
from hf_env import require_hf  # noqa: E402

require_hf()
import safetensors.torch  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from init_from_test import T, reference_loss, write_llmc_model, write_tokens  # noqa: E402

WINDOWS = 4


def main():
    zerotrain = sys.argv[1]
    checks = Checks()
    check = checks.check
    work = checks.work_folder("zt_pretrained_folders_")
    tokens_path = os.path.join(work, "tokens.bin")
    tokens = np.random.RandomState(0).randint(0, 100, size=WINDOWS * T + 1)
    write_tokens(tokens_path, tokens)

    def run(*args):
        return subprocess.run([zerotrain, *args], capture_output=True, text=True, timeout=300)

    def eval_loss(source):
        p = run("eval", "--from", source, "--tokens", tokens_path, "--windows", str(WINDOWS), "--seq-len", str(T))
        m = re.search(r"loss (\d+\.\d+)", p.stdout)
        return (float(m.group(1)) if p.returncode == 0 and m else None), p.stderr.strip()[-300:]

    def gpt2(seed, vocab=100):
        torch.manual_seed(seed)
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=vocab, n_positions=32, n_embd=32,
                                                                    n_layer=1, n_head=2)).eval()

    # A whole save over a sharded one: the index stays behind.
    old, new = gpt2(1), gpt2(2)
    folder = os.path.join(work, "resaved")
    old.save_pretrained(folder, safe_serialization=True, max_shard_size="20KB")
    shards = {f: open(os.path.join(folder, f), "rb").read() for f in os.listdir(folder) if f.startswith("model-")}
    new.save_pretrained(folder, safe_serialization=True)
    left = sorted(os.listdir(folder))
    want = reference_loss(transformers.AutoModelForCausalLM.from_pretrained(folder), tokens, WINDOWS)
    check(len(shards) > 1 and "model.safetensors.index.json" in left and "model.safetensors" in left
          and abs(want - reference_loss(new, tokens, WINDOWS)) < 1e-7,
          f"save_pretrained leaves the index beside the whole file, and from_pretrained reads the file ({left})")
    loss, err = eval_loss(folder)
    check(loss is not None and abs(loss - want) < 1e-5, f"... and so does zerotrain: loss {loss} = {want:.6f} ({err})")
    for name, data in shards.items():  # the stale shards back too: still the whole file's weights
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    loss, err = eval_loss(folder)
    check(loss is not None and abs(loss - want) < 1e-5,
          f"with the stale shards there too: loss {loss} = {want:.6f}, not theirs "
          f"({reference_loss(old, tokens, WINDOWS):.6f}) ({err})")

    # The Hugging Face hub's own gpt2 files: the base model's names (wte.weight, h.0..., no
    # "transformer." and no lm_head: the head is tied), with the attention's old mask buffers
    # (attn.bias, attn.masked_bias) saved beside them, as older transformers saved them.
    model = gpt2(5)
    hub = {k: v.contiguous() for k, v in model.transformer.state_dict().items()}
    for layer in range(model.config.n_layer):
        hub[f"h.{layer}.attn.bias"] = torch.tril(torch.ones(32, 32)).view(1, 1, 32, 32)
        hub[f"h.{layer}.attn.masked_bias"] = torch.tensor(-1e4)
    folder = os.path.join(work, "hub_layout")
    os.makedirs(folder)
    safetensors.torch.save_file(hub, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    model.config.to_json_file(os.path.join(folder, "config.json"))
    want = reference_loss(model, tokens, WINDOWS)
    loss, err = eval_loss(folder)
    check(loss is not None and abs(loss - want) < 1e-5,
          f"the hub's layout (base names, mask buffers beside): loss {loss} = {want:.6f} ({err})")

    # A tensor in two of a sharded save's files: refused in one line naming both (it named one file,
    # as if the tensor were twice in it).
    folder = os.path.join(work, "twice")
    gpt2(4).save_pretrained(folder, safe_serialization=True, max_shard_size="20KB")
    with open(os.path.join(folder, "model.safetensors.index.json")) as f:
        weight_map = json.load(f)["weight_map"]
    name = "transformer.h.0.ln_2.weight"
    other = sorted(set(weight_map.values()) - {weight_map[name]})[0]
    tensors = safetensors.torch.load_file(os.path.join(folder, other))
    tensors[name] = torch.full((32,), 5.0)
    safetensors.torch.save_file(tensors, os.path.join(folder, other), metadata={"format": "pt"})
    p = run("eval", "--from", folder, "--tokens", tokens_path, "--windows", str(WINDOWS), "--seq-len", str(T))
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    check(p.returncode == 2 and len(lines) == 1 and f"tensor '{name}' is in both" in lines[0] and
          weight_map[name] in lines[0] and other in lines[0],
          f"a tensor in two shards: refused in one line naming both files ({lines})")

    # A GPT-2 config.json without n_positions: GPT2Config's default (1024) for the context.
    folder = os.path.join(work, "no_n_positions")
    model = gpt2(3)
    model.save_pretrained(folder, safe_serialization=True)
    config_path = os.path.join(folder, "config.json")
    with open(config_path) as f:
        config = json.load(f)
    config.pop("n_positions")
    with open(config_path, "w") as f:
        json.dump(config, f)
    try:
        theirs = transformers.AutoModelForCausalLM.from_pretrained(folder, ignore_mismatched_sizes=False)
        positions = theirs.config.n_positions
    except Exception as e:  # noqa: BLE001: the 32-row wpe against 1024 positions
        theirs, positions = None, f"{type(e).__name__}"
    loss, err = eval_loss(folder)
    # transformers builds 1024 positions and refuses the 32-row table; zerotrain names the same mismatch.
    check(theirs is None and loss is None and "1024" in err and "wpe" in err,
          f"no n_positions: the 1024 positions GPT2Config defaults to, against the file's 32 rows, refused as "
          f"transformers refuses it ({positions}; {err})")
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=100, n_embd=32, n_layer=1, n_head=2))
    model.save_pretrained(folder, safe_serialization=True)
    with open(config_path) as f:
        config = json.load(f)
    for key in ("n_positions", "n_ctx"):
        config.pop(key, None)
    with open(config_path, "w") as f:
        json.dump(config, f)
    want = reference_loss(transformers.AutoModelForCausalLM.from_pretrained(folder), tokens, WINDOWS)
    loss, err = eval_loss(folder)
    check(loss is not None and abs(loss - want) < 1e-5, f"... and a 1024-position model without it loads: loss "
                                                        f"{loss} = {want:.6f} ({err})")

    # llm.c's padding of the vocabulary (130 -> 256; zerotrain's own would be 192).
    model = gpt2(4, vocab=130)
    path = os.path.join(work, "padded_128.bin")
    write_llmc_model(path, model, "f32", pad_to=128)
    loss, err = eval_loss(path)
    want = reference_loss(model, tokens, WINDOWS)
    check(loss is not None and abs(loss - want) < 1e-5, f"an llm.c file padded to 256 rows: loss {loss} = {want:.6f} "
                                                        f"({err})")

    # A --seq-len past the model's positions: refused naming where the bound is written (it said
    # "in [1, 32]" alone, for a Llama with no position table).
    for source, where in ((path, "max_seq_len of its llm.c header"), (os.path.join(work, "resaved"),
                                                                       "max_position_embeddings")):
        p = run("eval", "--from", source, "--tokens", tokens_path, "--windows", "1", "--seq-len", "33")
        lines = [line for line in p.stderr.splitlines() if line.strip()]
        check(p.returncode == 2 and len(lines) == 1 and "--seq-len 33 is past the model's 32 positions" in lines[0]
              and where in lines[0], f"--seq-len past the context names its bound ({lines})")

    # rope_scaling spelled as the folder spells it.
    torch.manual_seed(5)
    llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=32, rope_scaling={"type": "linear", "factor": 4.0}))
    folder = os.path.join(work, "llama_linear")
    llama.save_pretrained(folder, safe_serialization=True)
    config = {"model": {}, "data": {"train_file": tokens_path, "val_file": tokens_path},
              "train": {"init_from": folder, "micro_batch": 2, "seq_len": 8, "max_steps": 1, "eval_batches": 1},
              "checkpoint": {"at_end": True}, "log": {"sample_every": 0}}
    config_path = os.path.join(work, "llama.json")
    with open(config_path, "w") as f:
        json.dump(config, f)
    for rope, accepted in (('{"type": "linear", "factor": 4.0}', True), ('{"type": "linear", "factor": 4}', True),
                           ('{"rope_type": "linear", "factor": 4.0}', True),
                           ('{"type": "linear", "factor": 2.0}', False)):
        p = run("train", "--config", config_path, "--run-dir", os.path.join(work, "llama_run"),
                "--set", f"model.rope_scaling={rope}")
        lines = [line for line in p.stderr.splitlines() if "error" in line]
        check((p.returncode == 0) if accepted else (p.returncode == 2 and len(lines) == 1 and "rope_scaling" in lines[0]),
              f"model.rope_scaling = {rope} beside the folder's {{'type': 'linear', 'factor': 4.0}}: "
              f"{'accepted' if accepted else 'refused'} ({lines[-1:]})")

    # --max-shard-size in transformers' spellings.
    ckpt = os.path.join(work, "llama_run", "checkpoints")
    cuts = {}
    for size in ("20000", "20KB", "20kB", "160kb"):
        out = os.path.join(work, f"export_{size}")
        p = run("ckpt", "export", ckpt, "--format", "hf", "--out", out, "--max-shard-size", size)
        cuts[size] = sorted((os.path.basename(f), os.path.getsize(f)) for f in glob.glob(os.path.join(out, "model*")))
        shutil.rmtree(out, ignore_errors=True)
        check(p.returncode == 0, f"--max-shard-size {size} exports ({p.stderr.strip()[-200:]})")
    check(len(cuts["20000"]) > 2 and all(c == cuts["20000"] for c in cuts.values()),
          f"20KB, 20kB and 160kb (bits) cut as 20000 bytes do ({[len(c) for c in cuts.values()]} files)")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
