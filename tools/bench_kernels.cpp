// zt_bench_kernels: times every CUDA kernel at GPT-2 124M shapes (B x T = 8 x 1024 by default,
// C = 768, 12 heads, V = 50257 padded to 50304; the Llama family's own kernels at Llama 3.2 1B's
// widths) with CUDA events: warm-up, then the median of many
// runs. Each kernel's bytes (memory-bound) or FLOPs (products) give GB/s or TFLOP/s, printed
// against the device's measured peaks (a large device-to-device copy, a large bf16 GEMM). Operands
// hold uniform random values; the memory-bound kernels run with F32 and with BF16 activations.
// Then every product of the model's step at its shape as training runs it (bench_kernels_products.h).
// Writes docs/results/gpu_kernels_<device>.json. Usage: zt_bench_kernels [--batch B] [--out DIR]
// [--commit SHA]. Without a CUDA device it says so and exits with code 2.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/adamw.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cached_attention.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/device_query.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/kernel_resources.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/residual.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/swiglu.h"
#include "tools/bench_kernels_harness.h"
#include "tools/bench_kernels_products.h"

namespace {

using namespace zt;
using bench::Bench;
using bench::Result;

std::string slug(std::string s) {
  for (char& c : s) c = std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '_';
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t B = 8;
  std::string out_dir = "docs/results", commit = "unknown";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--batch")
      B = std::stoll(argv[i + 1]);
    else if (a == "--out")
      out_dir = argv[i + 1];
    else if (a == "--commit")
      commit = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  if (cuda::device_count() == 0) {
    std::fprintf(stderr, "zt_bench_kernels: no CUDA device on this machine; nothing was timed\n");
    return 2;
  }
  try {
    const std::int64_t T = 1024, C = 768, NH = 12, V = 50257, Vp = 50304, N = B * T;
    Bench bench;
    ExecContext ctx = bench.ctx();
    std::vector<Result> results;
    auto mem = [&](const std::string& name, double bytes, const std::function<void()>& fn) {
      results.push_back({name, bench.time_ms(fn), bytes, 0.0});
    };
    auto gemm = [&](const std::string& name, double flops, const std::function<void()>& fn) {
      results.push_back({name, bench.time_ms(fn), 0.0, flops});
    };
    // Peaks: a 1 GiB device copy (read + write) and an 8192^3 bf16 GEMM.
    const std::int64_t big = std::int64_t{1} << 28;
    Buffer src = bench.buf(DType::kF32, big), dst = bench.buf(DType::kF32, big);
    const double copy_ms = bench.time_ms([&] {
      ZT_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), static_cast<std::size_t>(src.size_bytes()),
                                    cudaMemcpyDeviceToDevice, bench.stream()));
    });
    const double peak_gbps = 2.0 * static_cast<double>(src.size_bytes()) / (copy_ms * 1e6);
    src.reset(), dst.reset();
    const std::int64_t G = 8192;
    Buffer ga = bench.buf(DType::kBF16, G * G), gb = bench.buf(DType::kBF16, G * G),
           gc = bench.buf(DType::kBF16, G * G);
    const double gemm_ms = bench.time_ms([&] {
      cuda::matmul_forward(ctx, gc.view(Shape{G, G}), ga.view(Shape{G, G}), gb.view(Shape{G, G}),
                           cuda::WeightLayout::kInOut, {});
    });
    const double peak_tflops = 2.0 * G * G * G / (gemm_ms * 1e9);
    ga.reset(), gb.reset(), gc.reset();

    // The memory-bound kernels with F32 and with BF16 activations (BF16 with BF16 parameters, as the
    // GPU configs train); the bytes each must move scale with the element size e.
    for (DType dt : {DType::kF32, DType::kBF16}) {
      const double e = dt == DType::kF32 ? 4.0 : 2.0;
      const std::string sfx = dt == DType::kF32 ? "" : " bf16";
      Buffer x = bench.buf(dt, N * C), y = bench.buf(dt, N * C), z = bench.buf(dt, N * C);
      Buffer w = bench.buf(dt, C), bvec = bench.buf(dt, C), mean = bench.buf(DType::kF32, N),
             rstd = bench.buf(DType::kF32, N);
      if (dt == DType::kF32) {
        Buffer x16 = bench.buf(DType::kBF16, N * C);
        mem("cast f32->bf16", N * C * 6.0, [&] { cuda::cast(ctx, x16.view(), x.view()); });
      }
      mem("residual_forward" + sfx, N * C * 3 * e, [&] { cuda::residual_forward(ctx, z.view(), x.view(), y.view()); });
      mem("layernorm_forward" + sfx, N * C * 2 * e, [&] {
        cuda::layernorm_forward(ctx, z.view(Shape{N, C}), mean.view(), rstd.view(), x.view(Shape{N, C}), w.view(),
                                bvec.view());
      });
      mem("layernorm_residual_forward" + sfx, N * C * 4 * e, [&] {
        cuda::layernorm_residual_forward(ctx, y.view(Shape{N, C}), z.view(Shape{N, C}), mean.view(), rstd.view(),
                                         x.view(Shape{N, C}), y.view(Shape{N, C}), w.view(), bvec.view());
      });
      mem("layernorm_backward" + sfx, N * C * 4 * e, [&] {
        cuda::layernorm_backward(ctx, z.view(Shape{N, C}), w.view(), bvec.view(), y.view(Shape{N, C}),
                                 x.view(Shape{N, C}), w.view(), mean.view(), rstd.view());
      });
      // The warp-a-row kernels the block-a-row default replaced ([Note: a block a row]), side by side.
      mem("layernorm_backward" + sfx + " (warp a row)", N * C * 4 * e, [&] {
        cuda::layernorm_backward(ctx, z.view(Shape{N, C}), w.view(), bvec.view(), y.view(Shape{N, C}),
                                 x.view(Shape{N, C}), w.view(), mean.view(), rstd.view(),
                                 cuda::NormBackwardRows::kWarp);
      });
      Buffer h = bench.buf(dt, N * 4 * C), h2 = bench.buf(dt, N * 4 * C);
      mem("gelu_forward" + sfx, N * 4 * C * 2 * e, [&] { cuda::gelu_forward(ctx, h2.view(), h.view()); });
      mem("gelu_backward" + sfx, N * 4 * C * 3 * e, [&] { cuda::gelu_backward(ctx, h2.view(), h.view(), h2.view()); });
    }
    {
      // The Llama family's own memory-bound kernels in bf16 at Llama 3.2 1B's widths (C 2048, MLP
      // hidden 8192, 32 query and 8 key/value heads of 64), N rows as above: what the Llama GPU
      // benchmark's step spends outside its products (issue 29's FSDP2 target).
      const std::int64_t LC = 2048, LH = 8192, LW = (32 + 2 * 8) * 64;
      Buffer x = bench.buf(DType::kBF16, N * LC), y = bench.buf(DType::kBF16, N * LC),
             dx = bench.buf(DType::kBF16, N * LC), w = bench.buf(DType::kBF16, LC), dw = bench.buf(DType::kBF16, LC),
             rstd = bench.buf(DType::kF32, N);
      mem("llama rmsnorm_forward bf16 [N, 2048]", N * LC * 2 * 2.0, [&] {
        cuda::rmsnorm_forward(ctx, y.view(Shape{N, LC}), rstd.view(), x.view(Shape{N, LC}), w.view(), 1e-5f);
      });
      mem("llama rmsnorm_backward bf16 [N, 2048]", N * LC * 4 * 2.0, [&] {
        cuda::rmsnorm_backward(ctx, dx.view(Shape{N, LC}), dw.view(), y.view(Shape{N, LC}), x.view(Shape{N, LC}),
                               w.view(), rstd.view());
      });
      mem("llama rmsnorm_backward bf16 [N, 2048] (warp a row)", N * LC * 4 * 2.0, [&] {
        cuda::rmsnorm_backward(ctx, dx.view(Shape{N, LC}), dw.view(), y.view(Shape{N, LC}), x.view(Shape{N, LC}),
                               w.view(), rstd.view(), cuda::NormBackwardRows::kWarp);
      });
      Buffer qkv = bench.buf(DType::kBF16, N * LW);
      // Llama 3.2 1B's rotary frequencies: base 500000, llama3 scaling x32 from 8192 positions.
      const RopeFrequencies llama32_rope{500000.0f, {RopeScalingType::kLlama3, 32.0f, 1.0f, 4.0f, 8192.0f}};
      mem("llama rope_forward bf16 (q and k of [N, 3072])", N * 40 * 64 * 2 * 2.0, [&] {
        cuda::rope_forward(ctx, qkv.view(Shape{B, T, LW}), 40, 64, llama32_rope);
      });
      mem("llama rope_backward bf16 (q and k of [N, 3072])", N * 40 * 64 * 2 * 2.0, [&] {
        cuda::rope_backward(ctx, qkv.view(Shape{B, T, LW}), 40, 64, llama32_rope);
      });
      Buffer gate_up = bench.buf(DType::kBF16, N * 2 * LH), act = bench.buf(DType::kBF16, N * LH),
             dgate_up = bench.buf(DType::kBF16, N * 2 * LH);
      mem("llama swiglu_forward bf16 [N, 2 x 8192]", N * LH * 3 * 2.0, [&] {
        cuda::swiglu_forward(ctx, act.view(Shape{N, LH}), gate_up.view(Shape{N, 2 * LH}));
      });
      mem("llama swiglu_backward bf16 [N, 2 x 8192]", N * LH * 5 * 2.0, [&] {
        cuda::swiglu_backward(ctx, dgate_up.view(Shape{N, 2 * LH}), gate_up.view(Shape{N, 2 * LH}),
                              act.view(Shape{N, LH}));
      });
      // Decoding (the samples' key/value cache): one new position's attention over a cache of P
      // positions, the bytes counted those of the keys and values read once (the query heads of a
      // key/value head read it again, from L2). Llama 3.2 1B's heads over N positions, and GPT-2
      // 124M's 12 heads of 64 over 1024.
      const auto leading = [](const Buffer& b, Shape s) { return TensorView{b.data(), b.dtype(), b.device(), s}; };
      mem("llama cached_attention bf16 (1 new position over N of [N, 3072])", N * 2 * 8 * 64 * 2.0, [&] {
        cuda::cached_attention_forward(ctx, leading(x, Shape{1, 1, LC}), leading(qkv, Shape{1, N, LW}), 32, 8);
      });
      mem("gpt2 cached_attention bf16 (1 new position over 1024 of [1024, 2304])", 1024 * 2 * 768 * 2.0, [&] {
        cuda::cached_attention_forward(ctx, leading(x, Shape{1, 1, 768}), leading(qkv, Shape{1, 1024, 2304}), 12);
      });
    }
    // fp32 operands under each precision.matmul (exact, TF32, bf16-rounded inputs), then bf16 operands.
    struct MatmulCase {
      DType dt;
      MatmulPrecision precision;
      const char* tag;
    };
    for (auto [dt, precision, tag_c] : {MatmulCase{DType::kF32, MatmulPrecision::kFp32, "f32"},
                                        MatmulCase{DType::kF32, MatmulPrecision::kTf32, "f32 (tf32)"},
                                        MatmulCase{DType::kF32, MatmulPrecision::kBf16, "f32 (bf16 inputs)"},
                                        MatmulCase{DType::kBF16, MatmulPrecision::kFp32, "bf16"}}) {
      const std::string tag = tag_c;
      ctx.cuda_resources->fp32_matmuls = precision;
      Buffer in = bench.buf(dt, N * C), wt = bench.buf(dt, C * 4 * C), bias = bench.buf(dt, 4 * C),
             out = bench.buf(dt, N * 4 * C), pre = bench.buf(dt, N * 4 * C), dwt = bench.buf(DType::kF32, C * 4 * C);
      const double fl = 2.0 * N * C * 4 * C;
      gemm("matmul fc " + tag + " fwd +bias", fl, [&] {
        cuda::matmul_forward(ctx, out.view(Shape{N, 4 * C}), in.view(Shape{N, C}), wt.view(Shape{C, 4 * C}),
                             cuda::WeightLayout::kInOut, bias.view());
      });
      gemm("matmul fc " + tag + " fwd +bias+gelu", fl, [&] {
        cuda::matmul_forward(ctx, out.view(Shape{N, 4 * C}), in.view(Shape{N, C}), wt.view(Shape{C, 4 * C}),
                             cuda::WeightLayout::kInOut, bias.view(), pre.view(Shape{N, 4 * C}));
      });
      gemm("matmul fc " + tag + " bwd (dinp+dweight)", 2 * fl, [&] {
        cuda::matmul_backward(ctx, in.view(Shape{N, C}), dwt.view(Shape{C, 4 * C}), {}, out.view(Shape{N, 4 * C}),
                              in.view(Shape{N, C}), wt.view(Shape{C, 4 * C}), cuda::WeightLayout::kInOut);
      });
      if (dt == DType::kBF16 && precision == MatmulPrecision::kFp32) {
        // The MLP's projection backward [N, 4C] -> [N, C] through the GELU: cuBLASLt's DGELU epilogue
        // against the plain product (the separate path adds "gelu_backward bf16" above), so the
        // table says which of the two the model should take (issue 29).
        Buffer proj = bench.buf(dt, 4 * C * C), dproj = bench.buf(DType::kF32, 4 * C * C), dx = bench.buf(dt, N * C),
               dh = bench.buf(dt, N * 4 * C);
        gemm("matmul proj bf16 bwd (dinp+dweight)", 2 * fl, [&] {
          cuda::matmul_backward(ctx, dh.view(Shape{N, 4 * C}), dproj.view(Shape{4 * C, C}), {}, dx.view(Shape{N, C}),
                                out.view(Shape{N, 4 * C}), proj.view(Shape{4 * C, C}), cuda::WeightLayout::kInOut);
        });
        gemm("matmul proj bf16 bwd through gelu (DGELU epilogue)", 2 * fl, [&] {
          cuda::matmul_backward(ctx, dh.view(Shape{N, 4 * C}), dproj.view(Shape{4 * C, C}), {}, dx.view(Shape{N, C}),
                                out.view(Shape{N, 4 * C}), proj.view(Shape{4 * C, C}), cuda::WeightLayout::kInOut,
                                pre.view(Shape{N, 4 * C}));
        });
        // The projection's forward with the residual added in its epilogue (ops::matmul_residual_forward)
        // against the plain product; the separate path adds "residual_forward bf16" above.
        Buffer resid = bench.buf(dt, N * C);
        gemm("matmul proj bf16 fwd +bias", fl, [&] {
          cuda::matmul_forward(ctx, dx.view(Shape{N, C}), out.view(Shape{N, 4 * C}), proj.view(Shape{4 * C, C}),
                               cuda::WeightLayout::kInOut, bias.view().slice(0, C));
        });
        gemm("matmul proj bf16 fwd +bias+residual (epilogue)", fl, [&] {
          cuda::matmul_residual_forward(ctx, dx.view(Shape{N, C}), out.view(Shape{N, 4 * C}),
                                        proj.view(Shape{4 * C, C}), cuda::WeightLayout::kInOut, bias.view().slice(0, C),
                                        resid.view(Shape{N, C}));
        });
        // the bias gradient alone: reads dout once
        Buffer dbias = bench.buf(DType::kF32, 4 * C);
        mem("matmul bias gradient bf16 [N, 4C]", N * 4 * C * 2.0, [&] {
          cuda::matmul_backward(ctx, {}, {}, dbias.view(), out.view(Shape{N, 4 * C}), in.view(Shape{N, C}),
                                wt.view(Shape{C, 4 * C}), cuda::WeightLayout::kInOut);
        });
        // and at OC = C (attention and MLP projections), where the first version's final pass had C / 256 blocks
        mem("matmul bias gradient bf16 [N, C]", N * C * 2.0, [&] {
          cuda::matmul_backward(ctx, {}, {}, dbias.view().slice(0, C), dx.view(Shape{N, C}), dh.view(Shape{N, 4 * C}),
                                proj.view(Shape{4 * C, C}), cuda::WeightLayout::kInOut);
        });
        // The weight and bias gradients together, in bf16 as the model's bf16 parameters have them: the
        // bias by the two-stage kernels, then by cuBLASLt's bias-gradient epilogue on the weight product
        // ([Note: the bias gradient in the weight product] in kernels/cuda/bias_grad.cu; a run with the
        // timed search picks between the two per shape, this table says by how much).
        Buffer dfc16 = bench.buf(dt, C * 4 * C), dproj16 = bench.buf(dt, 4 * C * C), db16 = bench.buf(dt, 4 * C);
        for (cuda::BiasGradRoute route : {cuda::BiasGradRoute::kKernels, cuda::BiasGradRoute::kEpilogue}) {
          ctx.cuda_resources->bias_grad_route = route;
          // Where cuBLASLt refuses the epilogue the route falls back to the kernels: the row says so.
          const std::int64_t before = ctx.cuda_resources->bias_grad_epilogue_calls;
          cuda::matmul_backward(ctx, {}, dfc16.view(Shape{C, 4 * C}), db16.view(), out.view(Shape{N, 4 * C}),
                                in.view(Shape{N, C}), wt.view(Shape{C, 4 * C}), cuda::WeightLayout::kInOut);
          const bool refused =
              route == cuda::BiasGradRoute::kEpilogue && ctx.cuda_resources->bias_grad_epilogue_calls == before;
          const std::string how = route == cuda::BiasGradRoute::kKernels
                                      ? " (bias kernels)"
                                      : (refused ? " (bias epilogue refused: kernels)" : " (bias epilogue)");
          gemm("matmul fc bf16 dweight+dbias" + how, fl, [&] {
            cuda::matmul_backward(ctx, {}, dfc16.view(Shape{C, 4 * C}), db16.view(), out.view(Shape{N, 4 * C}),
                                  in.view(Shape{N, C}), wt.view(Shape{C, 4 * C}), cuda::WeightLayout::kInOut);
          });
          gemm("matmul proj bf16 dweight+dbias" + how, fl, [&] {
            cuda::matmul_backward(ctx, {}, dproj16.view(Shape{4 * C, C}), db16.view().slice(0, C), dx.view(Shape{N, C}),
                                  dh.view(Shape{N, 4 * C}), proj.view(Shape{4 * C, C}), cuda::WeightLayout::kInOut);
          });
        }
        ctx.cuda_resources->bias_grad_route = cuda::BiasGradRoute::kKernels;
      }
    }
    ctx.cuda_resources->fp32_matmuls = MatmulPrecision::kFp32;
    bench::time_model_products(bench, ctx, gemm, N, C, Vp);
    // Attention with F32 and BF16 activations (BF16 flash runs on tensor cores at hs 64), and the
    // flash kernels with dropout 0.1 on the probabilities (the mask fused into them).
    for (DType dt : {DType::kF32, DType::kBF16}) {
      const std::string tag = dt == DType::kF32 ? "f32" : "bf16";
      Buffer qkv = bench.buf(dt, N * 3 * C), att = bench.buf(dt, B * NH * T * T), out = bench.buf(dt, N * C),
             dqkv = bench.buf(dt, N * 3 * C);
      const double fl = 4.0 * B * NH * T * T * (C / NH);  // two T x T x hs products, full (not causal) work
      gemm("attention_forward " + tag + " (cuBLASLt + softmax)", fl, [&] {
        cuda::attention_forward(ctx, out.view(Shape{B, T, C}), att.view(Shape{B, NH, T, T}),
                                qkv.view(Shape{B, T, 3 * C}), 12);
      });
      gemm("attention_backward " + tag + " (cuBLASLt + softmax)", 2 * fl, [&] {
        cuda::attention_backward(ctx, dqkv.view(Shape{B, T, 3 * C}), out.view(Shape{B, T, C}),
                                 qkv.view(Shape{B, T, 3 * C}), att.view(Shape{B, NH, T, T}), 12);
      });
      // The flash kernels on the same shapes (no T x T buffer; same FLOP count for the ratio).
      Buffer lse = bench.buf(DType::kF32, B * NH * T), dout = bench.buf(dt, N * C);
      const cuda::DropoutSpec no_dropout{}, dropout{0.1f, /*seed=*/1, /*site=*/1, /*first_sample=*/0};
      for (const cuda::DropoutSpec* drop : {&no_dropout, &dropout}) {
        const std::string name =
            tag + (drop->active() ? " dropout 0.1" : "") +
            (cuda::flash_attention_tensor_cores(dt, C / NH) ? " (flash, tensor cores)" : " (flash)");
        gemm("attention_forward " + name, fl, [&] {
          cuda::flash_attention_forward(ctx, out.view(Shape{B, T, C}), lse.view(Shape{B, NH, T}),
                                        qkv.view(Shape{B, T, 3 * C}), 12, *drop);
        });
        gemm("attention_backward " + name, 2 * fl, [&] {
          cuda::flash_attention_backward(ctx, dqkv.view(Shape{B, T, 3 * C}), dout.view(Shape{B, T, C}),
                                         out.view(Shape{B, T, C}), qkv.view(Shape{B, T, 3 * C}),
                                         lse.view(Shape{B, NH, T}), 12, *drop);
        });
      }
    }
    {
      Buffer tok = bench.tokens(N, static_cast<int>(V)), wte = bench.buf(DType::kF32, Vp * C),
             wpe = bench.buf(DType::kF32, T * C), out = bench.buf(DType::kF32, N * C);
      mem("embedding_forward", N * C * 8.0, [&] {
        cuda::embedding_forward(ctx, out.view(Shape{B, T, C}), tok.view(Shape{B, T}), wte.view(Shape{Vp, C}),
                                wpe.view(Shape{T, C}));
      });
      mem("embedding_backward", N * C * 12.0, [&] {
        cuda::embedding_backward(ctx, wte.view(Shape{Vp, C}), wpe.view(Shape{T, C}), out.view(Shape{B, T, C}),
                                 tok.view(Shape{B, T}));
      });
      Buffer losses = bench.buf(DType::kF32, N);
      // dlogits into a buffer of their own (training writes them over the logits, the same bytes):
      // in place, every run after the first would read near-constant dlogits.
      // Each dtype also with the row kept in shared memory where it fits (CeRowCache::kSharedMemory,
      // bf16 rows here) beside the default that reads it from memory at every pass.
      for (DType dt : {DType::kF32, DType::kBF16}) {
        Buffer logits = bench.buf(dt, N * Vp), dlogits = bench.buf(dt, N * Vp);
        for (cuda::CeRowCache cache : {cuda::CeRowCache::kReread, cuda::CeRowCache::kSharedMemory}) {
          mem(std::string("softmax_cross_entropy_fused") + (dt == DType::kF32 ? "" : " bf16") +
                  (cache == cuda::CeRowCache::kReread ? "" : " (row in shared memory)"),
              N * Vp * 2.0 * static_cast<double>(dtype_size_bytes(dt)), [&] {
                cuda::softmax_cross_entropy_fused(ctx, losses.view(), dlogits.view(Shape{N, Vp}),
                                                  logits.view(Shape{N, Vp}), tok.view(), 1.0f / N, static_cast<int>(V),
                                                  cache);
              });
        }
      }
    }
    {
      const std::int64_t P = 124'475'904;  // GPT-2 124M with Vp = 50304
      Buffer p = bench.buf(DType::kF32, P), g = bench.buf(DType::kBF16, P), m = bench.buf(DType::kF32, P),
             v = bench.buf(DType::kF32, P), wk = bench.buf(DType::kBF16, P);
      ZT_CUDA_CHECK(cudaMemsetAsync(v.data(), 0, static_cast<std::size_t>(v.size_bytes()), bench.stream()));
      int step = 0;
      mem("adamw (bf16 grad + bf16 working copy)", P * (2.0 + 3 * 8.0 + 2.0), [&] {
        cuda::adamw_update(ctx, p.view(), g.view(), m.view(), v.view(), wk.view(), cuda::AdamWHyper{}, ++step);
      });
      mem("sum_of_squares bf16 (incl. sync)", P * 2.0, [&] { (void)cuda::sum_of_squares(ctx, g.view()); });
    }

    nlohmann::json j;
    cudaDeviceProp prop{};
    ZT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    j["device"] = prop.name;
    j["driver_version"] = driver;
    j["cuda_runtime_version"] = runtime;
    j["commit"] = commit;
    j["shapes"] = {{"B", B}, {"T", T}, {"C", C}, {"n_head", NH}, {"V", V}, {"Vp", Vp}};
    j["peak_copy_gbps"] = peak_gbps;
    j["peak_bf16_gemm_tflops"] = peak_tflops;
    fmt::print("{} | driver {} | runtime {} | peaks: copy {:.0f} GB/s, bf16 GEMM {:.0f} TFLOP/s\n", prop.name, driver,
               runtime, peak_gbps, peak_tflops);
    fmt::print("{:<44} {:>10} {:>12} {:>8}\n", "kernel", "median ms", "achieved", "of peak");
    for (const Result& r : results) {
      const bool is_mem = r.bytes > 0;
      const double rate = is_mem ? r.bytes / (r.median_ms * 1e6) : r.flops / (r.median_ms * 1e9);
      const double frac = rate / (is_mem ? peak_gbps : peak_tflops);
      fmt::print("{:<44} {:>10.3f} {:>8.1f} {:<3} {:>7.0f}%\n", r.name, r.median_ms, rate, is_mem ? "GB/s" : "TF/s",
                 100 * frac);
      j["kernels"].push_back({{"name", r.name},
                              {"median_ms", r.median_ms},
                              {is_mem ? "gbps" : "tflops", rate},
                              {"fraction_of_peak", frac}});
    }
    const std::string path = fmt::format("{}/gpu_kernels_{}.json", out_dir, slug(prop.name));
    std::ofstream(path) << j.dump(2) << "\n";
    fmt::print("wrote {}\n", path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zt_bench_kernels: %s\n", e.what());
    return 1;
  }
  return 0;
}
