#!/usr/bin/env python3
"""llm.c's own Python writer into zerotrain (issue 32), on the CPU: llm.c's train_gpt2.py (the file
that writes gpt2_124M.bin and gpt2_124M_bf16.bin) builds its own GPT (its class, its
initialisation, GPT-2's vocabulary of 50257 and a small shape) and writes it with its own
write_model, in fp32 (version 3) and bf16 (version 5). Then, for each file:
  - the bytes are compared with those tests/checkpoint/init_from_test.py's writer gives for the
    same weights (the writer every init_from test in CI uses), after loading them into a
    transformers GPT-2;
  - zerotrain starts from the file (train.init_from, train.max_steps = 0) at stage 0 on one rank
    and at stage 3 on two (mpirun) and evaluates sequential windows (data.order = "sequential",
    llm.c's loader's), against llm.c's own forward (GPT.forward's loss, fp32; for the bf16 file with
    its weights rounded to bf16 first).
Nothing is fetched: train_gpt2.py is read from the path given (a clone of karpathy/llm.c; it is
not part of this repository). Needs torch and transformers (.venv-hf's python) and an MPI
launcher. Writes OUT.json and OUT.md; exit 1 if a check fails, 2 with one line if it cannot run.

usage: llmc_writer_check.py --train-gpt2-py PATH/train_gpt2.py --zerotrain build/zerotrain --out PREFIX
                            [--mpirun "mpirun --oversubscribe ..."] [--llmc-commit HASH] [--tolerance 1e-6]
"""
import argparse
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "checkpoint"))
from bench_harness import write_llmc_tokens  # noqa: E402
from mpirun_command import MPIRUN as MPIRUN_ARGS  # noqa: E402
from repo_commit import head_commit  # noqa: E402

B, T, EVAL_BATCHES, TRAIN_STEPS = 4, 32, 3, 40
SHAPE = dict(block_size=64, vocab_size=50257, n_layer=2, n_head=4, n_embd=64)
MPIRUN = shlex.join(MPIRUN_ARGS)


class CheckError(Exception):
    """The check cannot run (a missing input, a run that failed): one line, exit 2."""


def load_llmc(path):
    """llm.c's train_gpt2.py as a module, on Debian's torch 1.13: it imports torch._inductor.config
    at the top for its training loop's compile settings only (an empty stand-in where torch has no
    inductor), and its initialisation passes a generator to torch.nn.init.normal_, which torch 2
    accepts and 1.13 does not (a wrapper hands it to Tensor.normal_, which takes it in both)."""
    import inspect

    import torch
    if importlib.util.find_spec("torch._inductor") is None:
        for name in ("torch._inductor", "torch._inductor.config"):
            sys.modules.setdefault(name, types.ModuleType(name))
    if "generator" not in inspect.signature(torch.nn.init.normal_).parameters:
        def normal_(tensor, mean=0.0, std=1.0, generator=None):
            with torch.no_grad():
                return tensor.normal_(mean, std, generator=generator)
        torch.nn.init.normal_ = normal_
    spec = importlib.util.spec_from_file_location("llmc_train_gpt2", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def llmc_loss(llmc, model, tokens):
    """llm.c's GPT.forward loss, mean over the EVAL_BATCHES batches its loader would read."""
    import torch
    losses = []
    with torch.no_grad():
        for k in range(EVAL_BATCHES):
            buf = torch.tensor(tokens[k * B * T:k * B * T + B * T + 1].astype(np.int64))
            _, loss = model(buf[:-1].view(B, T), buf[1:].view(B, T))
            losses.append(loss.item())
    return float(np.mean(losses))


def train(model, tokens):
    """TRAIN_STEPS of AdamW through llm.c's forward, cycling over the batches the check evaluates."""
    import torch
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(TRAIN_STEPS):
        k = step % EVAL_BATCHES
        buf = torch.tensor(tokens[k * B * T:k * B * T + B * T + 1].astype(np.int64))
        _, loss = model(buf[:-1].view(B, T), buf[1:].view(B, T))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


def as_transformers(model):
    """The same weights in a transformers GPT2LMHeadModel (Conv1D weights are [in, out])."""
    import transformers
    c = model.config
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=c.vocab_size, n_positions=c.block_size,
                                                              n_layer=c.n_layer, n_head=c.n_head, n_embd=c.n_embd))
    transposed = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
    # Not the causal-mask buffers (".attn.bias": transformers keeps its own out of the state dict),
    # and lm_head.weight is wte's, tied on both sides.
    sd = {k: (v.t() if k.endswith(transposed) else v) for k, v in model.state_dict().items()
          if not k.endswith(".attn.bias")}
    missing, unexpected = hf.load_state_dict(sd, strict=False)
    if unexpected or not set(missing) <= {"lm_head.weight"}:
        raise CheckError(f"llm.c's GPT does not map onto transformers' GPT-2: missing {missing}, "
                         f"unexpected {unexpected}")
    return hf


def zerotrain_loss(zerotrain, mpirun, work, tag, model_file, val, stage, ranks):
    run_dir = os.path.join(work, f"run_{tag}_s{stage}_n{ranks}")
    config = os.path.join(work, f"config_{tag}_s{stage}_n{ranks}.json")
    with open(config, "w") as f:
        json.dump({"model": {}, "data": {"train_files": val, "val_files": val, "order": "sequential"},
                   "train": {"init_from": model_file, "micro_batch": B, "seq_len": T, "max_steps": 0,
                             "eval_batches": EVAL_BATCHES},
                   "zero": {"stage": stage}, "log": {"sample_tokens": 0, "progress": "plain"}}, f)
    cmd = [zerotrain, "train", "--config", config, "--run-dir", run_dir]
    if ranks > 1:
        cmd = mpirun + ["-np", str(ranks)] + cmd
    what = f"zerotrain ({tag}, stage {stage}, {ranks} ranks)"
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise CheckError(f"{what} ran past 600 s")
    if p.returncode != 0:
        last = [line for line in (p.stdout + p.stderr).splitlines() if line.strip()][-1:] or ["(no output)"]
        raise CheckError(f"{what}: exit {p.returncode}: {last[0][:300]}")
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        evals = [r["val_loss"] for r in map(json.loads, f) if r.get("type") == "eval"]
    if not evals:
        raise CheckError(f"{what}: no evaluation in {run_dir}/metrics.jsonl")
    return evals[-1]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--train-gpt2-py", required=True)
    ap.add_argument("--zerotrain", required=True)
    ap.add_argument("--out", required=True, help="output prefix: PREFIX.json and PREFIX.md")
    ap.add_argument("--mpirun", default=MPIRUN, help="the MPI launcher and its flags, one string")
    ap.add_argument("--llmc-commit", default="unknown")
    ap.add_argument("--tolerance", type=float, default=1e-6)
    args = ap.parse_args(argv)
    try:
        return check(args)
    except CheckError as e:
        print(f"llmc_writer_check: {e}", file=sys.stderr)
        return 2


def check(args):
    zerotrain, mpirun = os.path.abspath(args.zerotrain), shlex.split(args.mpirun)
    if not os.path.isfile(args.train_gpt2_py):
        raise CheckError(f"no llm.c train_gpt2.py at {args.train_gpt2_py}")
    if not os.access(zerotrain, os.X_OK):
        raise CheckError(f"no zerotrain binary at {args.zerotrain}")
    if not mpirun or shutil.which(mpirun[0]) is None:
        raise CheckError(f"MPI launcher {args.mpirun!r} not found (the stage-3 runs use two ranks)")
    import torch
    from init_from_test import write_llmc_model
    try:
        llmc = load_llmc(args.train_gpt2_py)
        missing = [name for name in ("GPT", "GPTConfig", "write_model") if not hasattr(llmc, name)]
    except Exception as e:  # noqa: BLE001: whatever llm.c's file raises on import, in one line
        raise CheckError(f"{args.train_gpt2_py} does not import: {type(e).__name__}: {e}")
    if missing:
        raise CheckError(f"{args.train_gpt2_py} has no {', '.join(missing)}")
    torch.manual_seed(1337)
    model = llmc.GPT(llmc.GPTConfig(**SHAPE))
    # A repeating sequence of 300 tokens: TRAIN_STEPS of AdamW through llm.c's forward over the
    # evaluated batches make its predictions sharp, so that weights read wrongly would move the
    # loss (at the initialisation, every read of the file gives about ln(50257)).
    tokens = np.tile(np.arange(0, 50000, 167), 8)[:EVAL_BATCHES * B * T + 1]
    train_loss = train(model, tokens)
    model.eval()
    result = {"commit": head_commit() or "unknown", "llmc_commit": args.llmc_commit, "shape": SHAPE, "batch": B,
              "seq_len": T, "eval_batches": EVAL_BATCHES, "train_steps": TRAIN_STEPS, "last_train_loss": train_loss,
              "tolerance": args.tolerance, "files": []}
    ok = True
    with tempfile.TemporaryDirectory() as work:
        val = os.path.join(work, "val.bin")
        write_llmc_tokens(val, tokens)
        for dtype, ours in (("float32", "f32"), ("bfloat16", "bf16")):
            path, mine = os.path.join(work, f"llmc_{ours}.bin"), os.path.join(work, f"test_writer_{ours}.bin")
            llmc.write_model(model, path, dtype)
            write_llmc_model(mine, as_transformers(model), ours)
            with open(path, "rb") as a, open(mine, "rb") as b:
                same_bytes = a.read() == b.read()
            reference = model
            if dtype == "bfloat16":  # llm.c's forward on the weights the bf16 file holds
                reference = llmc.GPT(llmc.GPTConfig(**SHAPE)).eval()
                reference.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in model.state_dict().items()})
            want = llmc_loss(llmc, reference, tokens)
            entry = {"dtype": dtype, "bytes": os.path.getsize(path), "same_bytes_as_test_writer": same_bytes,
                     "llmc_loss": want, "runs": []}
            ok &= same_bytes
            for stage, ranks in ((0, 1), (3, 2)):
                got = zerotrain_loss(zerotrain, mpirun, work, ours, path, val, stage, ranks)
                diff = abs(got - want)
                entry["runs"].append({"stage": stage, "ranks": ranks, "zerotrain_loss": got, "difference": diff,
                                      "passed": diff <= args.tolerance})
                ok &= diff <= args.tolerance
            result["files"].append(entry)
    result["passed"] = bool(ok)
    write_outputs(args.out, result)
    return 0 if ok else 1


def write_outputs(prefix, result):
    with open(prefix + ".json", "w") as f:
        json.dump(result, f, indent=1)
    r = result
    shape = ", ".join(f"{k} {v}" for k, v in r["shape"].items())
    lines = [f"# llm.c's own writer into zerotrain (commit {r['commit'][:12]}, llm.c {r['llmc_commit'][:12]})", "",
             f"llm.c's train_gpt2.py built its GPT ({shape}), trained it {r['train_steps']} AdamW steps on a repeating "
             f"sequence (last loss {r['last_train_loss']:.3f}) and wrote it with its write_model; zerotrain started "
             f"from each file (train.init_from, no step) and evaluated {r['eval_batches']} sequential batches of "
             f"{r['batch']} x {r['seq_len']} tokens, against llm.c's own forward on the same batches.", "",
             "| file | bytes | same bytes as the tests' writer | llm.c loss | stage | ranks | zerotrain loss "
             "| difference |",
             "|---|---:|---|---:|---:|---:|---:|---:|"]
    for e in r["files"]:
        for run in e["runs"]:
            lines.append(f"| {e['dtype']} | {e['bytes']} | {'yes' if e['same_bytes_as_test_writer'] else 'NO'} | "
                         f"{e['llmc_loss']:.7f} | {run['stage']} | {run['ranks']} | {run['zerotrain_loss']:.7f} | "
                         f"{run['difference']:.1e} |")
    lines += ["", f"Tolerance {r['tolerance']:.0e}: {'passed' if r['passed'] else 'FAILED'}.", ""]
    with open(prefix + ".md", "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
