// Tests for kernels/cpu/matmul: forward against an fp64 reference for both weight layouts, backward
// against finite differences and an fp64 analytic reference, and the += / skip semantics.
#include "kernels/cpu/matmul.h"

#include <cmath>
#include <limits>

#include "kernel_test_util.h"

namespace zt::cpu {
namespace {

using test::close_normwise;
using test::cpu_ctx;
using test::to_double;
using test::view_of;

struct MatmulCase {
  std::int64_t B, T, C, OC;
};

// W(i, o) of a weight stored in `layout`, C inputs, OC outputs.
template <typename V>
double w_at(const V& w, WeightLayout layout, std::int64_t C, std::int64_t OC, std::int64_t i, std::int64_t o) {
  return layout == WeightLayout::kInOut ? w[i * OC + o] : w[o * C + i];
}

std::vector<double> matmul_ref(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>* b,
                               WeightLayout layout, std::int64_t N, std::int64_t C, std::int64_t OC) {
  std::vector<double> out(static_cast<std::size_t>(N * OC));
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t o = 0; o < OC; ++o) {
      double s = b != nullptr ? (*b)[o] : 0.0;
      for (std::int64_t i = 0; i < C; ++i) s += x[n * C + i] * w_at(w, layout, C, OC, i, o);
      out[n * OC + o] = s;
    }
  }
  return out;
}

Shape weight_shape(WeightLayout layout, std::int64_t C, std::int64_t OC) {
  return layout == WeightLayout::kInOut ? Shape{C, OC} : Shape{OC, C};
}

const char* layout_name(WeightLayout l) { return l == WeightLayout::kInOut ? "kInOut" : "kOutIn"; }

TEST(MatmulForward, MatchesFp64ReferenceForBothLayoutsWithAndWithoutBias) {
  ZT_SEEDED_RNG(rng);
  for (const MatmulCase& cs : {MatmulCase{1, 13, 20, 9}, MatmulCase{2, 7, 64, 48}, MatmulCase{3, 11, 256, 70}}) {
    for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
      for (bool with_bias : {true, false}) {
        SCOPED_TRACE(testing::Message() << "B=" << cs.B << " T=" << cs.T << " C=" << cs.C << " OC=" << cs.OC << " "
                                        << layout_name(layout) << " bias=" << with_bias);
        const std::int64_t N = cs.B * cs.T;
        auto x = rng.uniform(N * cs.C);
        auto w = rng.uniform(cs.C * cs.OC);
        auto b = rng.uniform(cs.OC);
        std::vector<float> out(static_cast<std::size_t>(N * cs.OC), std::numeric_limits<float>::quiet_NaN());
        matmul_forward(cpu_ctx(), view_of(out, {cs.B, cs.T, cs.OC}), view_of(x, {cs.B, cs.T, cs.C}),
                       view_of(w, weight_shape(layout, cs.C, cs.OC)), layout, with_bias ? view_of(b) : TensorView{});
        const auto bd = to_double(b);
        const auto ref = matmul_ref(to_double(x), to_double(w), with_bias ? &bd : nullptr, layout, N, cs.C, cs.OC);
        // fp32 dot products of K=C terms: rounding grows ~sqrt(K) * eps (6e-8), so 2e-6 * sqrt(K)
        // relative to max|out| leaves a wide margin while catching any wrong index or transpose.
        EXPECT_TRUE(close_normwise(out, ref, 2e-6 * std::sqrt(static_cast<double>(cs.C))));
      }
    }
  }
}

// Fills dinp/dweight/dbias from the kernel, with dweight/dbias starting at the given prior values.
struct MatmulGrads {
  std::vector<float> dinp, dweight, dbias;
};

MatmulGrads run_backward(const MatmulCase& cs, WeightLayout layout, std::vector<float>& x, std::vector<float>& w,
                         std::vector<float>& dout, std::vector<float> dweight_prior, std::vector<float> dbias_prior) {
  const std::int64_t N = cs.B * cs.T;
  MatmulGrads g;
  g.dinp.assign(static_cast<std::size_t>(N * cs.C), std::numeric_limits<float>::quiet_NaN());  // must be overwritten
  g.dweight = std::move(dweight_prior);
  g.dbias = std::move(dbias_prior);
  matmul_backward(cpu_ctx(), view_of(g.dinp, {cs.B, cs.T, cs.C}), view_of(g.dweight, weight_shape(layout, cs.C, cs.OC)),
                  view_of(g.dbias), view_of(dout, {cs.B, cs.T, cs.OC}), view_of(x, {cs.B, cs.T, cs.C}),
                  view_of(w, weight_shape(layout, cs.C, cs.OC)), layout);
  return g;
}

TEST(MatmulBackward, MatchesFiniteDifferencesOfFp64Reference) {
  ZT_SEEDED_RNG(rng);
  for (const MatmulCase& cs : {MatmulCase{1, 13, 20, 9}, MatmulCase{2, 5, 16, 12}}) {
    for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
      SCOPED_TRACE(testing::Message() << "C=" << cs.C << " OC=" << cs.OC << " " << layout_name(layout));
      const std::int64_t N = cs.B * cs.T;
      auto x = rng.uniform(N * cs.C);
      auto w = rng.uniform(cs.C * cs.OC);
      auto b = rng.uniform(cs.OC);
      auto dout = rng.uniform(N * cs.OC);
      const MatmulGrads g =
          run_backward(cs, layout, x, w, dout, std::vector<float>(w.size()), std::vector<float>(b.size()));

      const auto xd = to_double(x), wd = to_double(w), bd = to_double(b), gd = to_double(dout);
      auto loss_x = [&](const std::vector<double>& v) {
        return test::weighted_sum(gd, matmul_ref(v, wd, &bd, layout, N, cs.C, cs.OC));
      };
      auto loss_w = [&](const std::vector<double>& v) {
        return test::weighted_sum(gd, matmul_ref(xd, v, &bd, layout, N, cs.C, cs.OC));
      };
      auto loss_b = [&](const std::vector<double>& v) {
        return test::weighted_sum(gd, matmul_ref(xd, wd, &v, layout, N, cs.C, cs.OC));
      };
      // fp32 kernel vs fp64 numeric gradient: sums of at most N=14 or OC=12 products, ~1e-7 each.
      constexpr double kTol = 1e-5;
      EXPECT_TRUE(close_normwise(g.dinp, test::numeric_gradient(loss_x, xd), kTol)) << "dinp";
      EXPECT_TRUE(close_normwise(g.dweight, test::numeric_gradient(loss_w, wd), kTol)) << "dweight";
      EXPECT_TRUE(close_normwise(g.dbias, test::numeric_gradient(loss_b, bd), kTol)) << "dbias";
    }
  }
}

TEST(MatmulBackward, AccumulatesIntoWeightAndBiasGradientsAndOverwritesDinp) {
  ZT_SEEDED_RNG(rng);
  const MatmulCase cs{4, 16, 96, 80};
  const std::int64_t N = cs.B * cs.T;
  for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
    SCOPED_TRACE(layout_name(layout));
    auto x = rng.uniform(N * cs.C);
    auto w = rng.uniform(cs.C * cs.OC);
    auto dout = rng.uniform(N * cs.OC);
    const auto dw_prior = rng.uniform(cs.C * cs.OC);
    const auto db_prior = rng.uniform(cs.OC);
    const MatmulGrads g = run_backward(cs, layout, x, w, dout, dw_prior, db_prior);

    // fp64 analytic reference: dinp = dout W^T, dW = prior + x^T dout, db = prior + colsum(dout).
    std::vector<double> dinp_ref(static_cast<std::size_t>(N * cs.C), 0.0);
    std::vector<double> dw_ref = to_double(dw_prior);
    std::vector<double> db_ref = to_double(db_prior);
    for (std::int64_t n = 0; n < N; ++n) {
      for (std::int64_t o = 0; o < cs.OC; ++o) {
        const double go = dout[n * cs.OC + o];
        db_ref[o] += go;
        for (std::int64_t i = 0; i < cs.C; ++i) {
          dinp_ref[n * cs.C + i] += go * w_at(w, layout, cs.C, cs.OC, i, o);
          const std::int64_t wi = layout == WeightLayout::kInOut ? i * cs.OC + o : o * cs.C + i;
          dw_ref[wi] += go * x[n * cs.C + i];
        }
      }
    }
    // Sums of up to N=64 fp32 products: 2e-6 * sqrt(64) relative to the largest entry.
    constexpr double kTol = 1.6e-5;
    EXPECT_TRUE(close_normwise(g.dinp, dinp_ref, kTol)) << "dinp (NaN-prefilled, so beta=0 must overwrite)";
    EXPECT_TRUE(close_normwise(g.dweight, dw_ref, kTol)) << "dweight must keep its prior content";
    EXPECT_TRUE(close_normwise(g.dbias, db_ref, kTol)) << "dbias must keep its prior content";
  }
}

TEST(MatmulBackward, SkipsEmptyDinpAndDbias) {
  ZT_SEEDED_RNG(rng);
  const MatmulCase cs{1, 9, 20, 12};
  auto x = rng.uniform(cs.T * cs.C);
  auto w = rng.uniform(cs.C * cs.OC);
  auto dout = rng.uniform(cs.T * cs.OC);
  std::vector<float> dweight(w.size(), 0.0f);
  matmul_backward(cpu_ctx(), TensorView{}, view_of(dweight, {cs.C, cs.OC}), TensorView{}, view_of(dout, {cs.T, cs.OC}),
                  view_of(x, {cs.T, cs.C}), view_of(w, {cs.C, cs.OC}), WeightLayout::kInOut);
  const MatmulGrads full =
      run_backward(cs, WeightLayout::kInOut, x, w, dout, std::vector<float>(w.size()), std::vector<float>(cs.OC));
  EXPECT_TRUE(test::bitwise_equal(dweight, full.dweight));
}

TEST(Matmul, RepeatsBitwiseWhateverTheBufferAlignment) {
  // Activation recompute reruns the forward, possibly into another buffer: same bits required.
  ZT_SEEDED_RNG(rng);
  const MatmulCase cs{2, 13, 40, 36};
  const std::int64_t N = cs.B * cs.T;
  auto x = rng.uniform(N * cs.C), w = rng.uniform(cs.C * cs.OC), b = rng.uniform(cs.OC);
  auto dout = rng.uniform(N * cs.OC);
  std::vector<float> out(N * cs.OC);
  matmul_forward(cpu_ctx(), view_of(out, {N, cs.OC}), view_of(x, {N, cs.C}), view_of(w, {cs.C, cs.OC}),
                 WeightLayout::kInOut, view_of(b));
  const MatmulGrads g =
      run_backward(cs, WeightLayout::kInOut, x, w, dout, std::vector<float>(w.size()), std::vector<float>(b.size()));

  test::ShiftedCopy xs(x), ws(w), bs(b), gs(dout);
  auto outs = test::ShiftedCopy::zeros(N * cs.OC);
  matmul_forward(cpu_ctx(), outs.view({N, cs.OC}), xs.view({N, cs.C}), ws.view({cs.C, cs.OC}), WeightLayout::kInOut,
                 bs.view({cs.OC}));
  EXPECT_TRUE(test::bitwise_equal(outs.values(), out));
  auto di = test::ShiftedCopy::zeros(N * cs.C), dw = test::ShiftedCopy::zeros(cs.C * cs.OC);
  auto db = test::ShiftedCopy::zeros(cs.OC);
  matmul_backward(cpu_ctx(), di.view({N, cs.C}), dw.view({cs.C, cs.OC}), db.view({cs.OC}), gs.view({N, cs.OC}),
                  xs.view({N, cs.C}), ws.view({cs.C, cs.OC}), WeightLayout::kInOut);
  EXPECT_TRUE(test::bitwise_equal(di.values(), g.dinp));
  EXPECT_TRUE(test::bitwise_equal(dw.values(), g.dweight));
  EXPECT_TRUE(test::bitwise_equal(db.values(), g.dbias));
}

TEST(MatmulForward, RejectsMismatchedWeightShape) {
  std::vector<float> x(6 * 4), w(4 * 5), out(6 * 5);
  EXPECT_THROW(matmul_forward(cpu_ctx(), view_of(out, {6, 5}), view_of(x, {6, 4}), view_of(w, {4, 5}),
                              WeightLayout::kOutIn, TensorView{}),
               InternalError);
}

}  // namespace
}  // namespace zt::cpu
