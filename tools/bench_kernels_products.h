// zt_bench_kernels' model products: every matrix product of a GPT-2 124M step at its own shape,
// timed as a training run times them (cuBLASLt's algorithms searched per configuration, bf16
// operands, bf16 weight gradients added in place), so each shape's TFLOP/s can be read apart: the
// per-op profile sums all shapes of an op (matmul_backward: 37 calls of four shapes), and the rows
// above it take the heuristic's first algorithm.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <string>

#include "kernels/cuda/matmul.h"
#include "tools/bench_kernels_harness.h"

namespace zt::bench {

using TimeProduct = std::function<void(const std::string& name, double flops, const std::function<void()>& fn)>;

// The four linear layers of a block (in -> out widths, with bias) and the tied head (no bias) at N
// rows: forward (the projections with their residual in the epilogue, the MLP's first with GELU
// as the model runs them), the input gradient, and the weight and bias gradients.
inline void time_model_products(Bench& bench, const ExecContext& ctx, const TimeProduct& gemm, std::int64_t N,
                                std::int64_t C, std::int64_t Vp) {
  cuda::KernelResources& res = *ctx.cuda_resources;
  const bool was_timed = res.timed_gemm_search;
  const cuda::BiasGradRoute was_route = res.bias_grad_route;
  res.timed_gemm_search = true;
  res.bias_grad_route = cuda::BiasGradRoute::kFastest;
  struct Layer {
    const char* name;
    std::int64_t in, out;
    bool residual;  // forward: the residual added in the epilogue
    bool gelu_out;  // forward: GELU in the epilogue
    bool gelu_in;   // backward: dinp through the GELU of the input (DGELU epilogue)
    bool bias;
  };
  const Layer layers[] = {{"qkv", C, 3 * C, false, false, false, true},
                          {"attn proj", C, C, true, false, false, true},
                          {"fc", C, 4 * C, false, true, false, true},
                          {"mlp proj", 4 * C, C, true, false, true, true},
                          {"head", C, Vp, false, false, false, false}};
  for (const Layer& l : layers) {
    const Shape x_shape{N, l.in}, y_shape{N, l.out}, w_shape{l.in, l.out};
    Buffer x = bench.buf(DType::kBF16, N * l.in), y = bench.buf(DType::kBF16, N * l.out),
           w = bench.buf(DType::kBF16, l.in * l.out), b = bench.buf(DType::kBF16, l.out),
           pre = l.gelu_out ? bench.buf(DType::kBF16, N * l.out) : Buffer{},
           pre_in = l.gelu_in ? bench.buf(DType::kBF16, N * l.in) : Buffer{},
           resid = l.residual ? bench.buf(DType::kBF16, N * l.out) : Buffer{}, dx = bench.buf(DType::kBF16, N * l.in),
           dw = bench.buf(DType::kBF16, l.in * l.out), db = bench.buf(DType::kBF16, l.out);
    const TensorView bias = l.bias ? b.view() : TensorView{}, dbias = l.bias ? db.view() : TensorView{};
    const double flops = 2.0 * N * l.in * l.out;
    const std::string tag = fmt::format("model {} [{}, {}]->[{}, {}] bf16", l.name, N, l.in, N, l.out);
    const std::string fwd = l.residual ? " fwd +residual" : (l.gelu_out ? " fwd +gelu" : " fwd");
    gemm(tag + fwd, flops, [&] {
      if (l.residual) {
        cuda::matmul_residual_forward(ctx, y.view(y_shape), x.view(x_shape), w.view(w_shape),
                                      cuda::WeightLayout::kInOut, bias, resid.view(y_shape));
      } else {
        cuda::matmul_forward(ctx, y.view(y_shape), x.view(x_shape), w.view(w_shape), cuda::WeightLayout::kInOut, bias,
                             l.gelu_out ? pre.view(y_shape) : TensorView{});
      }
    });
    gemm(tag + (l.gelu_in ? " dinp +dgelu" : " dinp"), flops, [&] {
      cuda::matmul_backward(ctx, dx.view(x_shape), {}, {}, y.view(y_shape), x.view(x_shape), w.view(w_shape),
                            cuda::WeightLayout::kInOut, l.gelu_in ? pre_in.view(x_shape) : TensorView{});
    });
    gemm(tag + (l.bias ? " dweight+dbias" : " dweight"), flops, [&] {
      cuda::matmul_backward(ctx, {}, dw.view(w_shape), dbias, y.view(y_shape), x.view(x_shape), w.view(w_shape),
                            cuda::WeightLayout::kInOut);
    });
  }
  res.timed_gemm_search = was_timed;
  res.bias_grad_route = was_route;
}

}  // namespace zt::bench
