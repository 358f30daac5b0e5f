"""The PyTorch FSDP2 anchor of tools/bench_llama_gpu.py: a Llama 3.2 1B-shaped decoder trained the way
torchtitan does on one GPU: every layer and the root wrapped with FSDP2's fully_shard (a process
group of one rank), bf16 parameters in compute with fp32 reductions (MixedPrecisionPolicy), each
layer compiled (torch.compile, default settings), the loss compiled too (torchtitan's
compile.components "loss"; here with the final norm and the head product before it, so that the
fp32 logits the loss reads are never written out whole), RoPE's tables made once on the device
(torchtitan's freqs_cis buffer), fused AdamW, global-norm clip 1.0, random tokens.

The model is the parity tests' plain-PyTorch Llama (tests/parity/llama_reference.py: its RMSNorm,
rotary embeddings with fp32 angles, SwiGLU, tied head, Hugging Face's parameter names and shapes) as
nn.Modules, with one change for speed: attention through scaled_dot_product_attention (causal,
grouped-query heads) instead of the reference's explicit T x T form, as any PyTorch user would.

Protocol: as tools/bench_gpu_torch.py (--serve: "ready", then "run W K" blocks, "quit").
--no-fsdp (the harness's own test on a CPU and an older PyTorch) trains the same modules unwrapped.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "parity"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import bench_gpu_torch  # noqa: E402  the worker protocol and the timed step loop
import llama_reference as ref  # noqa: E402


class Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, I, hs = cfg.n_embd, cfg.intermediate_size, cfg.head_size
        self.cfg = cfg
        self.input_layernorm = nn.Parameter(torch.ones(C))
        self.q_proj = nn.Parameter(torch.empty(cfg.n_head * hs, C))
        self.k_proj = nn.Parameter(torch.empty(cfg.n_kv_head * hs, C))
        self.v_proj = nn.Parameter(torch.empty(cfg.n_kv_head * hs, C))
        self.o_proj = nn.Parameter(torch.empty(C, cfg.n_head * hs))
        self.post_attention_layernorm = nn.Parameter(torch.ones(C))
        self.gate_proj = nn.Parameter(torch.empty(I, C))
        self.up_proj = nn.Parameter(torch.empty(I, C))
        self.down_proj = nn.Parameter(torch.empty(C, I))
        for p in (self.q_proj, self.k_proj, self.v_proj, self.o_proj, self.gate_proj, self.up_proj, self.down_proj):
            nn.init.normal_(p, std=0.02)

    def forward(self, x, cos, sin):
        cfg = self.cfg
        B, T, _ = x.shape
        hs, group = cfg.head_size, cfg.n_head // cfg.n_kv_head
        h = ref.rms_norm(x, self.input_layernorm, cfg.norm_eps)
        q = F.linear(h, self.q_proj).view(B, T, cfg.n_head, hs).transpose(1, 2)
        k = F.linear(h, self.k_proj).view(B, T, cfg.n_kv_head, hs).transpose(1, 2)
        v = F.linear(h, self.v_proj).view(B, T, cfg.n_kv_head, hs).transpose(1, 2)
        q, k = q * cos + ref.rotate_half(q) * sin, k * cos + ref.rotate_half(k) * sin
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1),
                                               is_causal=True)
        else:  # an older PyTorch (the harness's CPU test): the reference's own form
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            scores = (q @ k.transpose(-2, -1)) / hs ** 0.5
            causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            y = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1) @ v
        x = x + F.linear(y.transpose(1, 2).reshape(B, T, cfg.n_head * hs), self.o_proj)
        h = ref.rms_norm(x, self.post_attention_layernorm, cfg.norm_eps)
        return x + F.linear(F.silu(F.linear(h, self.gate_proj)) * F.linear(h, self.up_proj), self.down_proj)


class Llama(nn.Module):
    def __init__(self, cfg, compile_head=False):
        super().__init__()
        self.cfg = cfg
        # RoPE's tables once, moved to the device with the module (made per step on the host, they
        # cost the anchor a copy and the host's angles every step); cast per activation dtype once.
        cos, sin = ref.rotary_cos_sin(cfg, cfg.block_size, torch.float32)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.rope_cast = {}
        self.head_loss = torch.compile(head_loss) if compile_head else head_loss
        self.embed_tokens = nn.Parameter(torch.empty(cfg.vocab_size, cfg.n_embd))
        nn.init.normal_(self.embed_tokens, std=0.02)
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.n_layer))
        self.norm = nn.Parameter(torch.ones(cfg.n_embd))
        self.lm_head = None if cfg.tie_embeddings else nn.Parameter(torch.empty(cfg.vocab_size, cfg.n_embd))
        if self.lm_head is not None:
            nn.init.normal_(self.lm_head, std=0.02)

    def forward(self, inputs, targets):
        T = inputs.shape[1]
        x = F.embedding(inputs, self.embed_tokens)
        if (x.dtype, T) not in self.rope_cast:
            self.rope_cast[(x.dtype, T)] = (self.rope_cos[:T].to(x.dtype), self.rope_sin[:T].to(x.dtype))
        cos, sin = self.rope_cast[(x.dtype, T)]
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.head_loss(x, self.norm, self.embed_tokens if self.lm_head is None else self.lm_head, targets,
                              self.cfg.norm_eps)


def head_loss(x, norm, head, targets, eps):
    """The final RMSNorm, the head product and the mean cross-entropy over fp32 logits (as torchtitan's
    loss casts them): one function, so that a compile of it fuses the cast into the loss."""
    logits = F.linear(ref.rms_norm(x, norm, eps), head)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


class Trainer(bench_gpu_torch.Worker):
    def __init__(self, a):
        torch.manual_seed(1337)
        self.a = a
        self.dev = torch.device(a.device)
        self.cfg = ref.LlamaConfig(n_layer=a.n_layer, n_head=a.n_head, n_kv_head=a.n_kv_head, n_embd=a.n_embd,
                                   intermediate_size=a.intermediate_size, block_size=a.seq_len, vocab_size=a.vocab,
                                   rope_theta=a.rope_theta, norm_eps=1e-5, tie_embeddings=True,
                                   rope_scaling=tuple(sorted(json.loads(a.rope_scaling or "{}").items())))
        if not a.no_fsdp:
            import torch.distributed as dist
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
            dist.init_process_group("nccl" if a.device == "cuda" else "gloo", rank=0, world_size=1)
        model = Llama(self.cfg, compile_head=not a.no_fsdp and a.compile != "none").to(self.dev)
        self.params = sum(p.numel() for p in model.parameters())
        if a.no_fsdp:
            self.model = torch.compile(model) if a.compile != "none" else model
        else:
            self.model = bench_gpu_torch.shard_fsdp2(model, model.layers, a.compile != "none")
        self.finish_setup(lr=3e-4)

    def steps(self, n):
        def loss_of(idx):
            if self.a.no_fsdp:  # bf16 compute by autocast where FSDP2's policy is missing
                with torch.autocast(device_type=self.a.device, dtype=torch.bfloat16):
                    return self.model(idx[:, :-1], idx[:, 1:])
            return self.model(idx[:, :-1], idx[:, 1:])
        return bench_gpu_torch.timed_steps(self, n, self.cfg.vocab_size, loss_of)

    def facts(self):
        name = torch.cuda.get_device_name() if self.a.device == "cuda" else "cpu"
        sdpa = hasattr(F, "scaled_dot_product_attention")
        if not hasattr(self, "sdpa_kernel"):
            self.sdpa_kernel = bench_gpu_torch.sdpa_backend(
                (self.a.batch, self.cfg.n_head, self.a.seq_len, self.cfg.head_size), torch.bfloat16, self.dev,
                bench_gpu_torch.attention_context("auto"), group=self.cfg.n_head // self.cfg.n_kv_head)
        return {"torch_version": torch.__version__, "device": name, "params": self.params, "compiled": self.a.compile,
                "fsdp2": not self.a.no_fsdp, "sdpa": sdpa,
                "sdpa_kernel": self.sdpa_kernel if sdpa else "none (explicit attention)",
                "head_and_loss_compiled": self.model.head_loss is not head_loss}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-layer", type=int, default=16)
    ap.add_argument("--n-head", type=int, default=32)
    ap.add_argument("--n-kv-head", type=int, default=8)
    ap.add_argument("--n-embd", type=int, default=2048)
    ap.add_argument("--intermediate-size", type=int, default=8192)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--rope-theta", type=float, default=500000.0)
    ap.add_argument("--rope-scaling", default="", help="model.rope_scaling as JSON (Hugging Face's keys)")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--compile", choices=["default", "none"], default="default")
    ap.add_argument("--sdpa", choices=["auto"], default="auto")
    ap.add_argument("--serve", action="store_true")
    ap.add_argument("--no-fsdp", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help=argparse.SUPPRESS)
    a = ap.parse_args()
    t = Trainer(a)
    if not a.serve:
        step_ms, losses = t.steps(5)
        print(json.dumps({"step_ms": step_ms, "losses": losses, **t.facts()}))
        return
    bench_gpu_torch.serve(t)


if __name__ == "__main__":
    main()
