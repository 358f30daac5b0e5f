"""torch_parity.py's self-test engine: the state file a correct fp32 (or bf16) engine would write,
computed here with a hand-written AdamW, so the parity checks are themselves checked."""
import json

import numpy as np
import torch

import gpt2_reference as ref
from safetensors_io import write_safetensors


def fake_engine_state(path, param_dtype, steps, decays=ref.has_weight_decay, seed=0):
    """Self-test: writes what a correct fp32 engine would, computed here in float32 with a
    hand-written AdamW (the engine's formula, not torch.optim) so the reference is checked too.
    decays(shape) -> bool picks the tensors that get weight decay (replaced to plant a bug)."""
    cfg = ref.GPT2Config(n_layer=2, n_head=2, n_embd=16, block_size=16, vocab_size=67, padded_vocab_size=128)
    optim = {"lr": 1e-2, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1}
    gen = torch.Generator().manual_seed(seed)
    shapes = ref.param_shapes(cfg)
    master = {n: (0.02 * torch.randn(s, generator=gen)) + (1.0 if ".ln_" in n and n.endswith("weight") else 0.0)
              for n, s in shapes.items()}
    inputs = torch.randint(0, cfg.vocab_size, (2, 12), generator=gen, dtype=torch.int32)  # T < block_size
    targets = torch.randint(0, cfg.vocab_size, (2, 12), generator=gen, dtype=torch.int32)
    bf16 = param_dtype == "bf16"
    m, v = ({n: torch.zeros(s) for n, s in shapes.items()} for _ in range(2))  # AdamW moments
    state, losses = {}, []
    for step in range(1, steps + 2):
        working = {n: ref.bf16_round(p) if bf16 else p.clone() for n, p in master.items()}
        loss, logits, grads = ref.loss_logits_grads({n: w.numpy() for n, w in working.items()},
                                                    inputs, targets, cfg, torch.float32)
        grads = {n: ref.bf16_round(g) if bf16 else g for n, g in grads.items()}
        if step == 1:  # the state dumped is the one before any update
            state = {"inputs": ("I32", inputs.numpy()), "targets": ("I32", targets.numpy()),
                     "loss": ("F32", np.array([loss], np.float32)), "logits": ("F32", logits.numpy())}
            for n in shapes:
                state[n], state["grad." + n] = ("F32", working[n].numpy()), ("F32", grads[n].numpy())
                if bf16:
                    state["master." + n] = ("F32", master[n].clone().numpy())
        if step > steps:
            break
        losses.append(loss)
        bc1, bc2 = 1 - optim["beta1"] ** step, 1 - optim["beta2"] ** step
        for n, p in master.items():
            g, wd = grads[n], optim["weight_decay"] if decays(p.shape) else 0.0
            p.mul_(1 - optim["lr"] * wd)
            m[n] = optim["beta1"] * m[n] + (1 - optim["beta1"]) * g
            v[n] = optim["beta2"] * v[n] + (1 - optim["beta2"]) * g * g
            p.sub_(optim["lr"] / bc1 * m[n] / (v[n].sqrt() / bc2 ** 0.5 + optim["eps"]))
    if steps > 0:
        state["train_losses"] = ("F32", np.array(losses, np.float32))
    meta = {"config": json.dumps(cfg.__dict__), "param_dtype": param_dtype, "activation_checkpointing": "none",
            "optim": json.dumps(optim), "steps": str(steps)}
    write_safetensors(path, state, meta)
    return state, meta
