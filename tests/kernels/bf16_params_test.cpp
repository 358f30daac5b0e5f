// CPU kernels reading BF16 working parameters (docs/precision.md: with BF16 activations, matmul
// weights and biases, LayerNorm weights and biases and the embedding tables may be BF16, read as
// they are stored). Widening a bf16 value is exact, so every result must equal, bit for bit, the
// same kernel given F32 parameters that hold the same (bf16-representable) values; fresh random
// shapes' worth of values each run. F32 activations with BF16 parameters are rejected naming the op.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "engine/base/core/bf16.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "tests/kernels/kernel_test_util.h"

namespace zt::test {
namespace {

using zt::WeightLayout;

// A parameter as BF16 bits and as F32 holding the same values.
struct TwinParam {
  std::vector<bf16> bits;
  std::vector<float> values;
  explicit TwinParam(const std::vector<float>& v) : bits(v.size()), values(v.size()) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      bits[i] = float_to_bf16(v[i]);
      values[i] = bf16_to_float(bits[i]);
    }
  }
  TensorView bf16_view(Shape s) { return view_of(bits, s); }
  TensorView f32_view(Shape s) { return view_of(values, s); }
};

std::vector<bf16> bf16_values(const std::vector<float>& v) {
  std::vector<bf16> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = float_to_bf16(v[i]);
  return out;
}

TEST(Bf16Params, MatmulWithBf16WeightAndBiasEqualsF32OfTheSameValues) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t N = 37, C = 24, OC = 40;
  for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
    SCOPED_TRACE(layout == WeightLayout::kInOut ? "in_out" : "out_in");
    const Shape sx{N, C}, so{N, OC}, sw = layout == WeightLayout::kInOut ? Shape{C, OC} : Shape{OC, C};
    TwinParam w(rng.normal(C * OC, 0.0f, 0.2f)), b(rng.normal(OC));
    std::vector<bf16> x = bf16_values(rng.normal(N * C)), g = bf16_values(rng.normal(N * OC));
    std::vector<bf16> out16(N * OC), out32(N * OC), dx16(N * C), dx32(N * C);
    std::vector<float> dw16 = rng.normal(C * OC), db16 = rng.normal(OC);  // gradients accumulate: F32 either way
    std::vector<float> dw32 = dw16, db32 = db16;
    cpu::matmul_forward(cpu_ctx(), view_of(out16, so), view_of(x, sx), w.bf16_view(sw), layout, b.bf16_view({OC}));
    cpu::matmul_forward(cpu_ctx(), view_of(out32, so), view_of(x, sx), w.f32_view(sw), layout, b.f32_view({OC}));
    EXPECT_TRUE(bitwise_equal(out16, out32)) << "out";
    cpu::matmul_backward(cpu_ctx(), view_of(dx16, sx), view_of(dw16, sw), view_of(db16), view_of(g, so), view_of(x, sx),
                         w.bf16_view(sw), layout);
    cpu::matmul_backward(cpu_ctx(), view_of(dx32, sx), view_of(dw32, sw), view_of(db32), view_of(g, so), view_of(x, sx),
                         w.f32_view(sw), layout);
    EXPECT_TRUE(bitwise_equal(dx16, dx32)) << "dinp";
    EXPECT_TRUE(bitwise_equal(dw16, dw32)) << "dweight";
    EXPECT_TRUE(bitwise_equal(db16, db32)) << "dbias";
    // Only the weight gradient (no dinp): the BF16 weight is then only a shape.
    cpu::matmul_backward(cpu_ctx(), TensorView{}, view_of(dw16, sw), TensorView{}, view_of(g, so), view_of(x, sx),
                         w.bf16_view(sw), layout);
    cpu::matmul_backward(cpu_ctx(), TensorView{}, view_of(dw32, sw), TensorView{}, view_of(g, so), view_of(x, sx),
                         w.f32_view(sw), layout);
    EXPECT_TRUE(bitwise_equal(dw16, dw32)) << "dweight without dinp";
  }
}

TEST(Bf16Params, LayerNormWithBf16WeightAndBiasEqualsF32OfTheSameValues) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t N = 45, C = 52;
  const Shape nc{N, C}, c{C};
  TwinParam w(rng.normal(C, 1.0f, 0.3f)), b(rng.normal(C, 0.0f, 0.3f));
  std::vector<bf16> x = bf16_values(rng.normal(N * C, 0.5f, 2.0f)), g = bf16_values(rng.normal(N * C));
  std::vector<bf16> out16(N * C), out32(N * C);
  std::vector<float> mean16(N), rstd16(N), mean32(N), rstd32(N);
  cpu::layernorm_forward(cpu_ctx(), view_of(out16, nc), view_of(mean16), view_of(rstd16), view_of(x, nc),
                         w.bf16_view(c), b.bf16_view(c));
  cpu::layernorm_forward(cpu_ctx(), view_of(out32, nc), view_of(mean32), view_of(rstd32), view_of(x, nc), w.f32_view(c),
                         b.f32_view(c));
  EXPECT_TRUE(bitwise_equal(out16, out32)) << "out";
  EXPECT_TRUE(bitwise_equal(mean16, mean32) && bitwise_equal(rstd16, rstd32)) << "statistics";
  std::vector<bf16> dx16 = bf16_values(rng.normal(N * C)), dx32 = dx16;
  std::vector<float> dw16 = rng.normal(C), db16 = rng.normal(C), dw32 = dw16, db32 = db16;
  cpu::layernorm_backward(cpu_ctx(), view_of(dx16, nc), view_of(dw16), view_of(db16), view_of(g, nc), view_of(x, nc),
                          w.bf16_view(c), view_of(mean16), view_of(rstd16));
  cpu::layernorm_backward(cpu_ctx(), view_of(dx32, nc), view_of(dw32), view_of(db32), view_of(g, nc), view_of(x, nc),
                          w.f32_view(c), view_of(mean32), view_of(rstd32));
  EXPECT_TRUE(bitwise_equal(dx16, dx32)) << "dinp";
  EXPECT_TRUE(bitwise_equal(dw16, dw32)) << "dweight";
  EXPECT_TRUE(bitwise_equal(db16, db32)) << "dbias";
}

TEST(Bf16Params, EmbeddingWithBf16TablesEqualsF32OfTheSameValues) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t B = 3, T = 11, C = 20, V = 9, max_T = 16;
  TwinParam wte(rng.normal(V * C)), wpe(rng.normal(max_T * C));
  std::vector<std::int32_t> tokens = rng.ints(B * T, 0, static_cast<std::int32_t>(V));
  std::vector<bf16> out16(B * T * C), out32(B * T * C);
  const Shape btc{B, T, C}, bt{B, T}, vc{V, C}, pc{max_T, C};
  cpu::embedding_forward(cpu_ctx(), view_of(out16, btc), view_of(tokens, bt), wte.bf16_view(vc), wpe.bf16_view(pc));
  cpu::embedding_forward(cpu_ctx(), view_of(out32, btc), view_of(tokens, bt), wte.f32_view(vc), wpe.f32_view(pc));
  EXPECT_TRUE(bitwise_equal(out16, out32));
}

// The rule is check_param_dtype's: BF16 parameters need BF16 activations (an fp32 kernel would
// otherwise read bf16 bits as floats); LayerNorm's weight and bias, and the two embedding tables,
// share a dtype.
TEST(Bf16Params, Bf16ParametersWithF32ActivationsAreRejectedNamingTheOp) {
  std::vector<float> x(8, 1.0f), out(8), mean(2), rstd(2);
  std::vector<bf16> w(4, float_to_bf16(1.0f)), b(4, float_to_bf16(0.0f)), wq(16, float_to_bf16(0.5f));
  auto expect_rejected = [](const char* op, const std::function<void()>& call) {
    try {
      call();
      ADD_FAILURE() << op << " accepted BF16 parameters with F32 activations";
    } catch (const InternalError& e) {
      EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
    }
  };
  expect_rejected("layernorm_forward", [&] {
    cpu::layernorm_forward(cpu_ctx(), view_of(out, Shape{2, 4}), view_of(mean), view_of(rstd), view_of(x, Shape{2, 4}),
                           view_of(w), view_of(b));
  });
  expect_rejected("matmul_forward", [&] {
    cpu::matmul_forward(cpu_ctx(), view_of(out, Shape{2, 4}), view_of(x, Shape{2, 4}), view_of(wq, Shape{4, 4}),
                        WeightLayout::kInOut, TensorView{});
  });
  std::vector<bf16> x16(8, float_to_bf16(1.0f)), out_ln16(8);
  std::vector<float> b_f32(4, 0.0f);
  expect_rejected("bias must be BF16", [&] {  // BF16 weight, F32 bias: one dtype, as on CUDA
    cpu::layernorm_forward(cpu_ctx(), view_of(out_ln16, Shape{2, 4}), view_of(mean), view_of(rstd),
                           view_of(x16, Shape{2, 4}), view_of(w), view_of(b_f32));
  });
  std::vector<std::int32_t> tokens{0, 1};
  std::vector<float> wpe_f32(8, 0.0f);
  std::vector<bf16> wpe16(8, float_to_bf16(0.0f)), out16(8);
  expect_rejected("embedding_forward", [&] {
    cpu::embedding_forward(cpu_ctx(), view_of(out, Shape{1, 2, 4}), view_of(tokens, Shape{1, 2}),
                           view_of(wq, Shape{4, 4}), view_of(wpe16, Shape{2, 4}));
  });
  expect_rejected("embedding_forward", [&] {  // mixed table dtypes
    cpu::embedding_forward(cpu_ctx(), view_of(out16, Shape{1, 2, 4}), view_of(tokens, Shape{1, 2}),
                           view_of(wq, Shape{4, 4}), view_of(wpe_f32, Shape{2, 4}));
  });
}

}  // namespace
}  // namespace zt::test
