// CPU kernels with BF16 activation operands (docs/precision.md): each must equal the fp32 kernel
// run on the widened inputs (matmul weights rounded to bf16) with every result rounded to bf16
// once. Ops whose rows are independent must match bit for bit even when the staging splits them
// into several chunks (sizes below are chosen to force that); parameter gradients summed across
// chunks (matmul dweight/dbias, LayerNorm dweight/dbias) are checked normwise against one fp32
// call, to 1e-6, since the chunks only regroup an fp32 sum.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/base/core/bf16.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/bf16_staging.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/residual.h"
#include "tests/kernels/kernel_test_util.h"

namespace zt::test {
namespace {

// A host BF16 tensor made from fp32 values (rounded), with its widened values for references.
struct Bf16Tensor {
  std::vector<bf16> bits;
  Shape shape;
  Bf16Tensor(const std::vector<float>& values, Shape s) : bits(values.size()), shape(s) {
    for (std::size_t i = 0; i < values.size(); ++i) bits[i] = float_to_bf16(values[i]);
  }
  TensorView view() { return TensorView{bits.data(), DType::kBF16, Device::kCPU, shape}; }
  std::vector<float> widened() const {
    std::vector<float> v(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) v[i] = bf16_to_float(bits[i]);
    return v;
  }
};

std::vector<float> rounded(std::vector<float> v) {
  for (float& x : v) x = round_to_bf16(x);
  return v;
}

// Bit-for-bit equality of a bf16 result with the rounded fp32 reference.
::testing::AssertionResult same_bits(const Bf16Tensor& got, const std::vector<float>& want_fp32) {
  const std::vector<float> g = got.widened(), w = rounded(want_fp32);
  if (g.size() != w.size()) return ::testing::AssertionFailure() << "size " << g.size() << " vs " << w.size();
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (std::memcmp(&g[i], &w[i], sizeof(float)) != 0) {
      return ::testing::AssertionFailure() << "element " << i << ": got " << g[i] << ", want " << w[i];
    }
  }
  return ::testing::AssertionSuccess();
}

template <typename T>
::testing::AssertionResult same_values(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size differs";
  if (std::memcmp(got.data(), want.data(), got.size() * sizeof(T)) != 0) {
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
        return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", want " << want[i];
      }
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(Bf16Staging, ChunksCoverRowsInOrderAndAliasedOperandsShareACopy) {
  std::vector<float> a_vals = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};  // [5, 3]
  Bf16Tensor a(a_vals, Shape{5, 3});
  Bf16Tensor sum(std::vector<float>(5, 0.0f), Shape{5, 1});
  Bf16Tensor acc(std::vector<float>(5, 0.5f), Shape{5, 1});
  std::vector<std::pair<std::int64_t, std::int64_t>> chunks;
  using cpu::detail::Access;
  // 2 rows of staging: a (3 floats) + sum (1) + acc, aliased twice, (1) = 20 bytes per row.
  cpu::detail::stage_rows(
      cpu_ctx(),
      {{a.view(), Access::kRead},
       {sum.view(), Access::kWrite},
       {acc.view(), Access::kRead},
       {acc.view(), Access::kWrite},
       {TensorView{}, Access::kRead}},
      [&](std::int64_t first, std::int64_t n, std::span<const TensorView> v) {
        chunks.emplace_back(first, n);
        ASSERT_EQ(v[2].data, v[3].data) << "aliased operands share one staging copy";
        ASSERT_EQ(v[4].data, nullptr);
        const float* x = v[0].as<float>();
        for (std::int64_t r = 0; r < n; ++r) {
          v[1].as<float>()[r] = x[3 * r] + x[3 * r + 1] + x[3 * r + 2];
          v[3].as<float>()[r] += 1.0f;
        }
      },
      /*stage_bytes=*/40);
  EXPECT_EQ(chunks, (std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 2}, {2, 2}, {4, 1}}));
  EXPECT_EQ(sum.widened(), (std::vector<float>{6, 15, 24, 33, 42}));
  EXPECT_EQ(acc.widened(), std::vector<float>(5, 1.5f));
}

TEST(Bf16Activations, MixedOperandDtypesAreRejectedNamingTheOp) {
  std::vector<float> x(8, 1.0f), w(4, 1.0f), b(4, 0.0f), mean(2), rstd(2);
  Bf16Tensor out(std::vector<float>(8), Shape{2, 4});
  try {
    cpu::layernorm_forward(cpu_ctx(), out.view(), view_of(mean), view_of(rstd), view_of(x, Shape{2, 4}), view_of(w),
                           view_of(b));
    FAIL() << "mixed F32/BF16 operands were accepted";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("layernorm_forward"), std::string::npos) << e.what();
  }
}

TEST(Bf16Activations, LayerNormEqualsRoundedFp32) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t N = 300, C = 96;
  Bf16Tensor inp(rng.normal(N * C, 0.5f, 2.0f), Shape{N, C});
  std::vector<float> w = rng.normal(C, 1.0f, 0.2f), b = rng.normal(C, 0.0f, 0.2f);
  Bf16Tensor out(std::vector<float>(N * C), Shape{N, C});
  std::vector<float> mean(N), rstd(N), want(N * C), want_mean(N), want_rstd(N), x = inp.widened();
  cpu::layernorm_forward(cpu_ctx(), out.view(), view_of(mean), view_of(rstd), inp.view(), view_of(w), view_of(b));
  cpu::layernorm_forward(cpu_ctx(), view_of(want, Shape{N, C}), view_of(want_mean), view_of(want_rstd),
                         view_of(x, Shape{N, C}), view_of(w), view_of(b));
  EXPECT_TRUE(same_bits(out, want));
  EXPECT_TRUE(same_values(mean, want_mean));
  EXPECT_TRUE(same_values(rstd, want_rstd));

  // Backward accumulates into dinp: round(widen(old) + contribution).
  Bf16Tensor dout(rng.normal(N * C), Shape{N, C}), dinp(rng.normal(N * C), Shape{N, C});
  std::vector<float> dw(C, 0.0f), db(C, 0.0f), want_dw(C, 0.0f), want_db(C, 0.0f);
  std::vector<float> want_dinp = dinp.widened(), g = dout.widened();
  cpu::layernorm_backward(cpu_ctx(), dinp.view(), view_of(dw), view_of(db), dout.view(), inp.view(), view_of(w),
                          view_of(mean), view_of(rstd));
  cpu::layernorm_backward(cpu_ctx(), view_of(want_dinp, Shape{N, C}), view_of(want_dw), view_of(want_db),
                          view_of(g, Shape{N, C}), view_of(x, Shape{N, C}), view_of(w), view_of(mean), view_of(rstd));
  EXPECT_TRUE(same_bits(dinp, want_dinp));
  EXPECT_TRUE(same_values(dw, want_dw));
  EXPECT_TRUE(same_values(db, want_db));
}

TEST(Bf16Activations, MatmulRoundsTheWeightAndTheResultOnce) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t N = 70, C = 48, OC = 80;
  for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
    const Shape wshape = layout == WeightLayout::kInOut ? Shape{C, OC} : Shape{OC, C};
    Bf16Tensor inp(rng.normal(N * C), Shape{N, C});
    std::vector<float> w = rng.normal(C * OC, 0.0f, 0.1f), bias = rng.normal(OC, 0.0f, 0.1f);
    std::vector<float> w_rounded = rounded(w), x = inp.widened();
    Bf16Tensor out(std::vector<float>(N * OC), Shape{N, OC});
    std::vector<float> want(N * OC);
    cpu::matmul_forward(cpu_ctx(), out.view(), inp.view(), view_of(w, wshape), layout, view_of(bias));
    cpu::matmul_forward(cpu_ctx(), view_of(want, Shape{N, OC}), view_of(x, Shape{N, C}), view_of(w_rounded, wshape),
                        layout, view_of(bias));
    EXPECT_TRUE(same_bits(out, want));

    Bf16Tensor dout(rng.normal(N * OC), Shape{N, OC}), dinp(std::vector<float>(N * C), Shape{N, C});
    std::vector<float> dw(C * OC, 0.25f), db(OC, 0.5f), want_dinp(N * C), want_dw = dw, want_db = db,
                                                                          g = dout.widened();
    cpu::matmul_backward(cpu_ctx(), dinp.view(), view_of(dw, wshape), view_of(db), dout.view(), inp.view(),
                         view_of(w, wshape), layout);
    cpu::matmul_backward(cpu_ctx(), view_of(want_dinp, Shape{N, C}), view_of(want_dw, wshape), view_of(want_db),
                         view_of(g, Shape{N, OC}), view_of(x, Shape{N, C}), view_of(w_rounded, wshape), layout);
    EXPECT_TRUE(same_bits(dinp, want_dinp));
    EXPECT_TRUE(same_values(dw, want_dw));  // dweight: fp32, from the unrounded products of bf16 inputs
    EXPECT_TRUE(same_values(db, want_db));
  }
}

TEST(Bf16Activations, MatmulAcrossStagingChunksMatchesOneFp32Call) {
  ZT_SEEDED_RNG(rng);
  // 64 MiB of staging holds ~10000 rows of 768 + 768 floats: 24000 rows take three chunks.
  const std::int64_t N = 24000, C = 768, OC = 768;
  Bf16Tensor inp(rng.normal(N * C), Shape{N, C});
  std::vector<float> w = rounded(rng.normal(C * OC, 0.0f, 0.05f)), x = inp.widened();
  Bf16Tensor out(std::vector<float>(N * OC), Shape{N, OC});
  std::vector<float> want(N * OC);
  cpu::matmul_forward(cpu_ctx(), out.view(), inp.view(), view_of(w, Shape{C, OC}), WeightLayout::kInOut, {});
  cpu::matmul_forward(cpu_ctx(), view_of(want, Shape{N, OC}), view_of(x, Shape{N, C}), view_of(w, Shape{C, OC}),
                      WeightLayout::kInOut, {});
  EXPECT_TRUE(close_normwise(out.widened(), to_double(rounded(want)), 0x1p-7)) << "rows are independent";
  Bf16Tensor dout(rng.normal(N * OC), Shape{N, OC});
  std::vector<float> dw(C * OC, 0.0f), db(OC, 0.0f), want_dw(C * OC, 0.0f), want_db(OC, 0.0f), g = dout.widened();
  cpu::matmul_backward(cpu_ctx(), {}, view_of(dw, Shape{C, OC}), view_of(db), dout.view(), inp.view(),
                       view_of(w, Shape{C, OC}), WeightLayout::kInOut);
  cpu::matmul_backward(cpu_ctx(), {}, view_of(want_dw, Shape{C, OC}), view_of(want_db), view_of(g, Shape{N, OC}),
                       view_of(x, Shape{N, C}), view_of(w, Shape{C, OC}), WeightLayout::kInOut);
  EXPECT_TRUE(close_normwise(dw, to_double(want_dw), 1e-6));
  EXPECT_TRUE(close_normwise(db, to_double(want_db), 1e-6));
}

TEST(Bf16Activations, AttentionWithDropoutKeepsEachSamplesMaskAcrossChunks) {
  ZT_SEEDED_RNG(rng);
  // 8 heads of 512 x 512 probabilities are 8 MiB per sample: the 16 MiB of staging holds one
  // sample at a time, so each chunk must offset the dropout's sample index.
  const std::int64_t B = 3, T = 512, NH = 8, C = 64;
  const DropoutSpec drop{0.1f, 1234, 7, 1000};
  Bf16Tensor qkv(rng.normal(B * T * 3 * C), Shape{B, T, 3 * C});
  Bf16Tensor out(std::vector<float>(B * T * C), Shape{B, T, C}),
      att(std::vector<float>(B * NH * T * T), Shape{B, NH, T, T});
  std::vector<float> x = qkv.widened(), want_out(B * T * C), want_att(B * NH * T * T);
  cpu::attention_forward(cpu_ctx(), out.view(), att.view(), qkv.view(), NH, drop);
  cpu::attention_forward(cpu_ctx(), view_of(want_out, Shape{B, T, C}), view_of(want_att, Shape{B, NH, T, T}),
                         view_of(x, Shape{B, T, 3 * C}), NH, drop);
  EXPECT_TRUE(same_bits(out, want_out));
  EXPECT_TRUE(same_bits(att, want_att));

  Bf16Tensor dout(rng.normal(B * T * C), Shape{B, T, C}), dqkv(std::vector<float>(B * T * 3 * C), Shape{B, T, 3 * C});
  std::vector<float> g = dout.widened(), p = att.widened(), want_dqkv(B * T * 3 * C);
  cpu::attention_backward(cpu_ctx(), dqkv.view(), dout.view(), qkv.view(), att.view(), NH, drop);
  cpu::attention_backward(cpu_ctx(), view_of(want_dqkv, Shape{B, T, 3 * C}), view_of(g, Shape{B, T, C}),
                          view_of(x, Shape{B, T, 3 * C}), view_of(p, Shape{B, NH, T, T}), NH, drop);
  EXPECT_TRUE(same_bits(dqkv, want_dqkv));
}

TEST(Bf16Activations, ElementwiseOpsAcrossChunks) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t n = 5'000'000;  // three 16 MiB chunks for the two- and three-operand ops
  Bf16Tensor a(rng.normal(n, 0.0f, 2.0f), Shape{n}), b(rng.normal(n), Shape{n}), out(std::vector<float>(n), Shape{n});
  std::vector<float> xa = a.widened(), xb = b.widened(), want(n);
  cpu::gelu_forward(cpu_ctx(), out.view(), a.view());
  cpu::gelu_forward(cpu_ctx(), view_of(want), view_of(xa));
  EXPECT_TRUE(same_bits(out, want));
  cpu::gelu_backward(cpu_ctx(), out.view(), a.view(), b.view());
  cpu::gelu_backward(cpu_ctx(), view_of(want), view_of(xa), view_of(xb));
  EXPECT_TRUE(same_bits(out, want));
  cpu::residual_forward(cpu_ctx(), out.view(), a.view(), b.view());
  cpu::residual_forward(cpu_ctx(), view_of(want), view_of(xa), view_of(xb));
  EXPECT_TRUE(same_bits(out, want));

  // Dropout in place over 5 samples of 1M elements: two samples per chunk.
  const DropoutSpec drop{0.2f, 99, 3, (std::int64_t{1} << 33) + 5};
  const Shape samples{5, 1'000'000};
  std::vector<float> xs(xa.begin(), xa.begin() + samples.numel()), want_d(samples.numel());
  Bf16Tensor d(xs, samples);
  const std::vector<float> widened = d.widened();
  cpu::dropout_forward(cpu_ctx(), d.view(), d.view(), drop);
  std::vector<float> in = widened;
  cpu::dropout_forward(cpu_ctx(), view_of(want_d, samples), view_of(in, samples), drop);
  EXPECT_TRUE(same_bits(d, want_d));
  want_d = rounded(want_d);  // the backward reads the stored (rounded) values
  cpu::dropout_backward(cpu_ctx(), d.view(), d.view(), drop);
  cpu::dropout_backward(cpu_ctx(), view_of(want_d, samples), view_of(want_d, samples), drop);
  EXPECT_TRUE(same_bits(d, want_d));
}

TEST(Bf16Activations, EmbeddingAndCrossEntropy) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t B = 4, T = 33, C = 40, V = 61, Vp = 64;
  std::vector<std::int32_t> tokens = rng.ints(B * T, 0, V - 1), targets = rng.ints(B * T, 0, V - 1);
  std::vector<float> wte = rng.normal(Vp * C), wpe = rng.normal(T * C), want(B * T * C);
  Bf16Tensor out(std::vector<float>(B * T * C), Shape{B, T, C});
  cpu::embedding_forward(cpu_ctx(), out.view(), view_of(tokens, Shape{B, T}), view_of(wte, Shape{Vp, C}),
                         view_of(wpe, Shape{T, C}));
  cpu::embedding_forward(cpu_ctx(), view_of(want, Shape{B, T, C}), view_of(tokens, Shape{B, T}),
                         view_of(wte, Shape{Vp, C}), view_of(wpe, Shape{T, C}));
  EXPECT_TRUE(same_bits(out, want));
  std::vector<float> dwte(Vp * C, 0.0f), dwpe(T * C, 0.0f), want_dwte = dwte, want_dwpe = dwpe, g = out.widened();
  cpu::embedding_backward(cpu_ctx(), view_of(dwte, Shape{Vp, C}), view_of(dwpe, Shape{T, C}), out.view(),
                          view_of(tokens, Shape{B, T}));
  cpu::embedding_backward(cpu_ctx(), view_of(want_dwte, Shape{Vp, C}), view_of(want_dwpe, Shape{T, C}),
                          view_of(g, Shape{B, T, C}), view_of(tokens, Shape{B, T}));
  EXPECT_TRUE(same_values(dwte, want_dwte));
  EXPECT_TRUE(same_values(dwpe, want_dwpe));

  // Softmax cross-entropy in place, as the model runs it (probabilities over the logits, then
  // their gradient over the probabilities).
  Bf16Tensor logits(rng.normal(B * T * Vp, 0.0f, 3.0f), Shape{B * T, Vp});
  std::vector<float> x = logits.widened(), losses(B * T), want_losses(B * T);
  cpu::softmax_cross_entropy_forward(cpu_ctx(), view_of(losses), logits.view(), logits.view(), view_of(targets),
                                     static_cast<int>(V));
  cpu::softmax_cross_entropy_forward(cpu_ctx(), view_of(want_losses), view_of(x, Shape{B * T, Vp}),
                                     view_of(x, Shape{B * T, Vp}), view_of(targets), static_cast<int>(V));
  EXPECT_TRUE(same_values(losses, want_losses));
  EXPECT_TRUE(same_bits(logits, x));
  std::vector<float> p = logits.widened();
  cpu::softmax_cross_entropy_backward(cpu_ctx(), logits.view(), logits.view(), view_of(targets), 0.01f,
                                      static_cast<int>(V));
  cpu::softmax_cross_entropy_backward(cpu_ctx(), view_of(p, Shape{B * T, Vp}), view_of(p, Shape{B * T, Vp}),
                                      view_of(targets), 0.01f, static_cast<int>(V));
  EXPECT_TRUE(same_bits(logits, p));
}

}  // namespace
}  // namespace zt::test
