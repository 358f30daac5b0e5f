"""The PyTorch FSDP2 anchor of tools/bench_multi_gpu.py: GPT-2 (tools/bench_cpu_torch.py's model, SDPA
attention) on every rank torchrun starts, one GPU each, trained the way torchtitan trains: each block
compiled (torch.compile's defaults) and then wrapped by fully_shard, the root too, bf16 compute with
fp32 reductions (MixedPrecisionPolicy), the final LayerNorm, head product and loss compiled as one
function (the fp32 logits never written out whole), fused AdamW over decay groups, clip 1.0, random
tokens drawn per rank. A step is zerotrain's: forward, backward, clip, AdamW, the loss read on the host.

One shot: --warmup untimed and --steps timed steps (step to step: bench_gpu_torch.timed_steps), then
rank 0 prints one JSON line {"step_ms", "losses", "memory": {"peak_allocated_bytes": the largest
over the ranks}, "facts"}. A torch without fully_shard prints {"error"} and exits 3. --device cpu
runs over gloo (the harness's test).

usage: torchrun --standalone --nproc-per-node N tools/bench_multi_gpu_torch.py [--batch 16] [--steps 15]
"""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_gpu_torch  # noqa: E402  the timed step loop, AdamW groups, the SDPA probe
from bench_cpu_torch import Gpt  # noqa: E402


def head_loss(x, ln_weight, ln_bias, table, targets):
    """The final LayerNorm, the tied head and the mean cross-entropy over fp32 logits, as one function
    so that a compile of it fuses the cast into the loss."""
    logits = F.linear(F.layer_norm(x, (x.shape[-1],), ln_weight, ln_bias, 1e-5), table)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


class FsdpGpt(Gpt):
    """Gpt with its head and loss through head_loss (compiled where the blocks are)."""

    def __init__(self, *args, compile_head=False, **kwargs):
        super().__init__(*args, **kwargs)
        self.head_loss = torch.compile(head_loss) if compile_head else head_loss

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe.weight[:idx.shape[1]]
        for block in self.h:
            x = block(x)
        return self.head_loss(x, self.ln_f.weight, self.ln_f.bias, self.wte.weight, targets)


class Trainer(bench_gpu_torch.Worker):
    def __init__(self, a):
        self.a = a
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        local = int(os.environ.get("LOCAL_RANK", "0"))
        if a.device == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = True
        self.dev = torch.device(a.device, local) if a.device == "cuda" else torch.device("cpu")
        torch.manual_seed(1337)  # the same initial weights on every rank, as FSDP2 expects
        compiled = a.compile != "none"
        model = FsdpGpt(a.n_layer, a.n_head, a.n_embd, a.seq_len, a.vocab, flash=True,
                        compile_head=compiled).to(self.dev)
        self.params = sum(p.numel() for p in model.parameters())
        self.model = bench_gpu_torch.shard_fsdp2(model, model.h, compiled)
        self.finish_setup(lr=6e-4)
        self.gen = torch.Generator(device=self.dev).manual_seed(1 + self.rank)  # each rank its own tokens

    def steps(self, n):
        def global_loss(loss):  # the mean over the ranks, as zerotrain's step reports (one small all-reduce)
            mean = loss.detach().float().clone()
            dist.all_reduce(mean)
            return mean.item() / self.world

        return bench_gpu_torch.timed_steps(self, n, min(self.a.vocab, 50257),
                                           lambda idx: self.model(idx[:, :-1], idx[:, 1:]), global_loss)

    def peak_allocated_bytes(self):
        """The largest peak of allocated device memory over the ranks (0 on the CPU)."""
        mine = torch.tensor([torch.cuda.max_memory_allocated(self.dev) if self.a.device == "cuda" else 0],
                            dtype=torch.float64, device=self.dev)
        dist.all_reduce(mine, op=dist.ReduceOp.MAX)
        return int(mine.item())

    def facts(self):
        hs = self.a.n_embd // self.a.n_head
        kernel = bench_gpu_torch.sdpa_backend((self.a.batch, self.a.n_head, self.a.seq_len, hs), torch.bfloat16,
                                              self.dev, bench_gpu_torch.attention_context("auto"))
        name = torch.cuda.get_device_name(self.dev) if self.a.device == "cuda" else "cpu"
        return {"torch_version": torch.__version__, "device": name, "ranks": self.world, "params": self.params,
                "compiled": self.a.compile, "fsdp2": True, "sdpa_kernel": kernel}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-layer", type=int, default=12)
    ap.add_argument("--n-head", type=int, default=12)
    ap.add_argument("--n-embd", type=int, default=768)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=50304, help="padded vocabulary, as zerotrain computes with")
    ap.add_argument("--batch", type=int, default=16, help="micro-batch per GPU")
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--compile", choices=["default", "none"], default="default")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help=argparse.SUPPRESS)  # harness tests
    a = ap.parse_args()
    if bench_gpu_torch.fsdp2_api() is None:
        if int(os.environ.get("RANK", "0")) == 0:
            print(json.dumps({"error": f"torch {torch.__version__} has no FSDP2 (fully_shard): PyTorch 2.4 or "
                                       "later runs this anchor"}), flush=True)
        sys.exit(3)
    if a.device == "cuda":  # the rank's GPU before the process group, as torch.distributed asks
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if a.device == "cuda" else "gloo")
    try:
        t = Trainer(a)
        t.steps(a.warmup)
        step_ms, losses = t.steps(a.steps)
        peak = t.peak_allocated_bytes()
        if t.rank == 0:
            print(json.dumps({"step_ms": step_ms, "losses": losses, "memory": {"peak_allocated_bytes": peak},
                              "facts": t.facts()}), flush=True)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
