// CUDA LayerNorm, GELU, residual, dropout, embedding and softmax cross-entropy with BF16 activation
// operands (docs/precision.md) against the CPU kernels called with the same BF16 operands (label
// gpu). Both sides compute in fp32 from the widened inputs and round each result once, so a bf16
// result differs only where the fp32 kernels' own discrepancy (summation order, expf) crosses a
// rounding boundary: |gpu - cpu| <= 2^-7 |cpu| (at least one bf16 ulp) + the F32 test's normwise
// tolerance times max|cpu|. fp32 results (LayerNorm statistics and parameter gradients, losses) keep
// the F32 tests' tolerances; residual, dropout and embedding are one rounding of the same fp32 value
// (the embedding gradients the same fp32 sums in the same order): bit for bit. At offset 0 the
// kernels take their 4-wide paths (8-byte bf16 groups) where shapes allow; offset 1 puts every
// operand one element off that alignment, forcing the scalar paths.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/residual.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/residual.h"
#include "tests/gpu/gpu_test_util.h"

namespace zt::test {
namespace {

// 0: the vector paths; 1: 2-byte aligned (scalar paths); 2: 4-byte aligned for bf16 and 8-byte for
// F32, which an alignment test weaker than the access width would let fault or misread.
constexpr std::int64_t kOffsets[] = {0, 1, 2};

// Every element within 2^-7 |ref| + fp32_tol * max|ref| of the reference (the header's bound); a
// NaN (an element the kernel never wrote: outputs start poisoned) fails.
::testing::AssertionResult close_bf16(const std::vector<bf16>& got, const std::vector<bf16>& ref, double fp32_tol) {
  if (got.size() != ref.size()) return ::testing::AssertionFailure() << "size " << got.size() << " vs " << ref.size();
  const std::vector<float> g = widened(got), r = widened(ref);
  double max_ref = 0.0;
  for (float x : r) max_ref = std::max(max_ref, std::abs(static_cast<double>(x)));
  const double atol = fp32_tol * max_ref;
  for (std::size_t i = 0; i < r.size(); ++i) {
    const double diff = std::abs(static_cast<double>(g[i]) - r[i]), allowed = std::abs(r[i]) / 128.0 + atol;
    if (!(diff <= allowed)) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << g[i] << ", reference " << r[i] << ", allowed difference " << allowed;
    }
  }
  return ::testing::AssertionSuccess();
}

using CudaBf16Rowwise = GpuKernelTest;

struct LnShape {
  std::int64_t N, C;
};
// C % 4 == 0 (12, 768, 100, 2064) takes the 4-wide path at offset 0; 1, 13 and 37 the scalar one.
// Rows of up to 128 groups are loaded in one batch (whole-row kernels); 2064 takes several.
const LnShape kLnShapes[] = {{1, 1}, {5, 37}, {7, 13}, {65, 12}, {33, 768}, {4099, 100}, {9, 2064}};

TEST_F(CudaBf16Rowwise, LayerNormForwardAndResidualFusedMatchCpu) {
  ZT_SEEDED_RNG(rng);
  for (auto [N, C] : kLnShapes) {
    for (std::int64_t off : kOffsets) {
      SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C << " offset=" << off);
      std::vector<bf16> a = rounded(rng.normal(N * C, 2.0f, 3.0f)), b = rounded(rng.normal(N * C));
      std::vector<float> w = rng.normal(C), bias = rng.normal(C), mean(N), rstd(N);
      std::vector<bf16> x(a.size()), out(a.size());
      const Shape nc{N, C}, n{N}, c{C};
      cpu::residual_forward(cpu_ctx(), view_of(x), view_of(a), view_of(b));
      cpu::layernorm_forward(cpu_ctx(), view_of(out, nc), view_of(mean), view_of(rstd), view_of(x, nc), view_of(w),
                             view_of(bias));
      Buffer da = upload_bf16_at(off, a), db = upload_bf16_at(off, b), dx = upload_bf16_at(off, x);
      Buffer dw = upload_at(off, w), dbias = upload_at(off, bias);
      Buffer o = poisoned(DType::kBF16, off + N * C), m = poisoned(DType::kF32, off + N),
             r = poisoned(DType::kF32, off + N);
      cuda::layernorm_forward(gpu(), view_at(o, off, nc), view_at(m, off, n), view_at(r, off, n), view_at(dx, off, nc),
                              view_at(dw, off, c), view_at(dbias, off, c));
      EXPECT_TRUE(close_bf16(download_bf16_from(o, off), out, 1e-5)) << "out";
      EXPECT_TRUE(close_normwise(download_from(m, off), to_double(mean), 1e-5)) << "mean";
      EXPECT_TRUE(close_normwise(download_from(r, off), to_double(rstd), 1e-5)) << "rstd";
      // Fused: the residual is one rounding of a + b, and the rounded residual is what is normalised.
      // Fresh statistics buffers, so the fused kernel must write them itself.
      Buffer res = poisoned(DType::kBF16, off + N * C), o2 = poisoned(DType::kBF16, off + N * C);
      m = poisoned(DType::kF32, off + N);
      r = poisoned(DType::kF32, off + N);
      cuda::layernorm_residual_forward(gpu(), view_at(res, off, nc), view_at(o2, off, nc), view_at(m, off, n),
                                       view_at(r, off, n), view_at(da, off, nc), view_at(db, off, nc),
                                       view_at(dw, off, c), view_at(dbias, off, c));
      EXPECT_TRUE(bitwise_equal(download_bf16_from(res, off), x)) << "residual";
      EXPECT_TRUE(close_bf16(download_bf16_from(o2, off), out, 1e-5)) << "fused out";
      EXPECT_TRUE(close_normwise(download_from(m, off), to_double(mean), 1e-5)) << "fused mean";
      EXPECT_TRUE(close_normwise(download_from(r, off), to_double(rstd), 1e-5)) << "fused rstd";
      // In place (residual aliases a), as the GPU block calls it.
      Buffer o3 = poisoned(DType::kBF16, off + N * C);
      cuda::layernorm_residual_forward(gpu(), view_at(da, off, nc), view_at(o3, off, nc), view_at(m, off, n),
                                       view_at(r, off, n), view_at(da, off, nc), view_at(db, off, nc),
                                       view_at(dw, off, c), view_at(dbias, off, c));
      EXPECT_TRUE(bitwise_equal(download_bf16_from(da, off), x)) << "in place residual";
      EXPECT_TRUE(bitwise_equal(download_bf16_from(o3, off), download_bf16_from(o2, off))) << "in place out";
    }
  }
}

TEST_F(CudaBf16Rowwise, LayerNormBackwardMatchesCpu) {
  ZT_SEEDED_RNG(rng);
  for (auto [N, C] : kLnShapes) {
    for (std::int64_t off : kOffsets) {
      SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C << " offset=" << off);
      std::vector<bf16> x = rounded(rng.normal(N * C, 1.0f, 2.0f)), g = rounded(rng.normal(N * C));
      std::vector<float> w = rng.normal(C), bias = rng.normal(C), mean(N), rstd(N);
      std::vector<bf16> out(x.size());
      const Shape nc{N, C}, n{N}, c{C};
      cpu::layernorm_forward(cpu_ctx(), view_of(out, nc), view_of(mean), view_of(rstd), view_of(x, nc), view_of(w),
                             view_of(bias));
      // Gradients accumulate (dinp as round(widen(old) + contribution)): start from non-zero values.
      std::vector<bf16> dx = rounded(rng.normal(N * C));
      std::vector<float> dw = rng.normal(C), db = rng.normal(C);
      Buffer gdx = upload_bf16_at(off, dx), gdw = upload_at(off, dw), gdb = upload_at(off, db);
      Buffer gx = upload_bf16_at(off, x), gg = upload_bf16_at(off, g), gw = upload_at(off, w),
             gm = upload_at(off, mean), gr = upload_at(off, rstd);
      cpu::layernorm_backward(cpu_ctx(), view_of(dx, nc), view_of(dw), view_of(db), view_of(g, nc), view_of(x, nc),
                              view_of(w), view_of(mean), view_of(rstd));
      cuda::layernorm_backward(gpu(), view_at(gdx, off, nc), view_at(gdw, off, c), view_at(gdb, off, c),
                               view_at(gg, off, nc), view_at(gx, off, nc), view_at(gw, off, c), view_at(gm, off, n),
                               view_at(gr, off, n));
      EXPECT_TRUE(close_bf16(download_bf16_from(gdx, off), dx, 1e-5)) << "dinp";
      EXPECT_TRUE(close_normwise(download_from(gdw, off), to_double(dw), 1e-5)) << "dweight";
      EXPECT_TRUE(close_normwise(download_from(gdb, off), to_double(db), 1e-5)) << "dbias";
    }
  }
}

// Sizes cover the 4-wide bulk, the scalar tail, and (offset 1) the scalar kernel throughout.
const std::int64_t kSizes[] = {1, 7, 8, 1000, 4099, 1 << 16};

TEST_F(CudaBf16Rowwise, GeluForwardAndBackwardMatchCpu) {
  ZT_SEEDED_RNG(rng);
  for (std::int64_t n : kSizes) {
    for (std::int64_t off : kOffsets) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " offset=" << off);
      std::vector<bf16> x = rounded(rng.normal(n, 0.0f, 3.0f)), g = rounded(rng.normal(n));
      std::vector<bf16> out(x.size()), dinp(x.size());
      cpu::gelu_forward(cpu_ctx(), view_of(out), view_of(x));
      cpu::gelu_backward(cpu_ctx(), view_of(dinp), view_of(x), view_of(g));
      Buffer gx = upload_bf16_at(off, x), gg = upload_bf16_at(off, g);
      Buffer go = poisoned(DType::kBF16, off + n), gd = poisoned(DType::kBF16, off + n);
      const Shape s{n};
      cuda::gelu_forward(gpu(), view_at(go, off, s), view_at(gx, off, s));
      cuda::gelu_backward(gpu(), view_at(gd, off, s), view_at(gx, off, s), view_at(gg, off, s));
      EXPECT_TRUE(close_bf16(download_bf16_from(go, off), out, 1e-5)) << "forward";
      EXPECT_TRUE(close_bf16(download_bf16_from(gd, off), dinp, 1e-5)) << "backward";
    }
  }
}

TEST_F(CudaBf16Rowwise, ResidualMatchesCpuBitForBit) {
  ZT_SEEDED_RNG(rng);
  for (std::int64_t n : kSizes) {
    for (std::int64_t off : kOffsets) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " offset=" << off);
      std::vector<bf16> a = rounded(rng.normal(n)), b = rounded(rng.normal(n)), want(a.size());
      cpu::residual_forward(cpu_ctx(), view_of(want), view_of(a), view_of(b));
      Buffer ga = upload_bf16_at(off, a), gb = upload_bf16_at(off, b), out = poisoned(DType::kBF16, off + n);
      const Shape s{n};
      cuda::residual_forward(gpu(), view_at(out, off, s), view_at(ga, off, s), view_at(gb, off, s));
      EXPECT_TRUE(bitwise_equal(download_bf16_from(out, off), want));
      cuda::residual_forward(gpu(), view_at(ga, off, s), view_at(ga, off, s), view_at(gb, off, s));
      EXPECT_TRUE(bitwise_equal(download_bf16_from(ga, off), want)) << "in place";
    }
  }
}

TEST_F(CudaBf16Rowwise, DropoutMatchesCpuBitForBit) {
  ZT_SEEDED_RNG(rng);
  struct S {
    std::int64_t B, N;
  };
  for (auto [B, N] : {S{1, 1}, S{3, 7}, S{2, 8}, S{4, 1000}, S{2, 4099}}) {
    for (float p : {0.0f, 0.1f, 0.5f}) {  // 0: the identity (a copy of the bf16 bytes)
      for (std::int64_t first_sample : {std::int64_t{3}, (std::int64_t{1} << 33) + 5}) {
        for (std::int64_t off : kOffsets) {
          SCOPED_TRACE(::testing::Message() << "B=" << B << " N=" << N << " p=" << p << " first_sample=" << first_sample
                                            << " offset=" << off);
          const DropoutSpec spec{p, /*seed=*/0x0123456789ABCDEFull, /*site=*/7, first_sample};
          const Shape shape{B, N};
          std::vector<bf16> x = rounded(rng.normal(B * N)), want(x.size()), want_back(x.size());
          cpu::dropout_forward(cpu_ctx(), view_of(want, shape), view_of(x, shape), spec);
          cpu::dropout_backward(cpu_ctx(), view_of(want_back, shape), view_of(x, shape), spec);
          Buffer in = upload_bf16_at(off, x), out = poisoned(DType::kBF16, off + B * N),
                 dinp = poisoned(DType::kBF16, off + B * N);
          cuda::dropout_forward(gpu(), view_at(out, off, shape), view_at(in, off, shape), spec);
          EXPECT_TRUE(bitwise_equal(download_bf16_from(out, off), want)) << "forward";
          cuda::dropout_backward(gpu(), view_at(dinp, off, shape), view_at(in, off, shape), spec);
          EXPECT_TRUE(bitwise_equal(download_bf16_from(dinp, off), want_back)) << "backward";
          cuda::dropout_forward(gpu(), view_at(in, off, shape), view_at(in, off, shape), spec);
          EXPECT_TRUE(bitwise_equal(download_bf16_from(in, off), want)) << "in place";
        }
      }
    }
  }
}

// wte, wpe and their gradients are F32 parameters; out and dout are the BF16 activations.
TEST_F(CudaBf16Rowwise, EmbeddingMatchesCpuBitForBit) {
  ZT_SEEDED_RNG(rng);
  struct S {
    std::int64_t B, T, C, V;
  };
  for (auto [B, T, C, V] : {S{1, 1, 1, 1}, S{2, 7, 37, 5}, S{3, 5, 12, 4}, S{4, 64, 768, 50}, S{3, 129, 64, 1000}}) {
    for (std::int64_t off : kOffsets) {
      SCOPED_TRACE(::testing::Message() << "B=" << B << " T=" << T << " C=" << C << " V=" << V << " offset=" << off);
      std::vector<std::int32_t> tok = rng.ints(B * T, 0, static_cast<std::int32_t>(V));  // small V: many repeats
      std::vector<float> wte = rng.normal(V * C), wpe = rng.normal((T + 3) * C);
      std::vector<bf16> g = rounded(rng.normal(B * T * C)), out(B * T * C);
      const Shape btc{B, T, C}, vc{V, C}, pc{T + 3, C}, bt{B, T};
      cpu::embedding_forward(cpu_ctx(), view_of(out, btc), view_of(tok, bt), view_of(wte, vc), view_of(wpe, pc));
      Buffer dtok = upload(tok), dwte = upload_at(off, wte), dwpe = upload_at(off, wpe), dg = upload_bf16_at(off, g);
      Buffer o = poisoned(DType::kBF16, off + B * T * C);
      cuda::embedding_forward(gpu(), view_at(o, off, btc), dtok.view(bt), view_at(dwte, off, vc),
                              view_at(dwpe, off, pc));
      EXPECT_TRUE(bitwise_equal(download_bf16_from(o, off), out)) << "forward";
      std::vector<float> gte = rng.normal(V * C), gpe = rng.normal((T + 3) * C);  // accumulate onto these
      Buffer ggte = upload_at(off, gte), ggpe = upload_at(off, gpe);
      cpu::embedding_backward(cpu_ctx(), view_of(gte, vc), view_of(gpe, pc), view_of(g, btc), view_of(tok, bt));
      cuda::embedding_backward(gpu(), view_at(ggte, off, vc), view_at(ggpe, off, pc), view_at(dg, off, btc),
                               dtok.view(bt));
      EXPECT_TRUE(bitwise_equal(download_from(ggte, off), gte)) << "dwte";
      EXPECT_TRUE(bitwise_equal(download_from(ggpe, off), gpe)) << "dwpe";
    }
  }
}

// Vp % 4 == 0 takes the 4-wide path at offset 0 (Vp = 8 with V = 7: masked columns in a loaded
// group); Vp = 1, 15, 37 and offset 1 the scalar one.
TEST_F(CudaBf16Rowwise, CrossEntropyForwardBackwardAndFusedMatchCpu) {
  ZT_SEEDED_RNG(rng);
  for (auto [N, V, Vp] : kCrossEntropyShapes) {
    for (std::int64_t off : kOffsets) {
      SCOPED_TRACE(::testing::Message() << "N=" << N << " V=" << V << " Vp=" << Vp << " offset=" << off);
      std::vector<bf16> logits = rounded(rng.normal(N * Vp, 0.0f, 4.0f));
      std::vector<std::int32_t> tgt = rng.ints(N, 0, V);
      tgt[N - 1] = V - 1;  // in the row's last live group (partial where V is not a multiple of the group)
      const float dloss = 1.0f / static_cast<float>(N);
      const Shape nv{N, Vp};
      std::vector<float> losses(N);
      std::vector<bf16> probs(N * Vp), dlogits(N * Vp);
      cpu::softmax_cross_entropy_forward(cpu_ctx(), view_of(losses), view_of(probs, nv), view_of(logits, nv),
                                         view_of(tgt), V);
      cpu::softmax_cross_entropy_backward(cpu_ctx(), view_of(dlogits, nv), view_of(probs, nv), view_of(tgt), dloss, V);
      Buffer gl = upload_bf16_at(off, logits), gt = upload(tgt), gloss = poisoned(DType::kF32, N);
      Buffer gp = poisoned(DType::kBF16, off + N * Vp);
      cuda::softmax_cross_entropy_forward(gpu(), gloss.view(), view_at(gp, off, nv), view_at(gl, off, nv), gt.view(),
                                          V);
      EXPECT_TRUE(close_normwise(download<float>(gloss), to_double(losses), 1e-5)) << "losses";
      EXPECT_TRUE(close_bf16(download_bf16_from(gp, off), probs, 1e-5)) << "probs";
      // Backward from the CPU's probabilities (this op alone), in place as probs may alias dlogits.
      Buffer gd = upload_bf16_at(off, probs);
      cuda::softmax_cross_entropy_backward(gpu(), view_at(gd, off, nv), view_at(gd, off, nv), gt.view(), dloss, V);
      EXPECT_TRUE(close_bf16(download_bf16_from(gd, off), dlogits, 1e-5)) << "dlogits";
      // Forward in place (probs aliasing logits).
      Buffer gl2 = upload_bf16_at(off, logits), gloss2 = poisoned(DType::kF32, N);
      cuda::softmax_cross_entropy_forward(gpu(), gloss2.view(), view_at(gl2, off, nv), view_at(gl2, off, nv), gt.view(),
                                          V);
      EXPECT_TRUE(close_normwise(download<float>(gloss2), to_double(losses), 1e-5)) << "in place losses";
      EXPECT_TRUE(close_bf16(download_bf16_from(gl2, off), probs, 1e-5)) << "in place probs";
      // Fused, in place on the logits: its gradient comes from the unrounded fp32 probabilities, so its
      // reference is the F32 CPU forward and backward on the widened logits, rounded once at the end.
      std::vector<float> wide = widened(logits), probs32(N * Vp), dlogits32(N * Vp), losses32(N);
      cpu::softmax_cross_entropy_forward(cpu_ctx(), view_of(losses32), view_of(probs32, nv), view_of(wide, nv),
                                         view_of(tgt), V);
      cpu::softmax_cross_entropy_backward(cpu_ctx(), view_of(dlogits32, nv), view_of(probs32, nv), view_of(tgt), dloss,
                                          V);
      Buffer gloss3 = poisoned(DType::kF32, N);
      cuda::softmax_cross_entropy_fused(gpu(), gloss3.view(), view_at(gl, off, nv), view_at(gl, off, nv), gt.view(),
                                        dloss, V);
      EXPECT_TRUE(close_normwise(download<float>(gloss3), to_double(losses32), 1e-5)) << "fused losses";
      EXPECT_TRUE(close_bf16(download_bf16_from(gl, off), rounded(dlogits32), 1e-5)) << "fused dlogits";
      // The row kept in shared memory (where it fits, as at every shape here) instead of read from
      // memory at every pass: bitwise the same losses and gradient.
      Buffer gl4 = upload_bf16_at(off, logits), gloss4 = poisoned(DType::kF32, N);
      cuda::softmax_cross_entropy_fused(gpu(), gloss4.view(), view_at(gl4, off, nv), view_at(gl4, off, nv), gt.view(),
                                        dloss, V, cuda::CeRowCache::kSharedMemory);
      EXPECT_EQ(download<float>(gloss4), download<float>(gloss3)) << "fused losses, row in shared memory";
      EXPECT_TRUE(bitwise_equal(download_bf16_from(gl4, off), download_bf16_from(gl, off)))
          << "fused dlogits, row in shared memory";
    }
  }
}

// An op's activation operands must share one dtype: a mix is a ZT_CHECK failure naming the op. The
// check precedes every CUDA call, so this runs on any machine: the views are labelled as GPU
// memory at a dummy address that is never dereferenced.
TEST(CudaBf16ActivationDtypes, MixedDtypesAreRejectedNamingTheOp) {
  ExecContext ctx;
  ctx.device = Device::kCUDA;
  const auto view = [](DType dtype, Shape shape) {
    return TensorView{reinterpret_cast<void*>(std::uintptr_t{1} << 20), dtype, Device::kCUDA, shape};
  };
  const Shape nc{4, 8}, c{8}, n{4}, bt{2, 2};
  const TensorView h = view(DType::kBF16, nc), f = view(DType::kF32, nc), fc = view(DType::kF32, c),
                   fn = view(DType::kF32, n), tok = view(DType::kI32, bt), tgt = view(DType::kI32, n);
  const auto rejected = [](const char* op, auto&& call) -> ::testing::AssertionResult {
    try {
      call();
    } catch (const InternalError& e) {
      if (std::string(e.what()).find(op) != std::string::npos) return ::testing::AssertionSuccess();
      return ::testing::AssertionFailure() << "the message does not name " << op << ": " << e.what();
    }
    return ::testing::AssertionFailure() << op << " accepted mixed activation dtypes";
  };
  EXPECT_TRUE(rejected("layernorm_forward", [&] { cuda::layernorm_forward(ctx, h, fn, fn, f, fc, fc); }));
  EXPECT_TRUE(rejected("layernorm_residual_forward",
                       [&] { cuda::layernorm_residual_forward(ctx, h, h, fn, fn, h, f, fc, fc); }));
  EXPECT_TRUE(rejected("layernorm_backward", [&] { cuda::layernorm_backward(ctx, f, fc, fc, h, h, fc, fn, fn); }));
  EXPECT_TRUE(rejected("gelu_forward", [&] { cuda::gelu_forward(ctx, f, h); }));
  EXPECT_TRUE(rejected("gelu_backward", [&] { cuda::gelu_backward(ctx, h, h, f); }));
  EXPECT_TRUE(rejected("residual_forward", [&] { cuda::residual_forward(ctx, h, f, h); }));
  const DropoutSpec spec{0.5f, 1, 0, 0};
  EXPECT_TRUE(rejected("dropout_forward", [&] { cuda::dropout_forward(ctx, h, f, spec); }));
  EXPECT_TRUE(rejected("dropout_backward", [&] { cuda::dropout_backward(ctx, f, h, spec); }));
  // The embedding has one activation operand; an integer one is rejected the same way.
  const TensorView wte = view(DType::kF32, Shape{10, 8}), wpe = view(DType::kF32, Shape{2, 8});
  EXPECT_TRUE(rejected("embedding_forward", [&] {
    cuda::embedding_forward(ctx, view(DType::kI32, Shape{2, 2, 8}), tok, wte, wpe);
  }));
  EXPECT_TRUE(rejected("embedding_backward", [&] {
    cuda::embedding_backward(ctx, wte, wpe, view(DType::kI32, Shape{2, 2, 8}), tok);
  }));
  EXPECT_TRUE(
      rejected("softmax_cross_entropy_forward", [&] { cuda::softmax_cross_entropy_forward(ctx, fn, h, f, tgt, 8); }));
  EXPECT_TRUE(rejected("softmax_cross_entropy_backward",
                       [&] { cuda::softmax_cross_entropy_backward(ctx, f, h, tgt, 1.0f, 8); }));
  EXPECT_TRUE(
      rejected("softmax_cross_entropy_fused", [&] { cuda::softmax_cross_entropy_fused(ctx, fn, f, h, tgt, 1.0f, 8); }));
}

}  // namespace
}  // namespace zt::test
