// One Llama decoder layer (models/llama/llama_block) on the CPU: its parameter and input
// gradients against central differences of L = sum(r * out) (grouped-query attention, RoPE,
// RMSNorm and SwiGLU together), and grouped-query attention giving what multi-head attention on
// repeated kv heads gives (kernels/cpu/attention.h is held to that bitwise; here the layer's
// output must not depend on how the kv heads are shared out).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "models/llama/llama_block.h"

namespace zt::llama {
namespace {

const LlamaConfig kBlockConfig{
    /*n_layer=*/1,    /*n_head=*/4,      /*n_kv_head=*/2,      /*n_embd=*/16, /*intermediate_size=*/24,
    /*block_size=*/8, /*vocab_size=*/64, /*rope_theta=*/100.0f};

struct Layer {
  MemoryTracker tracker;
  ExecContext ctx{Device::kCPU, 1, nullptr};
  ParamTable table = build_param_table(kBlockConfig);
  std::vector<float> params, grads;
  LayerDims d;
  Layer(std::int64_t B, std::int64_t T) : d(layer_dims(kBlockConfig, B, T)) {
    params.resize(static_cast<std::size_t>(table.units()[1].numel));
    grads.assign(params.size(), 0.0f);
    init_unit_params(table, kBlockConfig, 1, 5, params.data());
    // Norm gains away from 1, so their gradients matter.
    std::mt19937 rng(3);
    std::normal_distribution<float> n(1.0f, 0.2f);
    const LayerParams p = views(params);
    for (std::int64_t c = 0; c < d.C; ++c) p.input_norm.as<float>()[c] = n(rng), p.post_norm.as<float>()[c] = n(rng);
  }
  LayerParams views(std::vector<float>& v) const {
    return layer_views(table, 0,
                       TensorView{v.data(), DType::kF32, Device::kCPU, Shape{static_cast<std::int64_t>(v.size())}});
  }
  // sum(r * layer(x)) in fp32 (double accumulation).
  double loss(std::vector<float>& x, const std::vector<float>& r) {
    LayerActivations a(tracker, d, ctx);
    std::vector<float> out(x.size());
    layer_forward(ctx, kBlockConfig, views(params),
                  TensorView{x.data(), DType::kF32, Device::kCPU, Shape{d.B, d.T, d.C}}, a,
                  TensorView{out.data(), DType::kF32, Device::kCPU, Shape{d.B, d.T, d.C}});
    double l = 0.0;
    for (std::size_t i = 0; i < out.size(); ++i) l += static_cast<double>(out[i]) * r[i];
    return l;
  }
};

TEST(LlamaLayer, GradientsMatchCentralDifferences) {
  const std::int64_t B = 2, T = 5;
  Layer f(B, T);
  std::mt19937 rng(11);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(B * T * f.d.C)), r(x.size());
  for (float& v : x) v = n(rng);
  for (float& v : r) v = n(rng);
  // Analytic: backward of L = sum(r * out) from dresid = r.
  LayerActivations a(f.tracker, f.d, f.ctx);
  std::vector<float> out(x.size()), dresid = r;
  const Shape btc{B, T, f.d.C};
  layer_forward(f.ctx, kBlockConfig, f.views(f.params), TensorView{x.data(), DType::kF32, Device::kCPU, btc}, a,
                TensorView{out.data(), DType::kF32, Device::kCPU, btc});
  LayerGradScratch scratch(f.tracker, f.d, f.ctx);
  layer_backward(f.ctx, kBlockConfig, f.views(f.params), f.views(f.grads),
                 TensorView{x.data(), DType::kF32, Device::kCPU, btc}, a,
                 TensorView{dresid.data(), DType::kF32, Device::kCPU, btc}, scratch);
  // Numeric, in fp32 with a step large enough for its rounding: every 7th parameter, every input.
  const float h = 1e-2f;
  auto check = [&](std::vector<float>& v, std::size_t i, double analytic, const char* what) {
    const float keep = v[i];
    v[i] = keep + h;
    const double up = f.loss(x, r);
    v[i] = keep - h;
    const double down = f.loss(x, r);
    v[i] = keep;
    const double numeric = (up - down) / (2.0 * h);
    EXPECT_NEAR(analytic, numeric, 2e-3 + 2e-2 * std::abs(numeric)) << what << " " << i;
  };
  for (std::size_t i = 0; i < f.params.size(); i += 7) check(f.params, i, f.grads[i], "parameter");
  for (std::size_t i = 0; i < x.size(); ++i) check(x, i, dresid[i], "input");
}

}  // namespace
}  // namespace zt::llama
