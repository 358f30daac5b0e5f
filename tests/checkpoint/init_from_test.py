#!/usr/bin/env python3
"""train.init_from against outside software: models that transformers creates (random init) and
save_pretrained's -- GPT2LMHeadModel and LlamaForCausalLM, fp32 and bf16, in one safetensors file
and in shards with an index, and fp16 in one file -- and an llm.c model file (written here in llm.c's layout from the same
GPT-2, fp32 and bf16). zerotrain takes the model's shape from the checkpoint, and its step-1 loss
(the loss of the first batch, before any update) equals transformers' loss on the same batch within
1e-6 (bf16 files: transformers computing in fp32 on the same bf16 values) at ZeRO stages 0-3 on
1-3 ranks, and the load's memory peak on every rank is predicted to the byte. A stage-3 rank reads
about its share of the file, not the whole model. Then training goes
on and the run's export loads back into transformers, and `sample --from` decodes greedily what
transformers' generate does. Scaled rotary frequencies (config.json's rope_scaling) come over:
linear against transformers itself, and back through the export; llama3 (Llama 3.1 and later,
newer than the transformers here) against the parity tests' plain-PyTorch Llama. Conflicting model
keys, a tensor missing from the file, a tied model saved with another head than its token table, a
folder with pytorch_model.bin alone and an unsupported config are refused in one line with exit 2.

usage: init_from_test.py HF_PYTHON MPIRUN [MPIRUN FLAGS...] -- PATH/TO/zerotrain
  (HF_PYTHON: an interpreter with transformers, made by tools/setup.sh; run by it)
"""
import copy
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "parity"))
from check_report import Checks  # noqa: E402
import llama_reference  # noqa: E402
from run_dir_util import train_records  # noqa: E402

from hf_env import require_hf  # noqa: E402

require_hf()
import torch  # noqa: E402
import transformers  # noqa: E402

VOCAB, T, B = 100, 16, 4


def write_tokens(path, tokens):
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype=np.uint16).tobytes())


def write_llmc_model(path, model, dtype, pad_to=128):
    """llm.c's model file from a transformers GPT-2, as llm.c's train_gpt2.py writes it: header,
    then wte (padded rows zero, to a multiple of 128 as llm.c pads), wpe, each layer tensor stacked,
    linear weights as [out, in]."""
    c = model.config
    sd = {k: v.detach().float() for k, v in model.state_dict().items()}
    vp = (c.vocab_size + pad_to - 1) // pad_to * pad_to
    header = np.zeros(256, dtype=np.int32)
    header[:8] = [20240326, 3 if dtype == "f32" else 5, c.n_positions, c.vocab_size, c.n_layer, c.n_head, c.n_embd, vp]
    wte = torch.zeros(vp, c.n_embd)
    wte[:c.vocab_size] = sd["transformer.wte.weight"]
    tensors = [wte, sd["transformer.wpe.weight"]]
    for suffix, transpose in [("ln_1.weight", 0), ("ln_1.bias", 0), ("attn.c_attn.weight", 1), ("attn.c_attn.bias", 0),
                              ("attn.c_proj.weight", 1), ("attn.c_proj.bias", 0), ("ln_2.weight", 0), ("ln_2.bias", 0),
                              ("mlp.c_fc.weight", 1), ("mlp.c_fc.bias", 0), ("mlp.c_proj.weight", 1),
                              ("mlp.c_proj.bias", 0)]:
        for l in range(c.n_layer):
            t = sd[f"transformer.h.{l}.{suffix}"]
            tensors.append(t.t().contiguous() if transpose else t)
    tensors += [sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"]]
    flat = torch.cat([t.reshape(-1) for t in tensors])
    with open(path, "wb") as f:
        f.write(header.tobytes())
        if dtype == "f32":
            f.write(flat.numpy().astype(np.float32).tobytes())
        else:
            f.write((flat.to(torch.bfloat16).view(torch.int16).numpy()).tobytes())


def reference_loss(model, tokens, n_samples):
    """transformers' mean loss over sequential windows 0..n-1 (zerotrain's data.order = sequential:
    window g starts at token g * T), in fp32."""
    x, y = windows(tokens, n_samples)
    with torch.no_grad():
        logits = model.float().eval()(x).logits
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item()


def windows(tokens, n_samples):
    """Inputs and targets of sequential windows 0..n-1 (zerotrain's data.order = sequential)."""
    x = np.stack([tokens[g * T:g * T + T] for g in range(n_samples)]).astype(np.int64)
    y = np.stack([tokens[g * T + 1:g * T + T + 1] for g in range(n_samples)]).astype(np.int64)
    return torch.tensor(x), torch.tensor(y)


def check_scaled_rope(checks, work, train, tokens, binary):
    """rope_scaling from config.json. linear: transformers (4.40 here) builds the model, and its loss
    is the reference at stage 0 on 1 rank and stage 3 on 2, and the export (lr 0: the same weights)
    loads back into it with the same loss. llama3 (newer than that transformers): the same weights
    under a llama3 config.json, against the parity tests' plain-PyTorch Llama in float64. Each
    scaling must move the loss well past the bound, or a run that ignored it would pass."""
    torch.manual_seed(1)
    llama_config = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                        rms_norm_eps=1e-5, tie_word_embeddings=False)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        **llama_config, rope_scaling={"type": "linear", "factor": 4.0}))
    with torch.no_grad():  # sharper attention, so that positions move the loss
        for name, p in model.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                p.mul_(12.0)
    folder = os.path.join(work, "llama_rope_linear")
    model.save_pretrained(folder, safe_serialization=True)
    unscaled = transformers.LlamaForCausalLM(transformers.LlamaConfig(**llama_config))
    unscaled.load_state_dict(model.state_dict())
    moved = abs(reference_loss(model, tokens, B) - reference_loss(unscaled, tokens, B))
    checks.check(moved > 1e-4, f"linear rope_scaling moves transformers' loss by {moved:.1e} (> 1e-4)")
    for stage, ranks in [(0, 1), (3, 2)]:
        run_dir, p = train(f"rope_linear_{stage}", folder, ranks, "--set", f"zero.stage={stage}", "--set", "optim.lr=0",
                           "--set", "checkpoint.at_end=true")
        if not checks.check(p.returncode == 0, f"linear rope_scaling: stage {stage} on {ranks} rank(s) starts "
                                               f"({(p.stdout + p.stderr)[-400:]})"):
            continue
        loss = next(r["loss"] for r in train_records(run_dir) if r["type"] == "train")
        want = reference_loss(model, tokens, B * ranks)
        checks.check(abs(loss - want) < 1e-6, f"linear rope_scaling, stage {stage}, {ranks} rank(s): step-1 loss "
                                              f"{loss:.7f} = transformers' {want:.7f} ({abs(loss - want):.1e})")
        if stage == 3:
            out = os.path.join(work, "rope_linear_export")
            e = subprocess.run([binary, "ckpt", "export", os.path.join(run_dir, "checkpoints"), "--format", "hf",
                                "--out", out], capture_output=True, text=True, timeout=120)
            if checks.check(e.returncode == 0, f"the linear-scaled run exports ({e.stderr[-300:]})"):
                back = transformers.LlamaForCausalLM.from_pretrained(out)
                got = reference_loss(back, tokens, B)
                checks.check(back.config.rope_scaling == {"type": "linear", "factor": 4.0}
                             and abs(got - reference_loss(model, tokens, B)) < 1e-6,
                             f"transformers loads the export with its rope_scaling ({back.config.rope_scaling}) "
                             f"and loss ({got:.7f})")

    # rope_scaling's null is a value, no scaling (as in Hugging Face's configs), unlike other keys'
    # null (not given): against the checkpoint's linear scaling it is a conflict, refused, not the
    # checkpoint's scaling taken in silence.
    run_dir, p = train("rope_null", folder, 1, "--set", "model.rope_scaling=null")
    checks.check(p.returncode == 2 and "model.rope_scaling = null" in p.stderr and "drop these keys or match them"
                 in p.stderr, f"model.rope_scaling = null against a scaled checkpoint: refused ({p.stderr[-300:]})")

    folder3 = os.path.join(work, "llama_rope_llama3")
    os.makedirs(folder3)
    with open(os.path.join(folder, "model.safetensors"), "rb") as src, \
            open(os.path.join(folder3, "model.safetensors"), "wb") as dst:
        dst.write(src.read())
    with open(os.path.join(folder, "config.json")) as f:
        hf = json.load(f)
    # Head size 8 at base 10000 (wavelengths 6, 63, 628 and 6283 positions): from 64 original
    # positions llama3 keeps the first frequency, blends the second and divides the last two.
    hf["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 64}
    hf["max_position_embeddings"] = 131072  # Llama 3.1's and 3.2's context: runs and samples size their own
    with open(os.path.join(folder3, "config.json"), "w") as f:
        json.dump(hf, f)
    cfg = llama_reference.LlamaConfig.from_hf(json.dumps(hf))
    params = {n: t.detach().double() for n, t in model.state_dict().items()}
    x, y = windows(tokens, B)
    want = llama_reference.forward(params, x, y, cfg)[1].item()
    plain = llama_reference.forward(params, x, y, llama_reference.LlamaConfig.from_hf(
        json.dumps({**hf, "rope_scaling": None})))[1].item()
    checks.check(abs(want - plain) > 1e-4, f"llama3 rope_scaling moves the reference's loss by {abs(want - plain):.1e}")
    run_dir, p = train("rope_llama3", folder3, 2, "--set", "zero.stage=3")
    if checks.check(p.returncode == 0, f"llama3 rope_scaling: stage 3 on 2 ranks starts ({p.stderr[-400:]})"):
        loss = next(r["loss"] for r in train_records(run_dir) if r["type"] == "train")
        want2 = llama_reference.forward(params, *windows(tokens, 2 * B), cfg)[1].item()
        checks.check(abs(loss - want2) < 1e-5, f"llama3 rope_scaling: step-1 loss {loss:.7f} = the float64 "
                                               f"reference's {want2:.7f} ({abs(loss - want2):.1e})")
        # The same model as transformers 5 writes its config.json: one rope_parameters object with the
        # base inside, no rope_theta or rope_scaling at the top (read as neither, it trained unscaled).
        folder5 = os.path.join(work, "llama_rope_parameters")
        shutil.copytree(folder3, folder5)
        v5 = {k: v for k, v in hf.items() if k not in ("rope_theta", "rope_scaling")}
        v5["rope_parameters"] = {**hf["rope_scaling"], "rope_theta": hf.get("rope_theta", 10000.0)}
        with open(os.path.join(folder5, "config.json"), "w") as f:
            json.dump(v5, f)
        run_dir, p = train("rope_parameters", folder5, 2, "--set", "zero.stage=3")
        if checks.check(p.returncode == 0, f"transformers 5's rope_parameters: the run starts ({p.stderr[-400:]})"):
            loss5 = next(r["loss"] for r in train_records(run_dir) if r["type"] == "train")
            checks.check(loss5 == loss, f"transformers 5's rope_parameters: step-1 loss {loss5:.7f} = rope_scaling's "
                                        f"{loss:.7f}")
    # sample --from the 131072-position model: greedy tokens after token 0, as the reference decodes
    # (on past the config's eos_token_id, as it does).
    p = subprocess.run([binary, "sample", "--from", folder3, "--tokens", "6", "--top-k", "1", "--ignore-eos"],
                       capture_output=True, text=True, timeout=120)
    ours = [int(t) for t in p.stdout.split()] if p.returncode == 0 else p.stderr.strip()
    seq = [0]
    for _ in range(6):
        x = torch.tensor([seq])
        logits = llama_reference.forward(params, x, torch.zeros_like(x), cfg)[0]
        seq.append(int(logits[0, -1].argmax()))
    checks.check(ours == seq[1:], f"sample --from a llama3-scaled model of 131072 positions: greedy tokens {ours} = "
                                  f"the reference's {seq[1:]}")


def check_end_of_text(checks, work, binary, folder, train):
    """sample --from stops after the model's end-of-text token as transformers' generate does:
    config.json's eos_token_id, or generation_config.json's before it (a list: an instruct model's
    ends of turn); --ignore-eos draws all the tokens asked for. A run started from the folder
    (train.init_from, weights unchanged at lr 0) stops its samples there too, and its export's
    config.json carries those ids, so the export's generate stops there as well (the run took
    config.json's alone: its samples ran on past the folder's ends of turn)."""
    def ours(path, *extra):
        p = subprocess.run([binary, "sample", "--from", path, "--tokens", "8", "--temperature", "0", *extra],
                           capture_output=True, text=True, timeout=120)
        return ([int(t) for t in p.stdout.split()], p.stderr) if p.returncode == 0 else (p.stderr.strip(), "")

    def theirs(path):  # what from_pretrained reads of the folder, generation_config.json included
        model = transformers.LlamaForCausalLM.from_pretrained(path).float().eval()
        prompt = torch.tensor([[0]])
        with torch.no_grad():
            return model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=8, do_sample=False,
                                  pad_token_id=VOCAB - 1)[0, 1:].tolist()

    def variant(name, eos, generation_eos=None):
        path = os.path.join(work, name)
        shutil.copytree(folder, path)
        with open(os.path.join(path, "config.json")) as f:
            hf = json.load(f)
        hf["eos_token_id"] = eos
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(hf, f)
        generation = os.path.join(path, "generation_config.json")
        if os.path.exists(generation):
            os.remove(generation)
        if generation_eos is not None:
            with open(generation, "w") as f:
                json.dump({"eos_token_id": generation_eos, "transformers_version": transformers.__version__}, f)
        return path

    full, _ = ours(variant("eos_none", None), "--ignore-eos")
    if not checks.check(isinstance(full, list) and len(full) == 8, f"sample --ignore-eos: 8 tokens ({full})"):
        return
    # generation_config.json as transformers reads it: one that does not parse is left for
    # config.json's ids; one without eos_token_id means none (generate then runs to the end).
    for name, text, wanted in (("eos_generation_unparsable", '{"eos_token_id": ', full[:3]),
                               ("eos_generation_without_it", '{"max_length": 20}', full)):
        path = variant(name, full[2])
        with open(os.path.join(path, "generation_config.json"), "w") as f:
            f.write(text)
        got, err = ours(path)
        checks.check(got == wanted == theirs(path), f"sample --from, generation_config.json {text!r}: {got}, as "
                                                    f"generate ({wanted}; {err.strip()[-160:]})")
    unused = next(i for i in range(VOCAB) if i not in full)
    cases = (("eos_third", full[2], None), ("eos_generation_list", unused, [VOCAB - 1, full[4], full[5]]))
    for name, eos, generation_eos in cases:
        path = variant(name, eos, generation_eos)
        got, err = ours(path)
        ends = {eos} if generation_eos is None else set(generation_eos)
        stop = next(i for i, t in enumerate(full) if t in ends)
        checks.check(got == full[:stop + 1] == theirs(path) and f"end-of-text token {full[stop]}" in err,
                     f"sample --from, eos_token_id {eos}, generation_config.json's {generation_eos}: {got}, ends as "
                     f"generate does ({full[:stop + 1]}; {err.strip()[-160:]})")
        got, _ = ours(path, "--ignore-eos")
        checks.check(got == full, f"... and with --ignore-eos all 8 tokens ({got})")
        run_dir, p = train(f"{name}_run", path, 1, "--set", "optim.lr=0", "--set", "optim.min_lr=0", "--set",
                           "checkpoint.at_end=true")
        if not checks.check(p.returncode == 0, f"{name}: a run starts from the folder ({p.stderr.strip()[-300:]})"):
            continue
        s = subprocess.run([binary, "sample", "--run", run_dir, "--tokens", "8", "--temperature", "0"],
                           capture_output=True, text=True, timeout=120)
        from_run = [int(t) for t in s.stdout.split()] if s.returncode == 0 else s.stderr.strip()
        exported = os.path.join(work, f"{name}_export")
        e = subprocess.run([binary, "ckpt", "export", os.path.join(run_dir, "checkpoints"), "--format", "hf", "--out",
                            exported], capture_output=True, text=True, timeout=120)
        if not checks.check(e.returncode == 0, f"{name}: the run's checkpoint exports ({e.stderr.strip()[-300:]})"):
            continue
        with open(os.path.join(exported, "config.json")) as f:
            exported_eos = json.load(f).get("eos_token_id")
        wanted = eos if generation_eos is None else generation_eos
        checks.check(from_run == full[:stop + 1] and exported_eos == wanted and theirs(exported) == full[:stop + 1],
                     f"... a run from it (lr 0) samples {from_run} and its export's eos_token_id is {exported_eos} "
                     f"({wanted}): generate on the export ends as on the folder")


def check_export_targets(checks, work, binary, train, source, exported, ckpt):
    """An HF export writes only into a new folder or over an earlier export: over the folder a run
    started from (train.init_from), even one an export wrote, or over a model no export wrote, it
    would lose those weights (it used to replace them, exit 0)."""
    def export(ckpt_dir, out):
        return subprocess.run([binary, "ckpt", "export", ckpt_dir, "--format", "hf", "--out", out],
                              capture_output=True, text=True, timeout=120)

    def contents(folder):
        return {n: open(os.path.join(folder, n), "rb").read() for n in sorted(os.listdir(folder))}

    foreign = os.path.join(work, "foreign_model")
    shutil.copytree(source, foreign)  # transformers' save_pretrained
    with open(os.path.join(foreign, "pytorch_model.bin"), "wb") as f:
        f.write(b"someone else's")
    before = contents(foreign)
    e = export(ckpt, foreign)
    lines = e.stderr.strip().splitlines()
    checks.check(e.returncode == 2 and len(lines) == 1 and "a model that no export wrote" in lines[0] and
                 contents(foreign) == before,
                 f"export over a model folder no export wrote: refused, the folder as it was ({lines})")
    # A run started from an earlier export, exported over it.
    run_dir, p = train("from_export", exported, 1, "--set", "checkpoint.at_end=true")
    if checks.check(p.returncode == 0, f"a run starts from an export ({p.stderr[-300:]})"):
        before = contents(exported)
        e = export(os.path.join(run_dir, "checkpoints"), exported)
        lines = e.stderr.strip().splitlines()
        checks.check(e.returncode == 2 and len(lines) == 1 and "the folder this run started from" in lines[0] and
                     contents(exported) == before,
                     f"export over the run's own train.init_from: refused, the weights as they were ({lines})")
        again = export(ckpt, exported)
        checks.check(again.returncode == 0, f"another run's export over the earlier export goes on ({again.stderr})")
        # ... also from another working directory, with train.init_from relative to the run's: the
        # run recorded the absolute path (extra.init_from_path).
        relative_run = os.path.join(work, "from_export_rel")
        r = subprocess.run([binary, "train", "--config", os.path.join(work, "config.json"), "--run-dir",
                            relative_run, "--set", f"train.init_from={os.path.basename(exported)}", "--set",
                            "checkpoint.at_end=true"], capture_output=True, text=True, timeout=300, cwd=work)
        if checks.check(r.returncode == 0, f"a run starts from a relative init_from ({r.stderr[-300:]})"):
            e = subprocess.run([binary, "ckpt", "export", os.path.join(relative_run, "checkpoints"), "--format", "hf",
                                "--out", exported], capture_output=True, text=True, timeout=120, cwd="/")
            checks.check(e.returncode == 2 and "the folder this run started from" in e.stderr,
                         f"... and from / its export over it is refused all the same ({e.stderr.strip()})")
    # An export from before exports named themselves (metadata {"format": "pt"} alone, a config.json
    # with no transformers_version, which save_pretrained always writes): still an earlier export.
    legacy = os.path.join(work, "legacy_export")
    shutil.copytree(exported, legacy)
    from safetensors.torch import load_file, save_file
    for name in os.listdir(legacy):
        if name.endswith(".safetensors"):
            path = os.path.join(legacy, name)
            save_file(load_file(path), path, metadata={"format": "pt"})
    e = export(ckpt, legacy)
    checks.check(e.returncode == 0, f"an export from before exported_by is written over ({e.stderr.strip()})")
    # Someone's shard (save_pretrained's metadata alone) beside an export that names its files: not
    # taken for an export from before they were named (the export deleted it, exit 0).
    mixed = os.path.join(work, "export_and_someones_shard")
    shutil.copytree(exported, mixed)
    e = export(ckpt, mixed)  # an export of this build: its files name it
    shutil.copy(os.path.join(source, "model.safetensors"), os.path.join(mixed, "model-00001-of-00003.safetensors"))
    before = contents(mixed)
    e = export(ckpt, mixed)
    checks.check(e.returncode == 2 and "a model that no export wrote (model-00001-of-00003.safetensors)" in e.stderr
                 and contents(mixed) == before,
                 f"someone's shard beside an earlier export: refused, the folder as it was ({e.stderr.strip()})")
    # Someone's tokenizer in a folder with no export's tensors: refused (the export overwrote it, or
    # left it to number another model's tokens); a folder of unrelated files takes the export.
    notes = os.path.join(work, "notes_and_tokenizer")
    os.makedirs(notes)
    with open(os.path.join(notes, "README.md"), "w") as f:
        f.write("my notes\n")
    with open(os.path.join(notes, "tokenizer.json"), "w") as f:
        f.write('{"someone": "else"}\n')
    before = contents(notes)
    e = export(ckpt, notes)
    checks.check(e.returncode == 2 and "a tokenizer that no export wrote (tokenizer.json)" in e.stderr
                 and contents(notes) == before, f"someone's tokenizer.json: refused, as it was ({e.stderr.strip()})")
    os.remove(os.path.join(notes, "tokenizer.json"))
    e = export(ckpt, notes)
    checks.check(e.returncode == 0 and "README.md" in os.listdir(notes),
                 f"a folder of unrelated files takes the export, its files kept ({e.stderr.strip()})")
    e = export(ckpt, notes)
    checks.check(e.returncode == 0, f"... and an export over that export goes on ({e.stderr.strip()})")
    # An export cut after it removed the earlier export's files, before its own took their names:
    # the run's tokenizer alone is left (a run with its own vocabulary, written as a tokenizer),
    # which the next export completes (it was refused as someone else's); another tokenizer stays
    # refused.
    char_config = os.path.join(work, "char_run.json")
    with open(char_config, "w") as f:
        json.dump({"model": {"n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 16, "vocab_size": 64},
                   "train": {"max_steps": 1, "micro_batch": 2, "num_threads": 1}, "checkpoint": {"at_end": True}}, f)
    char_run, cut = os.path.join(work, "char_run"), os.path.join(work, "cut_export")
    subprocess.run([binary, "train", "--config", char_config, "--run-dir", char_run], capture_output=True, timeout=300)
    first = export(os.path.join(char_run, "checkpoints"), cut)
    for name in os.listdir(cut):
        if not name.startswith("tokenizer"):
            os.remove(os.path.join(cut, name))
    left = sorted(os.listdir(cut))
    e = export(os.path.join(char_run, "checkpoints"), cut)
    checks.check(first.returncode == 0 and left == ["tokenizer.json", "tokenizer_config.json"] and e.returncode == 0
                 and "config.json" in os.listdir(cut),
                 f"a cut export's own tokenizer alone ({left}): the next export completes it ({e.stderr.strip()})")
    for name in os.listdir(cut):
        if not name.startswith("tokenizer"):
            os.remove(os.path.join(cut, name))
    with open(os.path.join(cut, "tokenizer.json"), "a") as f:
        f.write(" ")
    e = export(os.path.join(char_run, "checkpoints"), cut)
    checks.check(e.returncode == 2 and "a tokenizer that no export wrote (tokenizer.json)" in e.stderr,
                 f"... where it differs from the run's, refused ({e.stderr.strip()})")
    # Someone's safetensors without a config.json: not an export's either.
    bare = os.path.join(work, "bare_weights")
    os.makedirs(bare)
    shutil.copy(os.path.join(source, "model.safetensors"), os.path.join(bare, "model.safetensors"))
    before = contents(bare)
    e = export(ckpt, bare)
    checks.check(e.returncode == 2 and "a model that no export wrote" in e.stderr and contents(bare) == before,
                 f"a folder of someone's model.safetensors alone: refused ({e.stderr.strip()})")


def make_models():
    torch.manual_seed(0)
    gpt = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=2))
    llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=32, rms_norm_eps=1e-5, tie_word_embeddings=False))
    return {"gpt2": gpt, "llama": llama}


def main():
    split = sys.argv.index("--")
    launcher, binary = sys.argv[1:split], sys.argv[split + 1]
    checks = Checks()
    work = checks.work_folder("zt_init_from_")
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, VOCAB, 20000)
    data = os.path.join(work, "tokens.bin")
    write_tokens(data, tokens)
    config = os.path.join(work, "config.json")
    with open(config, "w") as f:
        json.dump({"model": {}, "train": {"micro_batch": B, "seq_len": T, "max_steps": 1, "eval_batches": 1,
                                          "num_threads": 1},
                   "data": {"train_files": data, "val_files": data, "order": "sequential"},
                   "optim": {"warmup_steps": 0}, "log": {"sample_tokens": 0, "progress": "plain"}}, f)

    def train(name, source, ranks, *sets):
        run_dir = os.path.join(work, name)
        cmd = ([binary] if ranks == 1 else launcher + ["-np", str(ranks), binary]) + [
            "train", "--config", config, "--run-dir", run_dir, "--set", f"train.init_from={source}", *sets]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        return run_dir, p

    sources = []  # (label, path, transformers model whose loss is the reference)
    for arch, model in make_models().items():
        for dtype in ("f32", "f16", "bf16"):  # f16 from the fp32 values (Module.to converts in place)
            saved = model.to({"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[dtype])
            for sharded in ((False, True) if dtype != "f16" else (False,)):
                folder = os.path.join(work, f"{arch}_{dtype}_{'sharded' if sharded else 'single'}")
                saved.save_pretrained(folder, safe_serialization=True, max_shard_size="20KB" if sharded else "10GB")
                reference = type(model).from_pretrained(folder, torch_dtype=torch.float32)
                sources.append((f"{arch} {dtype} {'sharded' if sharded else 'one file'}", folder, reference))
            model.float()
    for dtype in ("f32", "bf16"):
        # A copy: Module.to converts in place, and sources[0]'s reference must stay fp32.
        ref = copy.deepcopy(sources[0][2])
        if dtype == "bf16":
            ref = ref.to(torch.bfloat16).float()
        path = os.path.join(work, f"gpt2_{dtype}.bin")
        write_llmc_model(path, ref, dtype)
        sources.append((f"llm.c {dtype}", path, ref))
    by_label = {label: (label, path, ref) for label, path, ref in sources}
    checks.check(any(f.startswith("model-0000") for f in os.listdir(by_label["gpt2 f32 sharded"][1])),
                 "transformers wrote the sharded folders as shards with an index")

    for label, path, reference in sources:
        full = (label.endswith("one file") and " f16 " not in label) or "llm.c f32" in label
        grid = [(0, 1), (1, 2), (2, 3), (3, 2), (3, 3)] if full else [(3, 2)]
        for stage, ranks in grid:
            run_dir, p = train(f"run_{len(os.listdir(work))}", path, ranks, "--set", f"zero.stage={stage}")
            if not checks.check(p.returncode == 0, f"{label}: stage {stage} on {ranks} rank(s) starts from it "
                                                   f"({(p.stdout + p.stderr)[-500:]})"):
                continue
            recs = train_records(run_dir)
            setup = next((r for r in recs if r["type"] == "setup_memory"), None)
            checks.check(setup is not None and all(m == setup["predicted_bytes"] for m in setup["measured_peak_bytes"]),
                         f"{label}: stage {stage}, {ranks} rank(s): the load's peak on every rank is the prediction's "
                         f"to the byte")
            loss = next(r["loss"] for r in recs if r["type"] == "train")
            ref = reference_loss(reference, tokens, B * ranks)
            checks.check(abs(loss - ref) < 1e-6, f"{label}: stage {stage}, {ranks} rank(s): step-1 loss {loss:.7f} "
                                                 f"= transformers' {ref:.7f} ({abs(loss - ref):.1e})")
            if stage == 3:
                # A rank reads its shard, within 10% (rank 0's shard of the model holds more of the
                # file's rows where the vocabulary's padding, never read, falls in another rank's): an
                # llm.c matrix cut by a shard boundary (stored transposed) read whole gave a rank of 2
                # 63% of the file.
                read = next((r["bytes_read_by_rank"] for r in recs if r["type"] == "init_from"), [])
                size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path)
                           if f.endswith(".safetensors")) if os.path.isdir(path) else os.path.getsize(path)
                checks.check(len(read) == ranks and max(read) < 1.1 * size / ranks,
                             f"{label}: every stage-3 rank of {ranks} reads its share of the file's {size} bytes "
                             f"({read})")

    # The vocabulary in chunks (train.head_chunks): every chunk of the token table and the head
    # comes from the file (all but the first once started as zeros), the step-1 loss transformers'.
    for label in ("gpt2 f32 one file", "llama f32 one file", "llm.c f32"):
        _, path, reference = by_label[label]
        for chunks, stage, ranks in ((2, 0, 1), (2, 3, 2)):  # 2: the most the padded 128 rows take
            run_dir, p = train(f"run_{len(os.listdir(work))}", path, ranks, "--set", f"zero.stage={stage}",
                               "--set", f"train.head_chunks={chunks}")
            if checks.check(p.returncode == 0, f"{label}: head_chunks {chunks} starts from it ({p.stderr[-300:]})"):
                loss = next(r["loss"] for r in train_records(run_dir) if r["type"] == "train")
                ref = reference_loss(reference, tokens, B * ranks)
                checks.check(abs(loss - ref) < 1e-6, f"{label}: head_chunks {chunks}, stage {stage}, {ranks} rank(s): "
                                                     f"step-1 loss {loss:.7f} = transformers' {ref:.7f}")

    # debug-state (the parity tests' oracle) starts from the same weights: its loss transformers'.
    from safetensors.numpy import load_file
    for label in ("gpt2 f32 one file", "llama f32 one file"):
        _, path, reference = by_label[label]
        out = os.path.join(work, f"debug_{len(os.listdir(work))}.safetensors")
        p = subprocess.run([binary, "debug-state", "--config", config, "--set", f"train.init_from={path}", "--out", out],
                           capture_output=True, text=True, timeout=120)
        if checks.check(p.returncode == 0, f"{label}: debug-state from it ({p.stderr[-300:]})"):
            state = load_file(out)
            with torch.no_grad():
                logits = reference.float().eval()(torch.tensor(state["inputs"].astype(np.int64))).logits
                ref = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                        torch.tensor(state["targets"].astype(np.int64)).reshape(-1))
            loss = float(state["loss"].reshape(-1)[0])
            checks.check(abs(loss - ref.item()) < 1e-5, f"{label}: debug-state's loss {loss:.7f} = transformers' "
                                                         f"{ref.item():.7f} on its batch")

    # Training goes on from the weights, and the export loads back into transformers.
    label, folder, reference = by_label["llama f32 one file"]
    periodic = os.path.join(work, "periodic.bin")  # a sequence a model learns in a few steps
    write_tokens(periodic, np.tile(np.arange(VOCAB // 4), 800))
    run_dir, p = train("llama_train", folder, 2, "--set", "zero.stage=3", "--set", "train.max_steps=8",
                       "--set", "checkpoint.at_end=true", "--set", "optim.lr=0.01",
                       "--set", f"data.train_files={periodic}", "--set", f"data.val_files={periodic}")
    if checks.check(p.returncode == 0, f"{label}: 8 steps at stage 3 on 2 ranks ({p.stderr[-300:]})"):
        losses = [r["loss"] for r in train_records(run_dir) if r["type"] == "train"]
        checks.check(losses[-1] < losses[0], f"the loss falls from the pretrained start ({losses})")
        out = os.path.join(work, "llama_export")
        ckpt = os.path.join(run_dir, "checkpoints")
        e = subprocess.run([binary, "ckpt", "export", ckpt, "--format", "hf", "--out", out], capture_output=True,
                           text=True, timeout=120)
        if checks.check(e.returncode == 0, f"the run exports ({e.stderr[-300:]})"):
            back = transformers.LlamaForCausalLM.from_pretrained(out)
            checks.check(back.config.num_key_value_heads == 2 and back.config.hidden_size == 32,
                         "transformers loads the export with the checkpoint's shape")
            # The run has no tokenizer: the special token ids are the source config's, not dropped.
            with open(os.path.join(folder, "config.json")) as f:
                source_ids = {k: v for k, v in json.load(f).items() if k in ("bos_token_id", "eos_token_id",
                                                                             "pad_token_id") and v is not None}
            with open(os.path.join(out, "config.json")) as f:
                exported = json.load(f)
            checks.check(source_ids and all(exported.get(k) == v for k, v in source_ids.items()),
                         f"the export carries the source's special token ids ({source_ids}; "
                         f"{ {k: exported.get(k) for k in source_ids} })")
            # sample --ckpt ends where generate on the export ends: at the source's eos_token_id, which
            # the checkpoints carry (the model learned 0, 1, 2, ...: greedy decoding meets it).
            p = subprocess.run([binary, "sample", "--ckpt", ckpt, "--tokens", "8", "--temperature", "0"],
                               capture_output=True, text=True, timeout=120)
            ours = [int(t) for t in p.stdout.split()] if p.returncode == 0 else p.stderr.strip()
            prompt = torch.tensor([[0]])
            with torch.no_grad():
                theirs = back.float().eval().generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=8,
                                                      do_sample=False, pad_token_id=VOCAB - 1)[0, 1:].tolist()
            checks.check(ours == theirs and len(ours) < 8,
                         f"sample --ckpt ends at the carried eos_token_id as generate on the export: {ours} = {theirs}")
            # --run too, from any directory: the ids its newest checkpoint carries (train.init_from as the
            # config keeps it may be relative to where the run started).
            p = subprocess.run([binary, "sample", "--run", os.path.abspath(run_dir), "--tokens", "8", "--temperature",
                                "0"], capture_output=True, text=True, timeout=120, cwd="/")
            by_run = [int(t) for t in p.stdout.split()] if p.returncode == 0 else p.stderr.strip()
            checks.check(by_run == theirs, f"sample --run (from /) ends there too: {by_run} = {theirs}")
            check_export_targets(checks, work, binary, train, folder, out, ckpt)

    # sample --from: greedy (top-k 1) continuation of token 0, against transformers' greedy decoding.
    for label, path, reference in (by_label["gpt2 f32 one file"], by_label["llama f32 one file"],
                                   by_label["llm.c f32"]):
        p = subprocess.run([binary, "sample", "--from", path, "--tokens", "8", "--top-k", "1"], capture_output=True,
                           text=True, timeout=120)
        ours = [int(t) for t in p.stdout.split()] if p.returncode == 0 else p.stderr.strip()
        with torch.no_grad():
            # An explicit mask: with pad_token_id 0, generate would take the prompt's token 0 for padding.
            prompt = torch.tensor([[0]])
            theirs = reference.float().eval().generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=8,
                                                       do_sample=False, pad_token_id=VOCAB - 1)[0, 1:].tolist()
        checks.check(ours == theirs, f"sample --from {label}: greedy tokens {ours} = transformers' {theirs}")

    check_end_of_text(checks, work, binary, by_label["llama f32 one file"][1], train)
    check_scaled_rope(checks, work, train, tokens, binary)

    # train.init_from reads a leading ~ as $HOME, as every path key does (it looked for "~/...").
    home_run = os.path.join(work, "from_home")
    p = subprocess.run([binary, "train", "--config", config, "--run-dir", home_run, "--set",
                        f"train.init_from=~/{os.path.basename(by_label['gpt2 f32 one file'][1])}"],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "HOME": work})
    checks.check(p.returncode == 0, f"train.init_from = ~/FOLDER reads $HOME/FOLDER ({p.stderr.strip()[-300:]})")
    # An llm.c export over the llm.c file the run started from: refused, the file as it was (it
    # was replaced, exit 0), as the HF export refuses the folder a run started from.
    started = os.path.join(work, "started_from.bin")
    shutil.copy(by_label["llm.c f32"][1], started)
    run_dir, p = train("from_llmc_file", started, 1, "--set", "checkpoint.at_end=true")
    if checks.check(p.returncode == 0, f"a run starts from an llm.c file ({p.stderr[-300:]})"):
        with open(started, "rb") as f:
            before = f.read()
        e = subprocess.run([binary, "ckpt", "export", os.path.join(run_dir, "checkpoints"), "--format", "llmc",
                            "--out", started], capture_output=True, text=True, timeout=120)
        with open(started, "rb") as f:
            after = f.read()
        checks.check(e.returncode == 2 and "the llm.c model file this run started from" in e.stderr
                     and after == before,
                     f"an llm.c export over the run's own train.init_from: refused, the file as it was "
                     f"({e.stderr.strip()})")

    # A tied GPT-2 whose file holds the head too (a plain state_dict saved: lm_head.weight equal to
    # wte), which transformers loads by tying it back: read as the same model.
    from safetensors.torch import save_file
    gpt_label, gpt_source, gpt_reference = sources[0]
    with_head = os.path.join(work, "gpt2_with_head")
    os.makedirs(with_head)
    state = {k: v.detach().clone().contiguous() for k, v in gpt_reference.state_dict().items()}
    checks.check("lm_head.weight" in state, "the state_dict holds the tied head")
    save_file(state, os.path.join(with_head, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(gpt_source, "config.json"), "rb") as src, open(os.path.join(with_head, "config.json"),
                                                                          "wb") as dst:
        dst.write(src.read())
    run_dir, p = train("with_head", with_head, 1)
    if checks.check(p.returncode == 0, f"a tied GPT-2 saved with lm_head.weight loads ({p.stderr[-300:]})"):
        loss = next(r["loss"] for r in train_records(run_dir) if r["type"] == "train")
        ref = reference_loss(gpt_reference, tokens, B)
        checks.check(abs(loss - ref) < 1e-6, f"... and its step-1 loss {loss:.7f} = transformers' {ref:.7f}")

    # Refusals, in one line with exit 2.
    gpt_folder = sources[0][1]
    os.makedirs(os.path.join(work, "broken"))
    for f in ("config.json", "model.safetensors"):
        with open(os.path.join(gpt_folder, f), "rb") as src, open(os.path.join(work, "broken", f), "wb") as dst:
            dst.write(src.read())
    with open(os.path.join(work, "broken", "config.json")) as f:
        hf = json.load(f)
    hf["n_layer"] = 3  # the file holds 2 layers
    with open(os.path.join(work, "broken", "config.json"), "w") as f:
        json.dump(hf, f)
    scaled = os.path.join(work, "scaled")
    os.makedirs(scaled)
    with open(os.path.join(by_label["llama f32 one file"][1], "config.json")) as f:
        hf = json.load(f)
    hf["rope_scaling"] = {"type": "dynamic", "factor": 2.0}
    with open(os.path.join(scaled, "config.json"), "w") as f:
        json.dump(hf, f)
    # A tied GPT-2 whose file holds another head than its token table: transformers 4.40 loads that
    # head into the shared tensor; a reader keeping the table would train another model.
    other_head = os.path.join(work, "gpt2_other_head")
    os.makedirs(other_head)
    state["lm_head.weight"] = state["lm_head.weight"] + 0.5
    save_file(state, os.path.join(other_head, "model.safetensors"), metadata={"format": "pt"})
    shutil.copy(os.path.join(gpt_source, "config.json"), os.path.join(other_head, "config.json"))
    # A folder holding pytorch_model.bin alone.
    torch_only = os.path.join(work, "torch_only")
    os.makedirs(torch_only)
    shutil.copy(os.path.join(gpt_source, "config.json"), os.path.join(torch_only, "config.json"))
    with open(os.path.join(torch_only, "pytorch_model.bin"), "wb") as f:
        f.write(b"not read")
    unscaled = os.path.join(work, "unscaled")
    os.makedirs(unscaled)
    with open(os.path.join(gpt_folder, "config.json")) as f:
        hf = json.load(f)
    hf["scale_attn_weights"] = False  # transformers would then skip attention's 1 / sqrt(head size)
    with open(os.path.join(unscaled, "config.json"), "w") as f:
        json.dump(hf, f)
    # An MLP of another width than 4 x n_embd; and an n_embd past 2^29, where 4 x n_embd overflowed
    # an int (undefined behaviour) before the model's own range refused it.
    gpt_variants = {}
    for name, changes in (("narrow_mlp", {"n_inner": 3 * hf["n_embd"]}), ("huge_embd", {"n_embd": 1 << 29})):
        gpt_variants[name] = os.path.join(work, name)
        os.makedirs(gpt_variants[name])
        with open(os.path.join(gpt_variants[name], "config.json"), "w") as f:
            json.dump(dict(hf, scale_attn_weights=True, **changes), f)
    # What transformers' Llama config may say that zerotrain's Llama does not compute: refused
    # naming the folder's config.json; "swish" is SiLU under another name, read as it.
    def llama_variant(name, **changes):
        folder = os.path.join(work, name)
        shutil.copytree(by_label["llama f32 one file"][1], folder)
        with open(os.path.join(folder, "config.json")) as f:
            hf = json.load(f)
        hf.update(changes)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(hf, f)
        return folder

    _, p = train("swish", llama_variant("llama_swish", hidden_act="swish"), 1)
    checks.check(p.returncode == 0, f"a Llama config's hidden_act 'swish' (SiLU) is read ({p.stderr[-200:]})")
    # Its training's dropout, as GPT-2's pdrops: not refused (it was, for eval and sample too).
    _, p = train("attention_dropout", llama_variant("llama_dropout", attention_dropout=0.1), 1)
    checks.check(p.returncode == 0, f"a Llama config's attention_dropout 0.1 is read ({p.stderr[-200:]})")
    _, p = train("tp2", llama_variant("llama_tp2", pretraining_tp=2), 1)
    checks.check(p.returncode == 0, f"pretraining_tp 2, dividing every width, is read ({p.stderr[-200:]})")
    # GPT-2's tanh GELU under transformers' other names, and 1e-5 as an fp32 value saves it.
    gpt_alike = os.path.join(work, "gpt2_alike")
    shutil.copytree(gpt_folder, gpt_alike)
    with open(os.path.join(gpt_alike, "config.json")) as f:
        hf = json.load(f)
    hf.update(activation_function="gelu_fast", layer_norm_epsilon=9.999999747378752e-06)
    with open(os.path.join(gpt_alike, "config.json"), "w") as f:
        json.dump(hf, f)
    _, p = train("gpt2_alike_run", gpt_alike, 1)
    checks.check(p.returncode == 0, f"GPT-2's gelu_fast and an fp32 layer_norm_epsilon of 1e-5 are read "
                                    f"({p.stderr[-200:]})")
    # A header length of 2^64 - 1 (a file of 0xff bytes): the length was taken for a negative one
    # that fits, and a bare std::length_error ended the run with exit 1.
    huge_header = os.path.join(work, "huge_header")
    os.makedirs(huge_header)
    shutil.copy(os.path.join(gpt_folder, "config.json"), os.path.join(huge_header, "config.json"))
    with open(os.path.join(huge_header, "model.safetensors"), "wb") as f:
        f.write(b"\xff" * 100)
    # Weights holding a NaN: refused as they load, naming the tensor and element (they used to
    # train on to a non-finite loss at step 1, exit 1), on every rank whichever one's shard holds it.
    from safetensors.torch import load_file
    nan_weights = os.path.join(work, "nan_weights")
    os.makedirs(nan_weights)
    shutil.copy(os.path.join(gpt_folder, "config.json"), os.path.join(nan_weights, "config.json"))
    nan_state = load_file(os.path.join(gpt_folder, "model.safetensors"))
    nan_state["transformer.h.1.mlp.c_fc.weight"][3, 5] = float("nan")
    save_file(nan_state, os.path.join(nan_weights, "model.safetensors"), metadata={"format": "pt"})
    nan_at = "tensor transformer.h.1.mlp.c_fc.weight (element {}) is nan".format(
        3 * nan_state["transformer.h.1.mlp.c_fc.weight"].shape[1] + 5)
    _, p = train("nan_2_ranks", nan_weights, 2, "--set", "zero.stage=3")
    lines = [line for line in p.stderr.splitlines() if line.startswith("zerotrain:")]  # not mpirun's
    checks.check(p.returncode == 2 and len(lines) == 1 and nan_at in lines[0] and "rank " in lines[0],
                 f"weights holding a NaN, 2 ranks at stage 3: refused naming it (exit {p.returncode}: {lines})")
    # Refused at the weights' load, a fresh run leaves the directory an earlier run wrote as it was
    # (its log was set aside, an empty one in its place).
    kept_dir, p = train("kept", gpt_folder, 1, "--set", "train.max_steps=1")
    before = sorted(os.listdir(kept_dir))
    with open(os.path.join(kept_dir, "metrics.jsonl")) as f:
        log_before = f.read()
    _, p = train("kept", nan_weights, 1)
    with open(os.path.join(kept_dir, "metrics.jsonl")) as f:
        log_after = f.read()
    checks.check(p.returncode == 2 and sorted(os.listdir(kept_dir)) == before and log_after == log_before,
                 f"a run refused at the weights' load leaves the earlier run's directory as it was "
                 f"({before} -> {sorted(os.listdir(kept_dir))}, log {len(log_before)} -> {len(log_after)} bytes)")
    # ... and a directory it made goes again: no empty log and checkpoint folder left behind.
    new_dir, p = train(os.path.join("made", "and", "refused"), nan_weights, 1, "--set", "checkpoint.every_steps=1")
    checks.check(p.returncode == 2 and not os.path.exists(os.path.join(work, "made")),
                 f"a run refused at the weights' load removes the directory it made "
                 f"({sorted(os.listdir(new_dir)) if os.path.exists(new_dir) else 'gone'})")
    fifo = os.path.join(work, "fifo_only", "weights_fifo.safetensors")
    os.makedirs(os.path.dirname(fifo))
    os.mkfifo(fifo)
    odd = os.path.join(work, "odd_paths")
    os.makedirs(odd)
    os.symlink("loop_b", os.path.join(odd, "loop_a"))
    os.symlink("loop_a", os.path.join(odd, "loop_b"))
    os.symlink(os.path.join(gpt_folder, "model.safetensors"), os.path.join(odd, "weights_link"))
    cut_export = os.path.join(odd, "cut_export")
    shutil.copytree(gpt_folder, cut_export)
    open(os.path.join(cut_export, ".zt-incomplete-output"), "w").close()
    for what, source, sets, fragments in [
        # A loop of symlinks (a filesystem exception's line without the key); safetensors under another
        # name, and a checkpoint folder's `latest` (both read as llm.c files with a bad magic); a
        # folder an export into was cut (refused as having no config.json, without saying why).
        ("a loop of symlinks", os.path.join(odd, "loop_a"), [], ["train.init_from", "loop_a: cannot be read"]),
        ("safetensors under another name", os.path.join(odd, "weights_link"), [], ["a safetensors file"]),
        ("a checkpoint folder's latest", os.path.join(work, "llama_train", "checkpoints", "latest"), [],
         ["a file of a zerotrain checkpoint folder"]),
        ("a folder an export into was cut", cut_export, [], [".zt-incomplete-output is there", "run the export again"]),
        # A FIFO by a weights file's name: refused by its name, never opened (its open waits for a writer).
        ("a FIFO named as a safetensors file", fifo, [], ["weights_fifo.safetensors", "a safetensors file"]),
        # A file of a folder: the folder is what reads (the files' own headers were read as llm.c's).
        ("a Hugging Face folder's config.json", os.path.join(by_label["llama f32 one file"][1], "config.json"), [],
         ["config.json: a file of the Hugging Face folder", "give the folder"]),
        ("a Hugging Face folder's pytorch_model.bin", os.path.join(torch_only, "pytorch_model.bin"), [],
         ["pytorch_model.bin: a file of the Hugging Face folder", "give the folder"]),
        ("a run directory's final weights", os.path.join(work, "llama_train", "final.safetensors"), [],
         ["final.safetensors: a file of a zerotrain run directory", "ckpt export"]),
        ("a head count no multiple of the key/value heads", llama_variant("llama_kv3", num_key_value_heads=3), [],
         ["llama_kv3/config.json", "num_key_value_heads = 3"]),
        # Out of zerotrain's range: the folder's config.json named, not the run's config (whose
        # --set the error suggested, which the folder's key then refused as a conflict).
        ("a value out of range in the folder's config", llama_variant("llama_theta0", rope_theta=0), [],
         ["llama_theta0/config.json: rope_theta = 0: must be in [1, 1e+12]"]),
        ("transformers 5's rope_parameters out of range",
         llama_variant("llama_v5_theta0", rope_parameters={"rope_type": "default", "rope_theta": 0.5}), [],
         ["llama_v5_theta0/config.json: rope_parameters: rope_theta = 0.5: must be in [1, 1e+12]"]),
        ("a partial rotary factor", llama_variant("llama_partial", partial_rotary_factor=0.5), [],
         ["llama_partial/config.json: partial_rotary_factor = 0.5", "whole of each head"]),
        ("rotary parameters per layer type",
         llama_variant("llama_per_layer", rope_parameters={"full_attention": {"rope_type": "default"}}), [],
         ["llama_per_layer/config.json: rope_parameters", "one object per layer type"]),
        # A factor without its type: it was read as no scaling (the model trained and exported unscaled).
        ("a rope_scaling that names no type", llama_variant("llama_untyped", rope_scaling={"factor": 2.0}), [],
         ["llama_untyped/config.json: rope_scaling", "names no rope_type"]),
        ("a rope_scaling whose type is null",
         llama_variant("llama_null_type", rope_scaling={"type": None, "factor": 2.0}), [],
         ["llama_null_type/config.json: rope_scaling", "names no rope_type"]),
        # Checked before fp32 makes it inf ("factor = inf must be at least 1").
        ("a rope_scaling factor past fp32",
         llama_variant("llama_huge_factor", rope_scaling={"rope_type": "linear", "factor": 1e300}), [],
         ["llama_huge_factor/config.json: rope_scaling: factor = 1e+300: must be a finite fp32 number"]),
        ("pretraining_tp that does not divide the vocabulary", llama_variant("llama_tp", pretraining_tp=3), [],
         ["llama_tp/config.json: pretraining_tp = 3", "set it to 1"]),
        # The width the heads do not divide is named (it was head_dim, which the file does not set).
        ("a width the heads do not divide", llama_variant("llama_width", hidden_size=34), [],
         ["llama_width/config.json: hidden_size = 34", "num_attention_heads to divide it"]),
        ("conflicting model keys", gpt_folder, ["--set", "model.n_layer=4", "--set", "model.n_embd=64"],
         ["model.n_layer = 4", "the checkpoint has 2", "model.n_embd = 64", "--set model.n_embd=64"]),
        ("a tensor the config needs but the file lacks", os.path.join(work, "broken"), [],
         ["broken", "no tensor 'transformer.h.2.ln_1.weight'"]),
        ("an unsupported config", scaled, [], ["scaled/config.json", "rope_scaling", "not dynamic"]),
        ("attention left unscaled", unscaled, [], ["unscaled/config.json", "scale_attn_weights", "1 / sqrt"]),
        ("an MLP narrower than 4 x n_embd", gpt_variants["narrow_mlp"], [],
         ["narrow_mlp/config.json", "n_inner", "4 x n_embd"]),
        ("an n_embd of 2^29", gpt_variants["huge_embd"], [], ["n_embd", "536870912", "out of range"]),
        ("a missing path", os.path.join(work, "nothing"), [], ["train.init_from: ", "nothing", "no such"]),
        ("a tied model's file with another head", other_head, [],
         ["tensor 'lm_head.weight' differs from 'transformer.wte.weight'", "tie_word_embeddings",
          "zerotrain's GPT-2 ties its head"]),
        ("pytorch_model.bin alone", torch_only, [], ["only pytorch_model.bin", "safe_serialization=True"]),
        ("a safetensors header length past 2^63", huge_header, [],
         ["huge_header/model.safetensors", "header length 18446744073709551615 does not fit"]),
        ("weights holding a NaN", nan_weights, [], ["nan_weights", nan_at, "cannot be trained from"]),
        ("a zerotrain run", os.path.join(work, "llama_train"), [], ["a zerotrain run directory", "ckpt export"]),
        ("a zerotrain checkpoint folder", os.path.join(work, "llama_train", "checkpoints"), [],
         ["a zerotrain checkpoint folder", "--resume"]),
    ]:
        name = f"refused_{len(os.listdir(work))}"
        _, p = train(name, source, 1, *sets)
        lines = p.stderr.strip().splitlines()
        checks.check(p.returncode == 2 and len(lines) == 1 and all(f in lines[0] for f in fragments),
                     f"{what}: refused in one line, exit 2 (exit {p.returncode}: {lines})")
        # Refused before the model is allocated or the run directory made: the folder's tensors
        # are checked against the model from their headers (a tensor of another shape was found
        # once the model was allocated, 2 GB for GPT-2 124M's defaults).
        if "tensor" in what:
            checks.check(not os.path.exists(os.path.join(work, name)),
                         f"{what}: refused before the run directory is made")
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
