"""The PyTorch anchors of tools/bench_gpu.py: a GPT-2 of the given shapes trained on one GPU the way a
PyTorch user would (bf16 autocast over fp32 parameters, fused AdamW, scaled_dot_product_attention,
tied head), compiled with torch.compile's default settings or with mode="max-autotune", attention
left to PyTorch's choice or pinned to cuDNN's kernel (--sdpa cudnn), on random tokens. A step is
zerotrain's: forward, backward, global-norm clip at 1.0, AdamW, the loss read on the host.

One-shot (default): warm-up + timed steps, then one JSON line {"step_ms", "losses", "torch_version",
"device", "params", "compiled", "sdpa"}.
--serve: builds, compiles and warms up once, prints {"ready": true, "compile_s", ...}, then for
each line "run W K" on stdin runs W untimed and K timed steps and prints {"step_ms", "losses"}
(cached memory is returned after each block, so an idle worker leaves the GPU to the others);
"quit" ends it. tools/bench_gpu.py keeps one worker per anchor alive and interleaves their blocks
with the other engines' runs, so compilation (minutes under max-autotune) is paid once.
--warm-only: builds and compiles as --serve does (the same graphs, so the same cache entries), runs
that one step, prints {"warmed": true, "compile_s", "compile_cache", ...} and exits: what it compiled
stays in TORCHINDUCTOR_CACHE_DIR for a later worker (tools/gpu_session.sh --warm-autotune).
"""
import argparse
import importlib
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_cpu_torch import Gpt  # noqa: E402  the same GPT-2 module as the CPU benchmark's


def attention_context(sdpa):
    """SDPA pinned to cuDNN's fused attention, or PyTorch's own choice."""
    if sdpa == "cudnn":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        return sdpa_kernel([SDPBackend.CUDNN_ATTENTION])
    import contextlib
    return contextlib.nullcontext()


class Worker:
    """What both PyTorch anchors share: AdamW over decay groups (2-D tensors decay), the token
    generator, and a device sync. A subclass sets self.a, self.dev and self.model first."""

    def finish_setup(self, lr):
        decay = [p for p in self.model.parameters() if p.dim() >= 2]
        no_decay = [p for p in self.model.parameters() if p.dim() < 2]
        fused = {"fused": True} if self.a.device == "cuda" else {}  # the harness's CPU test may have an older torch
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                     lr=lr, betas=(0.9, 0.95), eps=1e-8, **fused)
        self.gen = torch.Generator(device=self.dev).manual_seed(1)

    def sync(self):
        if self.a.device == "cuda":
            torch.cuda.synchronize()


class Trainer(Worker):
    def __init__(self, a):
        torch.manual_seed(1337)
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        self.a = a
        self.dev = torch.device(a.device)
        # scaled_dot_product_attention (PyTorch 2): the anchors' attention; the harness's CPU test may
        # run an older torch, which gets the explicit form.
        self.sdpa_available = hasattr(torch.nn.functional, "scaled_dot_product_attention")
        self.model = Gpt(a.n_layer, a.n_head, a.n_embd, a.seq_len, a.vocab, flash=self.sdpa_available).to(self.dev)
        self.params = sum(p.numel() for p in self.model.parameters())
        if a.compile == "none":
            self.step_model = self.model
        elif a.compile == "default":
            self.step_model = torch.compile(self.model)
        else:
            self.step_model = torch.compile(self.model, mode=a.compile)
        self.finish_setup(lr=6e-4)

    def steps(self, n):
        def loss_of(idx):
            with attention_context(self.a.sdpa), torch.autocast(device_type=self.a.device, dtype=torch.bfloat16):
                return self.step_model(idx[:, :-1], idx[:, 1:])
        return timed_steps(self, n, 50257, loss_of)

    def facts(self):
        name = torch.cuda.get_device_name() if self.a.device == "cuda" else "cpu"
        if not hasattr(self, "sdpa_kernel"):
            hs = self.a.n_embd // self.a.n_head
            self.sdpa_kernel = sdpa_backend((self.a.batch, self.a.n_head, self.a.seq_len, hs), torch.bfloat16, self.dev,
                                            attention_context(self.a.sdpa))
        return {"torch_version": torch.__version__, "device": name, "params": self.params, "compiled": self.a.compile,
                "sdpa": self.a.sdpa if self.sdpa_available else "unavailable (explicit attention)",
                "sdpa_kernel": self.sdpa_kernel if self.sdpa_available else "none (explicit attention)"}


def timed_steps(t, n, vocab, loss_of, read_loss=lambda loss: loss.item()):
    """n steps of trainer t (its model, opt, a, dev, gen): random tokens, forward through loss_of,
    backward, clip at 1.0, AdamW, the loss read on the host. Each step is timed from the end of the
    one before (a device sync before the first) to its own end, so that nothing between steps goes
    uncounted: the same step-to-step clock as zerotrain's `elapsed_s` and llm.c's stamped step lines."""
    step_ms, losses = [], []
    t.sync()
    last_end = time.perf_counter()
    for _ in range(n):
        idx = torch.randint(0, vocab, (t.a.batch, t.a.seq_len + 1), device=t.dev, generator=t.gen)
        loss = loss_of(idx)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(t.model.parameters(), 1.0)
        t.opt.step()
        t.opt.zero_grad(set_to_none=True)
        losses.append(read_loss(loss))  # the host reads the loss every step, as zerotrain does
        t.sync()
        end = time.perf_counter()
        step_ms.append((end - last_end) * 1e3)
        last_end = end
    return step_ms, losses


def fsdp2_api():
    """(fully_shard, MixedPrecisionPolicy) from this torch (PyTorch 2.4 and later name them in two
    places), or None where it has no FSDP2: an import that fails for any reason (Debian's torch 1.13
    under Python 3.11 raises ValueError inside torch.distributed.fsdp)."""
    for module in ("torch.distributed.fsdp", "torch.distributed._composable.fsdp"):
        try:
            fsdp = importlib.import_module(module)
            return fsdp.fully_shard, fsdp.MixedPrecisionPolicy
        except Exception:  # noqa: BLE001  ImportError, AttributeError, or the module's own failure
            continue
    return None


def shard_fsdp2(model, blocks, compile_blocks):
    """torchtitan's order: compile each of `blocks` (a ModuleList of model), then fully_shard each
    block and the root, bf16 compute with fp32 reductions."""
    fully_shard, policy = fsdp2_api()
    mp = policy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for i, block in enumerate(blocks):
        if compile_blocks:
            blocks[i] = block = torch.compile(block)
        fully_shard(block, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    return model


def sdpa_backend(shape, dtype, device, context, group=1):
    """The kernel scaled_dot_product_attention dispatches to for causal attention over [B, heads, T,
    head size] operands of this dtype that need gradients, under context (attention_context): PyTorch's
    own choice (torch._fused_sdp_choice) by its SDPBackend name, or why it cannot be told. Keys and
    values of grouped heads are repeated to the query's heads first, as the anchors repeat them."""
    try:
        from torch.nn.attention import SDPBackend
        q = torch.empty(shape, dtype=dtype, device=device, requires_grad=True)
        kv = torch.empty((shape[0], shape[1] // group, *shape[2:]), dtype=dtype, device=device)
        kv = kv.repeat_interleave(group, dim=1).requires_grad_()
        with context:
            return SDPBackend(torch._fused_sdp_choice(q, kv, kv, is_causal=True)).name
    except (AttributeError, ImportError, ValueError, RuntimeError) as e:
        return f"unknown ({type(e).__name__}: {str(e)[:80]})"


def compile_cache_facts():
    """How torch.compile's caches answered in this process (tools/torch_compile_cache.py): the
    AOTAutograd and FX-graph caches' hits, misses and bypasses, and the cache folder; None on a torch
    without them. A start-up that hit compiled nothing: it runs the kernels an earlier compile made."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return None
    facts = {"dir": os.environ.get("TORCHINDUCTOR_CACHE_DIR")}
    # tools/gpu_session.sh --warm-autotune's marker: this cache's max-autotune choices were timed
    # beside other GPU work (the tests), which a reader of this anchor's figures should know.
    marker = os.path.join(facts["dir"] or "", "zt_warm_autotune.json")
    if facts["dir"] and os.path.exists(marker):
        with open(marker) as f:
            facts["warm_autotune"] = json.load(f)
    for group, prefix, name in (("aot_autograd", "autograd_cache", "aotautograd"), ("inductor", "fxgraph_cache", "fxgraph")):
        for outcome in ("hit", "miss", "bypass"):
            facts[f"{name}_{outcome}"] = int(counters[group][f"{prefix}_{outcome}"])
    return facts


def compile_once(t):
    """The first step, which compiles (and autotunes), and what it took: compile_s, the caches' answers."""
    t0 = time.perf_counter()
    t.steps(1)
    compile_s = time.perf_counter() - t0
    facts = t.facts()  # before the cache is emptied: its attention probe allocates
    if t.a.device == "cuda":
        torch.cuda.empty_cache()  # idle between blocks: the other engines get the memory
    return {"compile_s": compile_s, "compile_cache": compile_cache_facts(), **facts}


def serve(t):
    """The worker protocol (see the module's doc) for trainer t: steps(n) and facts()."""
    print(json.dumps({"ready": True, **compile_once(t)}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        if words[0] != "run" or len(words) != 3:
            print(json.dumps({"error": f"unknown request {line.strip()!r}"}), flush=True)
            continue
        warmup, timed = int(words[1]), int(words[2])
        t.steps(warmup)
        step_ms, losses = t.steps(timed)
        if t.a.device == "cuda":
            torch.cuda.empty_cache()
        print(json.dumps({"step_ms": step_ms, "losses": losses}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-layer", type=int, default=12)
    ap.add_argument("--n-head", type=int, default=12)
    ap.add_argument("--n-embd", type=int, default=768)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=50304, help="padded vocabulary, as zerotrain computes with")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--compile", choices=["default", "max-autotune", "none"], default="default")
    ap.add_argument("--no-compile", action="store_true", help="the same as --compile none")
    ap.add_argument("--sdpa", choices=["auto", "cudnn"], default="auto")
    ap.add_argument("--serve", action="store_true")
    ap.add_argument("--warm-only", action="store_true", help="compile (into the cache) and exit")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help=argparse.SUPPRESS)  # harness tests
    a = ap.parse_args()
    if a.no_compile:
        a.compile = "none"
    t = Trainer(a)
    if a.serve:
        serve(t)
        return
    if a.warm_only:
        print(json.dumps({"warmed": True, **compile_once(t)}), flush=True)
        return
    step_ms, losses = t.steps(a.warmup + a.steps)
    print(json.dumps({"step_ms": step_ms, "losses": losses, **t.facts()}))


if __name__ == "__main__":
    main()
