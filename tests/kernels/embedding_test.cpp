// Tests for kernels/cpu/embedding: forward against fp64, backward (scatter-add with repeated tokens)
// against finite differences and an fp64 reference, += semantics, determinism, and token checks.
#include "kernels/cpu/embedding.h"

#include "engine/base/core/bf16.h"
#include "kernel_test_util.h"

namespace zt::cpu {
namespace {

using test::close_normwise;
using test::cpu_ctx;
using test::to_double;
using test::view_of;

struct EmbCase {
  std::int64_t B, T, C, Vp, maxT;
};

std::vector<double> embedding_ref(const std::vector<std::int32_t>& tok, const std::vector<double>& wte,
                                  const std::vector<double>& wpe, const EmbCase& cs) {
  std::vector<double> out(cs.B * cs.T * cs.C);
  for (std::int64_t bt = 0; bt < cs.B * cs.T; ++bt) {
    for (std::int64_t c = 0; c < cs.C; ++c) out[bt * cs.C + c] = wte[tok[bt] * cs.C + c] + wpe[(bt % cs.T) * cs.C + c];
  }
  return out;
}

struct EmbData {
  std::vector<std::int32_t> tok;
  std::vector<float> wte, wpe;
};

EmbData make_data(test::Rng& rng, const EmbCase& cs) {
  // Vp is small next to B*T, so tokens repeat and the scatter-add must sum colliding rows.
  return {rng.ints(cs.B * cs.T, 0, static_cast<std::int32_t>(cs.Vp)), rng.uniform(cs.Vp * cs.C),
          rng.uniform(cs.maxT * cs.C)};
}

void run_backward(EmbData& d, std::vector<float>& dout, std::vector<float>& dwte, std::vector<float>& dwpe,
                  const EmbCase& cs, int threads = 2) {
  embedding_backward(cpu_ctx(threads), view_of(dwte, {cs.Vp, cs.C}), view_of(dwpe, {cs.maxT, cs.C}),
                     view_of(dout, {cs.B, cs.T, cs.C}), view_of(d.tok, {cs.B, cs.T}));
}

TEST(EmbeddingForward, MatchesFp64Reference) {
  ZT_SEEDED_RNG(rng);
  for (const EmbCase& cs : {EmbCase{2, 7, 20, 10, 9}, EmbCase{3, 16, 100, 64, 16}}) {
    EmbData d = make_data(rng, cs);
    std::vector<float> out(cs.B * cs.T * cs.C);
    embedding_forward(cpu_ctx(), view_of(out, {cs.B, cs.T, cs.C}), view_of(d.tok, {cs.B, cs.T}),
                      view_of(d.wte, {cs.Vp, cs.C}), view_of(d.wpe, {cs.maxT, cs.C}));
    // One fp32 add per element: at most half an ulp of the largest value (6e-8 relative).
    EXPECT_TRUE(close_normwise(out, embedding_ref(d.tok, to_double(d.wte), to_double(d.wpe), cs), 1e-7));
  }
}

TEST(EmbeddingBackward, MatchesFiniteDifferencesWithRepeatedTokens) {
  ZT_SEEDED_RNG(rng);
  const EmbCase cs{3, 7, 20, 10, 9};
  EmbData d = make_data(rng, cs);
  auto dout = rng.uniform(cs.B * cs.T * cs.C);
  std::vector<float> dwte(d.wte.size(), 0.0f), dwpe(d.wpe.size(), 0.0f);
  run_backward(d, dout, dwte, dwpe, cs);
  const auto gd = to_double(dout), ted = to_double(d.wte), ped = to_double(d.wpe);
  auto loss_te = [&](const std::vector<double>& v) { return test::weighted_sum(gd, embedding_ref(d.tok, v, ped, cs)); };
  auto loss_pe = [&](const std::vector<double>& v) { return test::weighted_sum(gd, embedding_ref(d.tok, ted, v, cs)); };
  // fp32 sums of at most B*T=21 gradient rows: ~1e-7 relative; rows without tokens must be exactly 0.
  EXPECT_TRUE(close_normwise(dwte, test::numeric_gradient(loss_te, ted), 1e-6)) << "dwte";
  EXPECT_TRUE(close_normwise(dwpe, test::numeric_gradient(loss_pe, ped), 1e-6)) << "dwpe";
  for (std::int64_t t = cs.T; t < cs.maxT; ++t) {
    for (std::int64_t c = 0; c < cs.C; ++c) EXPECT_EQ(dwpe[t * cs.C + c], 0.0f) << "unused position " << t;
  }
}

TEST(EmbeddingBackward, AccumulatesIntoPriorGradients) {
  ZT_SEEDED_RNG(rng);
  const EmbCase cs{4, 32, 150, 50, 40};  // C=150: three column blocks, the last one partial
  EmbData d = make_data(rng, cs);
  auto dout = rng.uniform(cs.B * cs.T * cs.C);
  auto dwte = rng.uniform(cs.Vp * cs.C), dwpe = rng.uniform(cs.maxT * cs.C);
  std::vector<double> te_ref = to_double(dwte), pe_ref = to_double(dwpe);
  for (std::int64_t bt = 0; bt < cs.B * cs.T; ++bt) {
    for (std::int64_t c = 0; c < cs.C; ++c) {
      te_ref[d.tok[bt] * cs.C + c] += dout[bt * cs.C + c];
      pe_ref[(bt % cs.T) * cs.C + c] += dout[bt * cs.C + c];
    }
  }
  run_backward(d, dout, dwte, dwpe, cs);
  // fp32 sums of up to B*T=128 terms on top of the prior: 1e-6 of the largest entry.
  EXPECT_TRUE(close_normwise(dwte, te_ref, 1e-6)) << "dwte must keep its prior content";
  EXPECT_TRUE(close_normwise(dwpe, pe_ref, 1e-6)) << "dwpe must keep its prior content";
}

TEST(EmbeddingBackward, BitwiseIndependentOfThreadCount) {
  ZT_SEEDED_RNG(rng);
  const EmbCase cs{4, 64, 200, 8, 64};  // 8 tokens over 256 positions: heavy collisions
  EmbData d = make_data(rng, cs);
  auto dout = rng.uniform(cs.B * cs.T * cs.C);
  std::vector<float> te1(d.wte.size(), 0.0f), pe1(d.wpe.size(), 0.0f);
  run_backward(d, dout, te1, pe1, cs, 1);
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE(testing::Message() << "threads=" << threads);
    std::vector<float> te(d.wte.size(), 0.0f), pe(d.wpe.size(), 0.0f);
    run_backward(d, dout, te, pe, cs, threads);
    EXPECT_TRUE(test::bitwise_equal(te, te1));
    EXPECT_TRUE(test::bitwise_equal(pe, pe1));
  }
}

// A token table split by vocabulary rows (chunk units): the chunks' forwards together write every
// position once with the whole table's bits (bf16 out included: other chunks' positions survive the
// staging unchanged), and their backwards give its dwte rows, dwpe once, bit for bit.
TEST(EmbeddingRows, ChunksGiveTheWholeTablesBits) {
  ZT_SEEDED_RNG(rng);
  const EmbCase cs{3, 16, 24, 50, 16};
  EmbData d = make_data(rng, cs);
  for (DType act : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(act));
    const std::int64_t n = cs.B * cs.T * cs.C;
    std::vector<float> whole(n), chunked(n, 7.0f);
    std::vector<bf16> whole16(n), chunked16(n, float_to_bf16(7.0f));
    const auto out = [&](std::vector<float>& f, std::vector<bf16>& h) {
      return act == DType::kF32 ? view_of(f, {cs.B, cs.T, cs.C})
                                : TensorView{h.data(), DType::kBF16, Device::kCPU, Shape{cs.B, cs.T, cs.C}};
    };
    embedding_forward(cpu_ctx(), out(whole, whole16), view_of(d.tok, {cs.B, cs.T}), view_of(d.wte, {cs.Vp, cs.C}),
                      view_of(d.wpe, {cs.maxT, cs.C}));
    for (std::int64_t r0 = 0; r0 < cs.Vp; r0 += 16) {
      const std::int64_t rows = std::min<std::int64_t>(16, cs.Vp - r0);
      embedding_forward_rows(cpu_ctx(), out(chunked, chunked16), view_of(d.tok, {cs.B, cs.T}),
                             TensorView{d.wte.data() + r0 * cs.C, DType::kF32, Device::kCPU, Shape{rows, cs.C}},
                             view_of(d.wpe, {cs.maxT, cs.C}), r0, cs.Vp);
    }
    if (act == DType::kF32) {
      EXPECT_TRUE(test::bitwise_equal(chunked, whole));
    } else {
      for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(chunked16[i].bits, whole16[i].bits) << i;
    }
  }
  auto dout = rng.uniform(cs.B * cs.T * cs.C);
  std::vector<float> te(d.wte.size(), 0.0f), pe(d.wpe.size(), 0.0f), te_c(d.wte.size(), 0.0f), pe_c(d.wpe.size(), 0.0f);
  run_backward(d, dout, te, pe, cs);
  for (std::int64_t r0 = 0; r0 < cs.Vp; r0 += 16) {
    const std::int64_t rows = std::min<std::int64_t>(16, cs.Vp - r0);
    embedding_backward_rows(cpu_ctx(),
                            TensorView{te_c.data() + r0 * cs.C, DType::kF32, Device::kCPU, Shape{rows, cs.C}},
                            r0 == 0 ? view_of(pe_c, {cs.maxT, cs.C}) : TensorView{}, view_of(dout, {cs.B, cs.T, cs.C}),
                            view_of(d.tok, {cs.B, cs.T}), r0, cs.Vp);
  }
  EXPECT_TRUE(test::bitwise_equal(te_c, te));
  EXPECT_TRUE(test::bitwise_equal(pe_c, pe));
  // Tokens are checked against the whole vocabulary, not the chunk.
  std::vector<std::int32_t> bad{0, 1, 50, 2};
  std::vector<float> o(4 * cs.C);
  EXPECT_THROW(embedding_forward_rows(cpu_ctx(), view_of(o, {1, 4, cs.C}), view_of(bad, {1, 4}),
                                      TensorView{d.wte.data(), DType::kF32, Device::kCPU, Shape{16, cs.C}},
                                      view_of(d.wpe, {cs.maxT, cs.C}), 0, cs.Vp),
               InternalError);
}

// No position table (a rotary model's embedding, wpe without data): the token rows alone, bitwise
// what a table of zeros gives, in fp32 and bf16 out; the backward without dwpe gives the same dwte.
TEST(EmbeddingForward, WithoutAPositionTableIsTheTokenRowsAlone) {
  ZT_SEEDED_RNG(rng);
  const EmbCase cs{2, 6, 16, 20, 6};
  EmbData d = make_data(rng, cs);
  std::vector<float> zeros(d.wpe.size(), 0.0f), with_zeros(cs.B * cs.T * cs.C), without(with_zeros.size(), NAN);
  embedding_forward(cpu_ctx(), view_of(with_zeros, {cs.B, cs.T, cs.C}), view_of(d.tok, {cs.B, cs.T}),
                    view_of(d.wte, {cs.Vp, cs.C}), view_of(zeros, {cs.maxT, cs.C}));
  embedding_forward(cpu_ctx(), view_of(without, {cs.B, cs.T, cs.C}), view_of(d.tok, {cs.B, cs.T}),
                    view_of(d.wte, {cs.Vp, cs.C}), TensorView{});
  EXPECT_TRUE(test::bitwise_equal(without, with_zeros));
  std::vector<bf16> out16(without.size());
  embedding_forward(cpu_ctx(), TensorView{out16.data(), DType::kBF16, Device::kCPU, Shape{cs.B, cs.T, cs.C}},
                    view_of(d.tok, {cs.B, cs.T}), view_of(d.wte, {cs.Vp, cs.C}), TensorView{});
  for (std::size_t i = 0; i < out16.size(); ++i) ASSERT_EQ(out16[i].bits, float_to_bf16(without[i]).bits) << i;
  auto dout = rng.uniform(cs.B * cs.T * cs.C);
  std::vector<float> te(d.wte.size(), 0.0f), pe(d.wpe.size(), 0.0f), te_only(d.wte.size(), 0.0f);
  run_backward(d, dout, te, pe, cs);
  embedding_backward(cpu_ctx(), view_of(te_only, {cs.Vp, cs.C}), TensorView{}, view_of(dout, {cs.B, cs.T, cs.C}),
                     view_of(d.tok, {cs.B, cs.T}));
  EXPECT_TRUE(test::bitwise_equal(te_only, te));
}

TEST(EmbeddingForward, RejectsOutOfRangeTokensAndTooLongSequences) {
  const EmbCase cs{1, 4, 8, 10, 4};
  std::vector<float> wte(cs.Vp * cs.C), wpe(cs.maxT * cs.C), out(cs.T * cs.C);
  for (std::int32_t bad : {-1, 10}) {
    std::vector<std::int32_t> tok{0, 3, bad, 9};
    EXPECT_THROW(embedding_forward(cpu_ctx(), view_of(out, {1, 4, cs.C}), view_of(tok, {1, 4}),
                                   view_of(wte, {cs.Vp, cs.C}), view_of(wpe, {cs.maxT, cs.C})),
                 InternalError)
        << "token " << bad;
    EXPECT_THROW(embedding_backward(cpu_ctx(), view_of(wte, {cs.Vp, cs.C}), view_of(wpe, {cs.maxT, cs.C}),
                                    view_of(out, {1, 4, cs.C}), view_of(tok, {1, 4})),
                 InternalError)
        << "token " << bad;
  }
  std::vector<std::int32_t> tok5{0, 1, 2, 3, 4};
  std::vector<float> out5(5 * cs.C);
  EXPECT_THROW(embedding_forward(cpu_ctx(), view_of(out5, {1, 5, cs.C}), view_of(tok5, {1, 5}),
                                 view_of(wte, {cs.Vp, cs.C}), view_of(wpe, {cs.maxT, cs.C})),
               InternalError);
}

}  // namespace
}  // namespace zt::cpu
