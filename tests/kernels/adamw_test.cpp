// Tests for kernels/cpu/adamw: a hand-computed first step, the textbook AdamW formula over several
// steps (with and without weight decay, gradient scaling), bf16 gradients, and the F32/BF16
// working copies it writes.
#include "kernels/cpu/adamw.h"

#include <cmath>

#include "kernel_test_util.h"

namespace zt::cpu {
namespace {

using test::close_normwise;
using test::cpu_ctx;
using test::to_double;
using test::view_of;

// Textbook AdamW in fp64 (bias-corrected moments), one step in place.
void adamw_ref_step(std::vector<double>& p, std::vector<double>& m, std::vector<double>& v,
                    const std::vector<double>& g, const AdamWHyper& h, int step) {
  const double lr = h.lr, b1 = h.beta1, b2 = h.beta2, eps = h.eps, wd = h.weight_decay;
  for (std::size_t i = 0; i < p.size(); ++i) {
    p[i] *= 1.0 - lr * wd;
    m[i] = b1 * m[i] + (1.0 - b1) * g[i];
    v[i] = b2 * v[i] + (1.0 - b2) * g[i] * g[i];
    const double m_hat = m[i] / (1.0 - std::pow(b1, step));
    const double v_hat = v[i] / (1.0 - std::pow(b2, step));
    p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
  }
}

TEST(AdamW, FirstStepMatchesHandComputedValues) {
  // p = 1, g = 0.5, m = v = 0, lr = 0.1, betas (0.9, 0.95): m = 0.05, v = 0.0125, m_hat = 0.5,
  // v_hat = 0.25, so the update is lr * 0.5 / (0.5 + 1e-8) ~= 0.1. With weight decay 0.1 the
  // parameter is first scaled by 1 - lr * wd = 0.99.
  for (float wd : {0.0f, 0.1f}) {
    std::vector<float> p{1.0f}, g{0.5f}, m{0.0f}, v{0.0f};
    AdamWHyper h;
    h.lr = 0.1f;
    h.weight_decay = wd;
    adamw_update(cpu_ctx(), view_of(p), view_of(g), view_of(m), view_of(v), TensorView{}, h, 1);
    // The betas are fp32 (0.9f = 0.89999998), so 1 - beta1 = 0.10000002: allow 1e-6 relative.
    EXPECT_NEAR(m[0], 0.05f, 0.05f * 1e-6f);
    EXPECT_NEAR(v[0], 0.0125f, 0.0125f * 1e-6f);
    EXPECT_NEAR(p[0], wd == 0.0f ? 0.9f : 0.89f, 1e-6f) << "wd=" << wd;  // a few ulp of ~0.9
  }
}

TEST(AdamW, MatchesFp64FormulaOverStepsWithAndWithoutDecay) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t n = 1001;
  for (float wd : {0.0f, 0.1f}) {
    for (float grad_scale : {1.0f, 0.25f}) {
      SCOPED_TRACE(testing::Message() << "wd=" << wd << " grad_scale=" << grad_scale);
      AdamWHyper h;
      h.lr = 1e-2f;
      h.weight_decay = wd;
      auto p = rng.normal(n);
      const auto p0 = to_double(p);
      std::vector<float> m(n, 0.0f), v(n, 0.0f);
      std::vector<double> pr = p0, mr(n, 0.0), vr(n, 0.0);
      for (int step = 1; step <= 5; ++step) {
        auto g = rng.normal(n, 0.0f, 0.1f);
        adamw_update(cpu_ctx(), view_of(p), view_of(g), view_of(m), view_of(v), TensorView{}, h, step, grad_scale);
        std::vector<double> gs(n);
        for (std::int64_t i = 0; i < n; ++i) gs[i] = static_cast<double>(g[i]) * grad_scale;
        adamw_ref_step(pr, mr, vr, gs, h, step);
      }
      // Compare the accumulated updates (~5 * lr), not the parameters (~1), so fp32 rounding of
      // the parameter (6e-8 per step) counts against the update: 5e-5 relative leaves ~10x margin.
      std::vector<float> delta(n);
      std::vector<double> delta_ref(n);
      for (std::int64_t i = 0; i < n; ++i) {
        delta[i] = static_cast<float>(static_cast<double>(p[i]) - p0[i]);
        delta_ref[i] = pr[i] - p0[i];
      }
      EXPECT_TRUE(close_normwise(delta, delta_ref, 5e-5)) << "param updates";
      // Moments: a handful of fp32 multiply-adds per step.
      EXPECT_TRUE(close_normwise(m, mr, 1e-6)) << "m";
      EXPECT_TRUE(close_normwise(v, vr, 1e-6)) << "v";
    }
  }
}

TEST(AdamW, Bf16GradientAndWorkingCopies) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t n = 40000;  // several parallel blocks
  AdamWHyper h;
  h.lr = 3e-3f;
  h.weight_decay = 0.1f;
  const auto p_init = rng.normal(n);
  auto g = rng.normal(n, 0.0f, 0.1f);
  const auto m_init = rng.normal(n, 0.0f, 0.01f);
  auto v_init = rng.uniform(n, 0.0f, 1e-3f);
  std::vector<bf16> g_h(n);
  for (std::int64_t i = 0; i < n; ++i) g_h[i] = float_to_bf16(g[i]);
  std::vector<float> g_rounded(n);  // what the kernel must see for the bf16 gradient
  for (std::int64_t i = 0; i < n; ++i) g_rounded[i] = bf16_to_float(g_h[i]);

  // Reference run: F32 gradient holding the bf16 values, F32 working copy.
  auto p_ref = p_init, m_ref = m_init, v_ref = v_init;
  std::vector<float> w_f32(n);
  adamw_update(cpu_ctx(), view_of(p_ref), view_of(g_rounded), view_of(m_ref), view_of(v_ref), view_of(w_f32), h, 3);
  EXPECT_TRUE(test::bitwise_equal(w_f32, p_ref)) << "F32 working copy is the updated master";

  // BF16 gradient, BF16 working copy: same master update, working copy rounded to nearest even.
  auto p = p_init, m = m_init, v = v_init;
  std::vector<bf16> w_h(n);
  adamw_update(cpu_ctx(), view_of(p), view_of(g_h), view_of(m), view_of(v), view_of(w_h), h, 3);
  EXPECT_TRUE(test::bitwise_equal(p, p_ref));
  EXPECT_TRUE(test::bitwise_equal(m, m_ref));
  EXPECT_TRUE(test::bitwise_equal(v, v_ref));
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(w_h[i].bits, float_to_bf16(p[i]).bits) << "element " << i;

  // And the master update itself against the fp64 formula at step 3 from the given moments.
  std::vector<double> pr = to_double(p_init), mr = to_double(m_init), vr = to_double(v_init);
  adamw_ref_step(pr, mr, vr, to_double(g_rounded), h, 3);
  std::vector<float> delta(n);
  std::vector<double> delta_ref(n);
  for (std::int64_t i = 0; i < n; ++i) {
    delta[i] = static_cast<float>(static_cast<double>(p[i]) - p_init[i]);
    delta_ref[i] = pr[i] - p_init[i];
  }
  // One step of ~lr: fp32 rounding of the parameter (~2.4e-7 at |p| ~ 4) against updates ~1e-2.
  EXPECT_TRUE(close_normwise(delta, delta_ref, 5e-5));
}

// The optimizer's one call a step: each slice decays only where it says it does (biases and norms
// do not), and otherwise updates as adamw_update would, bit for bit.
TEST(AdamW, SlicesDecayOnlyWhereTheySayTheyDo) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t n = 257;
  AdamWHyper h;
  h.lr = 1e-2f;
  h.weight_decay = 0.1f;
  const auto p_init = rng.normal(2 * n);
  auto p = p_init, g = rng.normal(2 * n, 0.0f, 0.1f);
  std::vector<float> m(2 * n, 0.0f), v(2 * n, 0.0f);
  auto slice = [&](std::vector<float>& x, std::int64_t at) { return view_of(x).slice(at, n); };
  const std::vector<AdamWSlice> slices = {{slice(p, 0), slice(g, 0), slice(m, 0), slice(v, 0), TensorView{}, true},
                                          {slice(p, n), slice(g, n), slice(m, n), slice(v, n), TensorView{}, false}};
  adamw_update_slices(cpu_ctx(), slices, h, 2, 0.5f);
  for (const bool decays : {true, false}) {
    SCOPED_TRACE(decays ? "decays" : "no decay");
    const std::int64_t at = decays ? 0 : n;
    std::vector<float> p_ref(p_init.begin() + at, p_init.begin() + at + n), g_ref(g.begin() + at, g.begin() + at + n);
    std::vector<float> m_ref(n, 0.0f), v_ref(n, 0.0f);
    AdamWHyper one = h;
    one.weight_decay = decays ? h.weight_decay : 0.0f;
    adamw_update(cpu_ctx(), view_of(p_ref), view_of(g_ref), view_of(m_ref), view_of(v_ref), TensorView{}, one, 2, 0.5f);
    EXPECT_TRUE(test::bitwise_equal(std::vector<float>(p.begin() + at, p.begin() + at + n), p_ref));
    EXPECT_TRUE(test::bitwise_equal(std::vector<float>(m.begin() + at, m.begin() + at + n), m_ref));
  }
}

TEST(AdamW, RejectsMismatchedLengthsAndZeroStep) {
  std::vector<float> p(4), g(4), m(4), v(3);
  std::vector<float> m4(4), v4(4);
  AdamWHyper h;
  EXPECT_THROW(adamw_update(cpu_ctx(), view_of(p), view_of(g), view_of(m), view_of(v), TensorView{}, h, 1),
               InternalError);
  EXPECT_THROW(adamw_update(cpu_ctx(), view_of(p), view_of(g), view_of(m4), view_of(v4), TensorView{}, h, 0),
               InternalError);
}

}  // namespace
}  // namespace zt::cpu
