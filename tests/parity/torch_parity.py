#!/usr/bin/python3
"""PyTorch parity test: zerotrain's forward, backward and AdamW steps equal a plain PyTorch model's.

Runs `zerotrain debug-state` (one forward/backward on one batch, then S AdamW steps on it), reads
the safetensors file it writes, and proves, within the bounds in TOLERANCES:
  * the file is well formed and holds exactly the tensors the config implies (no more, no fewer);
  * the reference is the file's model: GPT-2 (gpt2_reference), or a Llama (llama_reference) built
    from the Hugging Face config.json in its `hf_config` metadata;
  * loss, logits and every parameter gradient match a float64 PyTorch recomputation;
  * bf16 mode: working weights are exactly bf16(master) and the gradients are bf16 values;
  * the S training losses match S steps of torch.optim.AdamW (bf16: with the engine's fp32 master).
Never skips: without torch it fails. `--self-test` checks this harness on files it fakes itself.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: cuda_presence
from check_report import close_work_folders  # noqa: E402
from cuda_presence import require_cuda_device  # noqa: E402


def skip_without_device():
    """A CUDA run without a device skips before torch is imported: the import alone took 3-5 s of a
    2-core CI machine for each of the 36 parity_cuda tests, to print a skip."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--device")
    pre.add_argument("--zerotrain")
    pre.add_argument("--self-test", action="store_true")
    known, _ = pre.parse_known_args()
    if known.device == "cuda" and not known.self_test and known.zerotrain:
        missing = require_cuda_device(known.zerotrain, "the GPU parity run")
        if missing is not None:
            sys.exit(missing)


if __name__ == "__main__":
    skip_without_device()

try:
    import numpy as np
    import torch
except ImportError as e:
    sys.exit(f"torch_parity: FAIL: cannot import torch/numpy ({e}). Run with Debian's /usr/bin/python3 "
             "(apt install python3-torch); this test never skips.")

import gpt2_reference as ref  # noqa: E402
import llama_reference  # noqa: E402
from fake_engine_state import fake_engine_state  # noqa: E402
from requested_settings import settings_not_run  # noqa: E402
from safetensors_io import SafetensorsError, read_safetensors, write_safetensors  # noqa: E402

# Bounds on the normwise relative error max|ours - ref| / max|ref| (per step for train losses).
# The reference runs in float64 from the very weights in the file, so its own error (~1e-16) is
# negligible: what is measured is the engine's error alone.
TOLERANCES = {
    "f32": {
        "loss": 1e-5,        # fp32 roundoff 2^-24 ~ 6e-8, grown by long dot products and L layers
        "logits": 1e-5,      # same; normwise, so tiny logits do not inflate it
        "grad": 1e-4,        # backward adds a second pass of roundoff; LayerNorm/softmax backward
                             # subtract nearly equal terms, so allow 10x the forward bound
        "train_loss": 1e-4,  # AdamW divides by sqrt(v): gradient entries at fp32-noise level may
                             # step +-lr in either direction, so the trajectory drifts beyond step 0
                             # (at the configs' lr <= 1e-3; at 1e-2 a tiny model drifts past 1e-4, as
                             # the reference itself does with fp32-sized noise on its gradients)
    },
    "bf16": {
        "loss": 2e-2,        # the bound for bf16 compute, on the GPU; the CPU path keeps
        "logits": 2e-2,      # activations in fp32 with the same bf16 weights as the reference
                             # (measured ~1e-7): held to f32's bounds there (check_state)
        "grad": 1e-2,        # grads are stored in bf16 (unit roundoff 2^-8 ~ 3.9e-3 per element);
                             # at most two roundings (tied wte: head part, then embedding part added)
                             # plus fp32 noise: <= 2 * 2^-8 ~ 7.8e-3 < 1e-2
        "train_loss": 1e-3,  # on the CPU path the only difference is bf16-rounded gradients
                             # (measured ~4e-5 over 10 steps; a master weight near a rounding
                             # boundary may round the other way). A weight decay missing or misplaced
                             # moves this one-batch trajectory ~1e-4, under it (and at f32's 1e-4):
                             # tests/parity/trainer_trajectory_test.py holds decay by parameter,
                             # clipping and the schedule to 1e-4 on the final weights, and shows a
                             # reference without each lies outside its bounds
    },
    # precision.activations = "bf16" (with either parameter dtype): every activation, and every
    # activation gradient, is stored in bf16 between ops, so each op's inputs carry a rounding of
    # 2^-8 ~ 3.9e-3 and a gradient the roundings of the ops between it and the loss.
    "bf16_activations": {
        "loss": 2e-3,        # measured <= 3.4e-5 on the shipped debug configs (the mean over
                             # positions averages the roundings out)
        "logits": 2e-2,      # the bf16 bound; measured <= 6.1e-3
        "grad": 4e-2,        # a weight gradient multiplies a bf16 activation by a bf16 output
                             # gradient, itself rounded at each op back from the loss: measured up to
                             # 1.6e-2 (tiny_debug with fp32 parameters)
        "train_loss": 5e-3,  # the steps add bf16 forward noise to the trajectory's: measured <= 5e-4
    },
}
# AdamW hyperparameters debug-state must report (constant lr); "grad_clip" (global norm) is optional.
OPTIM_KEYS = ["lr", "beta1", "beta2", "eps", "weight_decay"]
DEFAULT_STEPS = 10
ENGINE_TIMEOUT_S = 540  # below ctest's 600 s so the engine's output is still shown


class Checks:
    """Collects named results; a check fails when its error is NaN or above its bound."""

    def __init__(self):
        self.rows, self.failures = [], []

    def bound(self, name, err, bound):
        ok = bool(err <= bound)  # False for NaN
        self.rows.append((name, f"{err:.3e}", f"{bound:.0e}", ok))
        if not ok:
            self.failures.append(f"{name}: error {err:.3e} > bound {bound:.0e}")

    def exact(self, name, mismatches):
        """mismatches: {tensor: number of elements that break the exact property}."""
        bad = {t: count for t, count in mismatches.items() if count}
        self.rows.append((name, f"{sum(bad.values())} elts", "exact", not bad))
        if bad:
            self.failures.append(f"{name}: violated by {bad}")

    def fail(self, message):
        self.failures.append(message)

    def print_table(self):
        width = max([len(r[0]) for r in self.rows] + [6])
        print(f"{'tensor':<{width}}  {'max rel err':>14}  {'bound':>7}  status")
        for name, err, bound, ok in self.rows:
            print(f"{name:<{width}}  {err:>14}  {bound:>7}  {'OK' if ok else 'FAIL'}")


def max_rel_err(ours, reference):
    """Normwise relative error max|ours - ref| / max|ref|; NaN in `ours` gives NaN."""
    ours, reference = np.asarray(ours, np.float64), np.asarray(reference, np.float64)
    num, den = np.max(np.abs(ours - reference)), np.max(np.abs(reference))
    if den == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return float(num / den)


def run_engine(args, state_path):
    """Runs `zerotrain debug-state`; exits 1 with its output if it fails."""
    if not os.access(args.zerotrain, os.X_OK):
        sys.exit(f"torch_parity: FAIL: engine binary {args.zerotrain!r} does not exist or is not executable")
    if os.path.exists(state_path):
        os.remove(state_path)  # never read a stale file from an earlier run
    cmd = [args.zerotrain, "debug-state", "--config", args.config, "--out", state_path,
           "--steps", str(args.steps),
           "--set", f"precision.param_dtype={args.param_dtype}",
           "--set", f"train.activation_checkpointing={args.activation_checkpointing}",
           "--set", f"device={args.device}",
           "--set", f"train.head_chunks={args.head_chunks}"]
    for override in args.set:
        cmd += ["--set", override]
    print("running:", " ".join(cmd), flush=True)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=ENGINE_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        sys.exit(f"torch_parity: FAIL: engine timed out after {ENGINE_TIMEOUT_S} s\n"
                 f"stdout:\n{e.stdout}\nstderr:\n{e.stderr}")
    if proc.returncode != 0 or not os.path.exists(state_path):
        sys.exit(f"torch_parity: FAIL: engine exited with {proc.returncode}"
                 f"{'' if os.path.exists(state_path) else f' and wrote no {state_path}'}\n"
                 f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")


def device_of(meta):
    """Where the engine ran: its run_config's device ("cpu" where the file does not say)."""
    try:
        return json.loads(meta.get("run_config", "{}")).get("device", "cpu")
    except (ValueError, AttributeError):
        return "cpu"


def activations_of(meta):
    """The activation dtype the engine ran with: its run_config's precision.activations ("fp32"
    where the file does not say)."""
    try:
        return json.loads(meta.get("run_config", "{}")).get("precision", {}).get("activations", "fp32")
    except (ValueError, AttributeError):
        return "fp32"


def reference_of(meta):
    """(the reference module, its config) for the model the file's metadata describes."""
    hf = json.loads(meta["hf_config"]) if "hf_config" in meta else {}
    if hf.get("model_type") == "llama":
        return llama_reference, llama_reference.LlamaConfig.from_hf(meta["hf_config"])
    return ref, ref.GPT2Config.from_json(meta["config"])


def expected_layout(R, cfg, param_dtype, steps, batch, seq):
    """{name: (safetensors dtype, shape)}: exactly what debug-state must write."""
    layout = {"inputs": ("I32", (batch, seq)), "targets": ("I32", (batch, seq)), "loss": ("F32", (1,)),
              "logits": ("F32", (batch, seq, cfg.vocab_size))}
    prefixes = ["", "grad."] + (["master."] if param_dtype == "bf16" else [])
    for name, shape in R.param_shapes(cfg).items():
        layout.update({prefix + name: ("F32", shape) for prefix in prefixes})
    if steps > 0:
        layout["train_losses"] = ("F32", (steps,))
    return layout


def check_metadata(meta, param_dtype, ckpt, steps, config_path, checks, overrides=()):
    """Returns (reference module, its config, optim dict) or None after recording why the metadata
    is unusable."""
    required = ["config", "param_dtype", "activation_checkpointing", "optim", "steps"]
    missing = [k for k in required if k not in meta]
    if missing:
        checks.fail(f"__metadata__ lacks {missing}")
        return None
    for key, want in [("param_dtype", param_dtype), ("activation_checkpointing", ckpt), ("steps", str(steps))]:
        if meta[key] != want:
            checks.fail(f"__metadata__ {key} is {meta[key]!r}, but {want!r} was requested")
    if overrides:
        for missed in settings_not_run(meta.get("run_config"), overrides):
            checks.fail(missed)
    try:
        R, cfg = reference_of(meta)
        optim = json.loads(meta["optim"])
        missing = [k for k in OPTIM_KEYS if k not in optim]
        unknown = [k for k in optim if k not in OPTIM_KEYS + ["grad_clip"]]
        if missing or unknown:  # an unknown key (a schedule, say) would change what the steps mean
            raise ValueError(f"metadata 'optim' lacks {missing} / has keys this test does not model "
                             f"{unknown}: {meta['optim']}")
        optim = {k: float(v) for k, v in optim.items()}
    except (ValueError, TypeError) as e:
        checks.fail(f"__metadata__ unusable: {e}")
        return None
    if config_path:  # the model the engine ran must be the one its config file (and --set) asks for
        try:
            with open(config_path) as f:
                model = json.load(f).get("model", {})
        except (OSError, ValueError, AttributeError) as e:
            print(f"note: cannot cross-check the model against {config_path} ({e}); using the metadata's")
            model = {}
        if isinstance(model, dict):
            for override in overrides:  # as the engine reads --set: JSON, else a string
                key, _, value = override.partition("=")
                if key.startswith("model."):
                    try:
                        model[key[len("model."):]] = json.loads(value)
                    except ValueError:
                        model[key[len("model."):]] = value
        for key in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size", "n_kv_head", "intermediate_size",
                    "tie_embeddings"):
            derived = key == "intermediate_size" and model.get(key) == 0  # 0: Llama's rule chose it
            if isinstance(model, dict) and key in model and hasattr(cfg, key) and model[key] != getattr(cfg, key) \
                    and not derived:
                checks.fail(f"{config_path}: model.{key} = {model[key]}, but the engine ran {getattr(cfg, key)}")
    return R, cfg, optim


def check_layout(tensors, dtypes, R, cfg, param_dtype, steps, checks):
    """Exactly the expected names, dtypes and shapes; tokens in range. Returns False if unusable."""
    inputs = tensors.get("inputs")
    if inputs is None or inputs.ndim != 2 or not 1 <= inputs.shape[1] <= cfg.block_size:
        checks.fail(f"inputs must be I32 [B, T] with 1 <= T <= block_size {cfg.block_size}, "
                    f"got {None if inputs is None else list(inputs.shape)}")
        return False
    failures_before = len(checks.failures)
    layout = expected_layout(R, cfg, param_dtype, steps, *inputs.shape)
    missing, extra = sorted(set(layout) - set(tensors)), sorted(set(tensors) - set(layout))
    if missing:
        checks.fail(f"missing tensors: {missing}")
    if extra:
        checks.fail(f"unexpected tensors: {extra}")
    for name in sorted(set(layout) & set(tensors)):
        want_dtype, want_shape = layout[name]
        if dtypes[name] != want_dtype or tuple(tensors[name].shape) != want_shape:
            checks.fail(f"{name}: {dtypes[name]} {list(tensors[name].shape)}, expected {want_dtype} {list(want_shape)}")
    for name in ("inputs", "targets"):
        t = tensors.get(name)
        if t is not None and t.size and not (0 <= t.min() and t.max() < cfg.vocab_size):
            checks.fail(f"{name}: token ids must lie in [0, {cfg.vocab_size}), got [{t.min()}, {t.max()}]")
    return len(checks.failures) == failures_before


def check_state(path, param_dtype, ckpt, steps, config_path=None, verbose=True, overrides=()):
    """Every check on one debug-state file; returns the list of failures (empty: parity holds)."""
    checks = Checks()
    try:
        tensors, dtypes, meta = read_safetensors(path)
    except (OSError, SafetensorsError) as e:
        return [f"cannot read {path}: {e}"]
    parsed = check_metadata(meta, param_dtype, ckpt, steps, config_path, checks, overrides)
    if parsed is None or not check_layout(tensors, dtypes, *parsed[:2], param_dtype, steps, checks):
        return checks.failures
    R, cfg, optim = parsed
    bounds = dict(TOLERANCES["bf16_activations" if activations_of(meta) == "bf16" else param_dtype])
    if param_dtype == "bf16" and activations_of(meta) != "bf16" and device_of(meta) == "cpu":
        bounds.update(loss=TOLERANCES["f32"]["loss"], logits=TOLERANCES["f32"]["logits"])
    names = list(R.param_shapes(cfg))
    weights = {n: tensors[n] for n in names}

    if param_dtype == "bf16":  # the mixed-precision contract, bit for bit, over all parameters
        rounded = {n: ref.bf16_round(torch.from_numpy(tensors["master." + n])).numpy() for n in names}
        checks.exact("<param> == bf16(master.<param>)",
                     {n: int(np.count_nonzero(tensors[n].view(np.uint32) != rounded[n].view(np.uint32)))
                      for n in names})
        checks.exact("grad.<param> holds bf16 values",
                     {n: int(np.count_nonzero(tensors["grad." + n].view(np.uint32) & 0xFFFF)) for n in names})

    # float64 makes the reference essentially exact (unit roundoff 1e-16), so every difference seen
    # is the engine's own rounding and the bounds can be read as the engine's error alone.
    loss, logits, grads = R.loss_logits_grads(weights, tensors["inputs"], tensors["targets"], cfg, torch.float64)
    checks.bound("loss", max_rel_err(tensors["loss"], [loss]), bounds["loss"])
    checks.bound("logits", max_rel_err(tensors["logits"], logits.numpy()), bounds["logits"])
    for n in names:
        checks.bound("grad." + n, max_rel_err(tensors["grad." + n], grads[n].numpy()), bounds["grad"])

    trajectory = []
    if steps > 0:
        start = {n: tensors["master." + n] for n in names} if param_dtype == "bf16" else weights
        ref_losses = R.train_losses(start, tensors["inputs"], tensors["targets"], cfg, optim, steps,
                                      bf16=(param_dtype == "bf16"))
        for step, (ours, theirs) in enumerate(zip(tensors["train_losses"], ref_losses)):
            err = max_rel_err([ours], [theirs])
            checks.bound(f"train_losses[{step}]", err, bounds["train_loss"])
            trajectory.append((step, float(ours), theirs, err))
    if verbose:
        print(f"model {cfg}\nparam_dtype={param_dtype} activations={activations_of(meta)} "
              f"activation_checkpointing={ckpt} optim={optim}\n")
        checks.print_table()
        if trajectory:
            print(f"\n{'step':>4}  {'zerotrain loss':>16}  {'torch loss':>16}  {'rel err':>10}")
            for step, ours, theirs, err in trajectory:
                print(f"{step:>4}  {ours:>16.9f}  {theirs:>16.9f}  {err:>10.3e}")
    return checks.failures


def self_test(workdir, steps):
    """A faithful fake must pass in both modes; each planted defect must be caught by name."""
    problems = []
    for dtype in ("f32", "bf16"):
        path = os.path.join(workdir, f"self_test_{dtype}.safetensors")
        state, meta = fake_engine_state(path, dtype, steps)
        print(f"\n=== self-test: faithful fp32 fake, {dtype} ===")
        failures = check_state(path, dtype, "none", steps)
        if failures:
            problems.append(f"faithful {dtype} fake failed: {failures}")

        def planted(what, expect, edit=lambda s: None, corrupt_file=None):
            bad = {k: (d, a.copy()) for k, (d, a) in state.items()}
            edit(bad)
            write_safetensors(path, bad, meta)
            if corrupt_file:
                corrupt_file(path)
            failures = check_state(path, dtype, "none", steps, verbose=False)
            caught = any(expect in f for f in failures)
            print(f"planted {what:<40} {'caught' if caught else 'MISSED'}: {failures[:2]}")
            if not caught:
                problems.append(f"{dtype}: planted {what} was not caught")

        name = "grad.transformer.h.1.mlp.c_fc.weight"
        wrong = state[name][1][0, 0] + 3 * TOLERANCES[dtype]["grad"] * float(np.abs(state[name][1]).max())
        wrong = ref.bf16_round(torch.tensor(wrong)).item() if dtype == "bf16" else wrong  # a bf16 value still
        planted("grad error 3x bound", name, lambda s: s[name][1].__setitem__((0, 0), wrong))
        if steps > 4:
            planted("train loss drift", "train_losses[4]", lambda s: s["train_losses"][1].__setitem__(
                4, 1.1 * s["train_losses"][1][4]))
        planted("missing tensor", "missing tensors", lambda s: s.pop("grad.transformer.ln_f.bias"))
        planted("extra tensor", "unexpected tensors", lambda s: s.__setitem__("extra", state["loss"]))
        planted("wrong shape", "transformer.wpe.weight:", lambda s: s.__setitem__(
            "transformer.wpe.weight", ("F32", s["transformer.wpe.weight"][1][:-1])))
        planted("truncated file", "outside the", corrupt_file=lambda p: os.truncate(p, os.path.getsize(p) - 4))
        planted("wrong metadata", "activation_checkpointing", corrupt_file=lambda p: write_safetensors(
            p, state, {**meta, "activation_checkpointing": "all"}))
        # An override the engine ignored: the file says it ran one vocabulary chunk where two were asked.
        write_safetensors(path, state, {**meta, "run_config": json.dumps({"train": {"head_chunks": 1}})})
        failures = check_state(path, dtype, "none", steps, verbose=False, overrides=("train.head_chunks=2",))
        caught = any("train.head_chunks" in f for f in failures)
        print(f"planted {'an ignored --set':<40} {'caught' if caught else 'MISSED'}: {failures[:2]}")
        if not caught:
            problems.append(f"{dtype}: planted ignored --set was not caught")
        if dtype == "bf16":
            bias = "transformer.ln_f.bias"
            planted("working != bf16(master)", "bf16(master.<param>)", lambda s: s[bias][1].__setitem__(
                0, np.nextafter(s[bias][1][0], np.float32(1))))
        if dtype == "f32" and steps > 0:  # bf16's 1e-3 trajectory bound is too loose to see this
            fake_engine_state(path, dtype, steps, decays=lambda shape: True)
            caught = any("train_losses" in f for f in check_state(path, dtype, "none", steps, verbose=False))
            print(f"planted {'weight decay on LayerNorm and biases':<40} {'caught' if caught else 'MISSED'}")
            if not caught:
                problems.append("f32: weight decay on every tensor was not caught")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--zerotrain", help="path to the zerotrain binary")
    parser.add_argument("--config", help="model/training config JSON passed to debug-state")
    parser.add_argument("--param-dtype", choices=["bf16", "f32"], default="f32")
    parser.add_argument("--activation-checkpointing", default="none", help="none, all, every:N")
    parser.add_argument("--workdir", help="where state.safetensors is written (created if absent)")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="AdamW steps to compare")
    parser.add_argument("--self-test", action="store_true", help="check this harness on faked files")
    parser.add_argument("--head-chunks", type=int, default=1,
                        help="train.head_chunks: the LM head's logits in this many vocabulary chunks")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="another config override for debug-state (e.g. model.tie_embeddings=true)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="where debug-state runs; cuda exits 77 (a ctest skip) when no device is visible")
    args = parser.parse_args()
    torch.set_num_threads(min(8, os.cpu_count() or 1))  # ctest may run several parity tests at once

    workdir = args.workdir or tempfile.mkdtemp(prefix="torch_parity_")
    made_here = [] if args.workdir else [workdir]  # a named --workdir is the caller's to keep
    os.makedirs(workdir, exist_ok=True)
    if args.self_test:
        failures = self_test(workdir, args.steps)
    else:
        if not args.zerotrain or not args.config:
            parser.error("--zerotrain and --config are required (or --self-test)")
        state_path = os.path.join(workdir, "state.safetensors")
        run_engine(args, state_path)
        failures = check_state(state_path, args.param_dtype, args.activation_checkpointing, args.steps, args.config,
                               overrides=[f"device={args.device}", f"train.head_chunks={args.head_chunks}", *args.set])
    if failures:
        print(f"\ntorch_parity: FAIL ({len(failures)}):\n  " + "\n  ".join(failures))
    else:
        print("\ntorch_parity: PASS")
    close_work_folders(made_here, passed=not failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
