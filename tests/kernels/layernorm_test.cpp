// Tests for kernels/cpu/layernorm: forward (out, mean, rstd) against fp64, backward against finite
// differences and an fp64 analytic reference, += semantics, and thread-count independence.
#include "kernels/cpu/layernorm.h"

#include <cmath>
#include <limits>

#include "kernel_test_util.h"

namespace zt::cpu {
namespace {

using test::close_normwise;
using test::cpu_ctx;
using test::to_double;
using test::view_of;

struct LnRef {
  std::vector<double> out, mean, rstd;
};

LnRef layernorm_ref(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                    std::int64_t N, std::int64_t C) {
  LnRef r{std::vector<double>(x.size()), std::vector<double>(N), std::vector<double>(N)};
  for (std::int64_t n = 0; n < N; ++n) {
    double m = 0.0, var = 0.0;
    for (std::int64_t c = 0; c < C; ++c) m += x[n * C + c];
    m /= static_cast<double>(C);
    for (std::int64_t c = 0; c < C; ++c) var += (x[n * C + c] - m) * (x[n * C + c] - m);
    var /= static_cast<double>(C);
    const double s = 1.0 / std::sqrt(var + static_cast<double>(kLayerNormEps));
    for (std::int64_t c = 0; c < C; ++c) r.out[n * C + c] = (x[n * C + c] - m) * s * w[c] + b[c];
    r.mean[n] = m;
    r.rstd[n] = s;
  }
  return r;
}

struct LnData {
  std::int64_t N, C;
  std::vector<float> x, w, b, out, mean, rstd;
};

LnData make_and_forward(test::Rng& rng, std::int64_t N, std::int64_t C, float offset = 0.0f, int threads = 2) {
  LnData d{N, C, rng.normal(N * C, offset, 1.5f), rng.uniform(C, 0.5f, 1.5f), rng.uniform(C), {}, {}, {}};
  d.out.assign(static_cast<std::size_t>(N * C), std::numeric_limits<float>::quiet_NaN());
  d.mean.assign(static_cast<std::size_t>(N), 0.0f);
  d.rstd.assign(static_cast<std::size_t>(N), 0.0f);
  layernorm_forward(cpu_ctx(threads), view_of(d.out, {N, C}), view_of(d.mean), view_of(d.rstd), view_of(d.x, {N, C}),
                    view_of(d.w), view_of(d.b));
  return d;
}

struct LnGrads {
  std::vector<float> dinp, dweight, dbias;
};

LnGrads run_backward(LnData& d, std::vector<float>& dout, LnGrads prior, int threads = 2) {
  layernorm_backward(cpu_ctx(threads), view_of(prior.dinp, {d.N, d.C}), view_of(prior.dweight), view_of(prior.dbias),
                     view_of(dout, {d.N, d.C}), view_of(d.x, {d.N, d.C}), view_of(d.w), view_of(d.mean),
                     view_of(d.rstd));
  return prior;
}

LnGrads zero_grads(std::int64_t N, std::int64_t C) {
  return {std::vector<float>(N * C), std::vector<float>(C), std::vector<float>(C)};
}

TEST(LayerNormForward, MatchesFp64Reference) {
  ZT_SEEDED_RNG(rng);
  struct Case {
    std::int64_t N, C;
    float offset;
  };
  for (const Case cs : {Case{13, 20, 0.0f}, Case{21, 64, 3.0f}, Case{5, 768, -10.0f}}) {
    SCOPED_TRACE(testing::Message() << "N=" << cs.N << " C=" << cs.C << " offset=" << cs.offset);
    LnData d = make_and_forward(rng, cs.N, cs.C, cs.offset);
    const LnRef ref = layernorm_ref(to_double(d.x), to_double(d.w), to_double(d.b), cs.N, cs.C);
    // fp32 row sums of C <= 768 terms then a few element-wise ops: a few eps (6e-8) per element;
    // 1e-5 relative to the largest entry is generous yet far below any formula error.
    EXPECT_TRUE(close_normwise(d.out, ref.out, 1e-5)) << "out";
    EXPECT_TRUE(close_normwise(d.mean, ref.mean, 1e-5)) << "mean";
    EXPECT_TRUE(close_normwise(d.rstd, ref.rstd, 1e-5)) << "rstd";
  }
}

TEST(LayerNormBackward, MatchesFiniteDifferencesOfFp64Reference) {
  ZT_SEEDED_RNG(rng);
  // N=70 spans three 32-row chunks, so the chunked weight-gradient reduction is exercised.
  struct Case {
    std::int64_t N, C;
  };
  for (const Case cs : {Case{13, 20}, Case{70, 12}}) {
    SCOPED_TRACE(testing::Message() << "N=" << cs.N << " C=" << cs.C);
    LnData d = make_and_forward(rng, cs.N, cs.C, 0.5f);
    auto dout = rng.uniform(cs.N * cs.C);
    const LnGrads g = run_backward(d, dout, zero_grads(cs.N, cs.C));
    const auto xd = to_double(d.x), wd = to_double(d.w), bd = to_double(d.b), gd = to_double(dout);
    auto loss_x = [&](const std::vector<double>& v) {
      return test::weighted_sum(gd, layernorm_ref(v, wd, bd, cs.N, cs.C).out);
    };
    auto loss_w = [&](const std::vector<double>& v) {
      return test::weighted_sum(gd, layernorm_ref(xd, v, bd, cs.N, cs.C).out);
    };
    auto loss_b = [&](const std::vector<double>& v) {
      return test::weighted_sum(gd, layernorm_ref(xd, wd, v, cs.N, cs.C).out);
    };
    // fp32 kernel (row means over C terms, column sums over N <= 70 rows) vs fp64 numeric gradient.
    constexpr double kTol = 2e-5;
    EXPECT_TRUE(close_normwise(g.dinp, test::numeric_gradient(loss_x, xd), kTol)) << "dinp";
    EXPECT_TRUE(close_normwise(g.dweight, test::numeric_gradient(loss_w, wd), kTol)) << "dweight";
    EXPECT_TRUE(close_normwise(g.dbias, test::numeric_gradient(loss_b, bd), kTol)) << "dbias";
  }
}

TEST(LayerNormBackward, AccumulatesIntoAllGradientsMatchingFp64Analytic) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t N = 100, C = 96;
  LnData d = make_and_forward(rng, N, C);
  auto dout = rng.uniform(N * C);
  const LnGrads prior{rng.uniform(N * C), rng.uniform(C), rng.uniform(C)};
  const LnGrads g = run_backward(d, dout, prior);

  // fp64 analytic: dinp = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)), dnorm = dout * w.
  const LnRef ref = layernorm_ref(to_double(d.x), to_double(d.w), to_double(d.b), N, C);
  std::vector<double> dinp = to_double(prior.dinp), dw = to_double(prior.dweight), db = to_double(prior.dbias);
  for (std::int64_t n = 0; n < N; ++n) {
    double mean_dnorm = 0.0, mean_dnorm_norm = 0.0;
    for (std::int64_t c = 0; c < C; ++c) {
      const double norm = (d.x[n * C + c] - ref.mean[n]) * ref.rstd[n];
      const double dnorm = dout[n * C + c] * static_cast<double>(d.w[c]);
      mean_dnorm += dnorm / C;
      mean_dnorm_norm += dnorm * norm / C;
      dw[c] += dout[n * C + c] * norm;
      db[c] += dout[n * C + c];
    }
    for (std::int64_t c = 0; c < C; ++c) {
      const double norm = (d.x[n * C + c] - ref.mean[n]) * ref.rstd[n];
      const double dnorm = dout[n * C + c] * static_cast<double>(d.w[c]);
      dinp[n * C + c] += ref.rstd[n] * (dnorm - mean_dnorm - norm * mean_dnorm_norm);
    }
  }
  // Column sums over N=100 rows in fp32 plus the prior: 2e-5 of the largest entry.
  EXPECT_TRUE(close_normwise(g.dinp, dinp, 2e-5)) << "dinp must keep its prior content";
  EXPECT_TRUE(close_normwise(g.dweight, dw, 2e-5)) << "dweight must keep its prior content";
  EXPECT_TRUE(close_normwise(g.dbias, db, 2e-5)) << "dbias must keep its prior content";
}

TEST(LayerNormBackward, BitwiseIndependentOfThreadCountAndRepeatable) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t N = 300, C = 40;
  LnData d = make_and_forward(rng, N, C, 0.0f, 1);
  LnData d3 = d;
  layernorm_forward(cpu_ctx(3), view_of(d3.out, {N, C}), view_of(d3.mean), view_of(d3.rstd), view_of(d3.x, {N, C}),
                    view_of(d3.w), view_of(d3.b));
  EXPECT_TRUE(test::bitwise_equal(d.out, d3.out));
  auto dout = rng.uniform(N * C);
  const LnGrads g1 = run_backward(d, dout, zero_grads(N, C), 1);
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE(testing::Message() << "threads=" << threads);
    const LnGrads g = run_backward(d, dout, zero_grads(N, C), threads);
    EXPECT_TRUE(test::bitwise_equal(g.dinp, g1.dinp));
    EXPECT_TRUE(test::bitwise_equal(g.dweight, g1.dweight));
    EXPECT_TRUE(test::bitwise_equal(g.dbias, g1.dbias));
  }
}

TEST(LayerNorm, BitwiseIndependentOfBufferAlignment) {
  // Activation recompute may run into a different buffer: results must not depend on alignment.
  ZT_SEEDED_RNG(rng);
  const std::int64_t N = 37, C = 77;
  LnData d = make_and_forward(rng, N, C);
  auto dout = rng.uniform(N * C);
  const LnGrads g = run_backward(d, dout, zero_grads(N, C));

  test::ShiftedCopy x(d.x), w(d.w), b(d.b), out(d.out), mean(d.mean), rstd(d.rstd), go(dout);
  layernorm_forward(cpu_ctx(), out.view({N, C}), mean.view({N}), rstd.view({N}), x.view({N, C}), w.view({C}),
                    b.view({C}));
  EXPECT_TRUE(test::bitwise_equal(out.values(), d.out));
  auto di = test::ShiftedCopy::zeros(N * C), dw = test::ShiftedCopy::zeros(C), db = test::ShiftedCopy::zeros(C);
  layernorm_backward(cpu_ctx(), di.view({N, C}), dw.view({C}), db.view({C}), go.view({N, C}), x.view({N, C}),
                     w.view({C}), mean.view({N}), rstd.view({N}));
  EXPECT_TRUE(test::bitwise_equal(di.values(), g.dinp));
  EXPECT_TRUE(test::bitwise_equal(dw.values(), g.dweight));
  EXPECT_TRUE(test::bitwise_equal(db.values(), g.dbias));
}

}  // namespace
}  // namespace zt::cpu
