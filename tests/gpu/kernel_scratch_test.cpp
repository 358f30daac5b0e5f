// Each CUDA kernel call's scratch against kernels/contracts/kernel_scratch.h, the bytes the memory
// prediction takes a step's largest call from ([Note: the kernels' scratch, predicted]): the
// workspace the tracker is charged while one call runs, above what it held before, equals the
// function's bytes for the call's shapes (label gpu). The embedding backward's holds CUB's sort
// temporaries beside the predicted part, which the test prints (they are not predicted).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "kernels/contracts/dropout_spec.h"
#include "kernels/contracts/kernel_scratch.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cached_attention.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rmsnorm.h"
#include "tests/gpu/gpu_test_util.h"

namespace zt::test {
namespace {

namespace ks = kernel_scratch;

class CudaKernelScratch : public GpuKernelTest {
 protected:
  // A zeroed device tensor (the values do not change a call's scratch).
  TensorView zeros(DType dtype, Shape shape) {
    held_.emplace_back(tracker_, MemCategory::kWorkspace, dtype, shape.numel(), *allocator_, /*zero_fill=*/true);
    return held_.back().view(shape);
  }
  // The workspace `call` holds above what was held before it, freed again by its end.
  template <class Call>
  std::int64_t scratch_of(Call&& call) {
    stream_->synchronize();
    const std::int64_t before = tracker_.snapshot().current(MemCategory::kWorkspace);
    tracker_.reset_peaks();
    call();
    stream_->synchronize();
    const MemorySnapshot after = tracker_.snapshot();
    EXPECT_EQ(after.current(MemCategory::kWorkspace), before) << "the call's scratch is freed by its end";
    return after.peak(MemCategory::kWorkspace) - before;
  }

  std::vector<Buffer> held_;
};

TEST_F(CudaKernelScratch, NormBackwardsHoldTheirPartials) {
  const std::int64_t N = 100, C = 64;
  const TensorView x = zeros(DType::kF32, {N, C}), g = zeros(DType::kF32, {N, C}), dx = zeros(DType::kF32, {N, C});
  const TensorView w = zeros(DType::kF32, {C}), dw = zeros(DType::kF32, {C}), db = zeros(DType::kF32, {C});
  const TensorView mean = zeros(DType::kF32, {N}), rstd = zeros(DType::kF32, {N});
  EXPECT_EQ(scratch_of([&] { cuda::layernorm_backward(gpu(), dx, dw, db, g, x, w, mean, rstd); }),
            4 * ks::layernorm_backward_partial_floats(N, C));
  EXPECT_EQ(scratch_of([&] { cuda::rmsnorm_backward(gpu(), dx, dw, g, x, w, rstd); }),
            4 * ks::rmsnorm_backward_partial_floats(N, C));
}

// fp32 weights and bias under bf16 activations: the weight's bf16 copy and the results in fp32
// chunks of at most 32 MiB (with the GELU's input beside them).
TEST_F(CudaKernelScratch, AProductWithAnFp32BiasOnBf16ResultsHoldsItsChunks) {
  const std::int64_t rows = 3000, in = 64, out = 4096;
  const TensorView x = zeros(DType::kBF16, {rows, in}), y = zeros(DType::kBF16, {rows, out}),
                   pre = zeros(DType::kBF16, {rows, out});
  const TensorView w = zeros(DType::kF32, {in, out}), b = zeros(DType::kF32, {out});
  for (bool gelu : {false, true}) {
    SCOPED_TRACE(gelu ? "with the GELU" : "plain");
    const ks::Product p{.rows = rows,
                        .in = in,
                        .out = out,
                        .activations = DType::kBF16,
                        .weight = DType::kF32,
                        .bias = true,
                        .gelu = gelu};
    EXPECT_EQ(
        scratch_of([&] { cuda::matmul_forward(gpu(), y, x, w, WeightLayout::kInOut, b, gelu ? pre : TensorView{}); }),
        ks::product_forward_bytes(p));
  }
}

// fp32 activations with products in bf16: the input's, the weight's and dout's copies; and bf16
// throughout, the bias gradient's partials alone.
TEST_F(CudaKernelScratch, ProductsHoldTheirBf16CopiesAndBiasPartials) {
  const std::int64_t rows = 300, in = 64, out = 96;
  resources_->fp32_matmuls = MatmulPrecision::kBf16;
  const TensorView x = zeros(DType::kF32, {rows, in}), y = zeros(DType::kF32, {rows, out}),
                   dx = zeros(DType::kF32, {rows, in}), w = zeros(DType::kF32, {in, out}),
                   dw = zeros(DType::kF32, {in, out}), b = zeros(DType::kF32, {out}), db = zeros(DType::kF32, {out});
  const ks::Product p{.rows = rows, .in = in, .out = out, .bias = true, .bf16_products = true};
  EXPECT_EQ(scratch_of([&] { cuda::matmul_forward(gpu(), y, x, w, WeightLayout::kInOut, b); }),
            ks::product_forward_bytes(p));
  EXPECT_EQ(scratch_of([&] { cuda::matmul_backward(gpu(), dx, dw, db, y, x, w, WeightLayout::kInOut); }),
            ks::product_backward_bytes(p));
  resources_->fp32_matmuls = MatmulPrecision::kFp32;
  const std::int64_t wide = 256;
  const TensorView xb = zeros(DType::kBF16, {1000, in}), yb = zeros(DType::kBF16, {1000, wide}),
                   dxb = zeros(DType::kBF16, {1000, in}), wb = zeros(DType::kBF16, {wide, in}),
                   dwb = zeros(DType::kBF16, {wide, in}), dbb = zeros(DType::kBF16, {wide});
  const ks::Product q{
      .rows = 1000, .in = in, .out = wide, .activations = DType::kBF16, .weight = DType::kBF16, .bias = true};
  EXPECT_EQ(scratch_of([&] { cuda::matmul_backward(gpu(), dxb, dwb, dbb, yb, xb, wb, WeightLayout::kOutIn); }),
            ks::product_backward_bytes(q));
  EXPECT_EQ(ks::product_backward_bytes(q), 4 * 8 * wide);
}

TEST_F(CudaKernelScratch, AttentionHoldsTheFlashDeltaOrASamplesScores) {
  const std::int64_t B = 2, T = 64, NH = 2, C = 128;
  for (DType act : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(act));
    const TensorView qkv = zeros(act, {B, T, 3 * C}), dqkv = zeros(act, {B, T, 3 * C}), y = zeros(act, {B, T, C}),
                     dy = zeros(act, {B, T, C}), lse = zeros(DType::kF32, {B, NH, T}), att = zeros(act, {B, NH, T, T});
    if (cuda::flash_attention_supports(B, NH, C / NH)) {
      EXPECT_EQ(scratch_of([&] { cuda::flash_attention_backward(gpu(), dqkv, dy, y, qkv, lse, NH); }),
                ks::flash_attention_backward_bytes(B, NH, T));
    }
    EXPECT_EQ(scratch_of([&] { cuda::attention_forward(gpu(), y, att, qkv, NH); }),
              ks::attention_forward_bytes(NH, T, act, false));
    EXPECT_EQ(scratch_of([&] { cuda::attention_backward(gpu(), dqkv, dy, qkv, att, NH); }),
              ks::attention_backward_bytes(NH, T, act, false));
  }
}

// A drawn token (one new position) over a 1024-position cache: 12 heads split 16 ways, each split's
// partial result held; a prompt's 64 new positions split nothing.
TEST_F(CudaKernelScratch, CachedAttentionHoldsItsSplitsPartials) {
  const std::int64_t P = 1024, NH = 12, C = 768;
  const TensorView cache = zeros(DType::kBF16, {1, P, 3 * C});
  for (std::int64_t Tq : {std::int64_t{1}, std::int64_t{64}}) {
    SCOPED_TRACE(Tq);
    const TensorView y = zeros(DType::kBF16, {1, Tq, C});
    EXPECT_EQ(scratch_of([&] { cuda::cached_attention_forward(gpu(), y, cache, NH); }),
              ks::cached_attention_bytes(1, Tq, NH, P));
  }
  EXPECT_GT(ks::cached_attention_bytes(1, 1, NH, P), 0);
}

TEST_F(CudaKernelScratch, TheGradientNormsHoldTheirPartials) {
  const std::vector<TensorView> views = {zeros(DType::kF32, {1000}), zeros(DType::kBF16, {77}),
                                         zeros(DType::kF32, {5})};
  EXPECT_EQ(scratch_of([&] { cuda::sum_of_squares_each(gpu(), views); }), 4 * ks::sum_of_squares_floats(3));
  EXPECT_EQ(scratch_of([&] { cuda::exact_sum_of_squares(gpu(), views); }), 4 * ks::exact_sum_of_squares_floats(3));
}

// The predicted part (positions, sorted pairs, run ends) and CUB's temporaries, printed.
TEST_F(CudaKernelScratch, TheEmbeddingBackwardHoldsItsSortAndCubsTemporaries) {
  const std::int64_t B = 2, T = 64, C = 32, V = 1000;
  const TensorView tokens = zeros(DType::kI32, {B, T}), dwte = zeros(DType::kF32, {V, C}),
                   dwpe = zeros(DType::kF32, {T, C}), dy = zeros(DType::kF32, {B, T, C});
  const std::int64_t held = scratch_of([&] { cuda::embedding_backward(gpu(), dwte, dwpe, dy, tokens); });
  const std::int64_t predicted = ks::embedding_backward_bytes(B * T, V);
  EXPECT_GE(held, predicted);
  std::printf("embedding backward of %lld tokens: %lld bytes of scratch, %lld predicted, CUB's temporaries %lld\n",
              static_cast<long long>(B * T), static_cast<long long>(held), static_cast<long long>(predicted),
              static_cast<long long>(held - predicted));
}

}  // namespace
}  // namespace zt::test
