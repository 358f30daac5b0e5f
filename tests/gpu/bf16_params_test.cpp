// CUDA kernels reading BF16 working parameters (docs/precision.md; label gpu): LayerNorm weight and
// bias, the embedding tables, and the matmul weight and bias, with BF16 activations. Widening bf16
// is exact, so LayerNorm and the embedding must give bit for bit what the same kernels give with
// F32 parameters holding the same values (at offset 0 both take their 4-wide paths, at offset 1
// both the scalar ones, so the reduction orders match). The matmul with a BF16 bias takes cuBLASLt's
// bf16 bias epilogue instead of the fp32-scratch pass an F32 bias needs ([Note: fp32 bias with bf16
// results] in matmul.cu), possibly with another algorithm: its results are held to the CPU kernel
// given the same BF16 operands, within 2^-7 |cpu| + 1e-5 max|cpu| per element (one rounding of a
// sum whose order differs), the bound of bf16_matmul_attention_test.cpp; its bias is deliberately
// not 16-byte aligned.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/matmul.h"
#include "tests/gpu/gpu_test_util.h"

namespace zt::test {
namespace {

using zt::WeightLayout;

constexpr std::int64_t kSameStrideOffsets[] = {0, 1};

::testing::AssertionResult within_bf16_bound(const std::vector<float>& got, const std::vector<float>& ref) {
  if (got.size() != ref.size()) return ::testing::AssertionFailure() << "size " << got.size() << " vs " << ref.size();
  double max_ref = 0.0;
  for (float x : ref) max_ref = std::max(max_ref, std::abs(static_cast<double>(x)));
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double allowed = std::abs(static_cast<double>(ref[i])) / 128.0 + 1e-5 * max_ref;
    if (!(std::abs(static_cast<double>(got[i]) - ref[i]) <= allowed)) {
      return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", reference " << ref[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// `values` rounded to bf16 from element `offset` of a fresh BF16 buffer, and the same values as F32.
struct TwinUpload {
  Buffer bf16_buffer, f32_buffer;
};

class CudaBf16ParamsTest : public GpuKernelTest {
 protected:
  TwinUpload twin_at(std::int64_t offset, const std::vector<float>& values) {
    std::vector<float> padded(static_cast<std::size_t>(offset), 0.0f);
    for (float v : values) padded.push_back(round_to_bf16(v));
    return {upload_bf16(padded), upload(padded)};
  }
  std::vector<std::uint16_t> bits_from(const Buffer& b, std::int64_t offset) {
    const std::vector<std::uint16_t> all = download<std::uint16_t>(b);
    return std::vector<std::uint16_t>(all.begin() + offset, all.end());
  }
};

TEST_F(CudaBf16ParamsTest, LayerNormReadsBf16ParametersAsTheirFp32Values) {
  ZT_SEEDED_RNG(rng);
  for (auto [N, C] : {std::pair<std::int64_t, std::int64_t>{5, 37}, {65, 12}, {33, 768}}) {
    for (std::int64_t off : kSameStrideOffsets) {
      SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C << " offset=" << off);
      const Shape nc{N, C}, n{N}, c{C};
      std::vector<float> x = rng.normal(N * C, 0.5f, 2.0f), g = rng.normal(N * C), dx0 = rng.normal(N * C);
      const TwinUpload w = twin_at(off, rng.normal(C, 1.0f, 0.3f)), b = twin_at(off, rng.normal(C, 0.0f, 0.3f));
      Buffer gx = upload_bf16(x), gg = upload_bf16(g);
      const std::vector<float> dw0 = rng.normal(C), db0 = rng.normal(C);
      std::vector<std::uint16_t> out[2], dinp[2];
      std::vector<float> dweight[2], dbias[2];
      for (int k = 0; k < 2; ++k) {  // 0: BF16 parameters, 1: F32
        const Buffer& wb = k == 0 ? w.bf16_buffer : w.f32_buffer;
        const Buffer& bb = k == 0 ? b.bf16_buffer : b.f32_buffer;
        Buffer o = poisoned(DType::kBF16, N * C), m = poisoned(DType::kF32, N), r = poisoned(DType::kF32, N);
        cuda::layernorm_forward(gpu(), o.view(nc), m.view(n), r.view(n), gx.view(nc), view_at(wb, off, c),
                                view_at(bb, off, c));
        Buffer gdx = upload_bf16(dx0), gdw = upload(dw0), gdb = upload(db0);
        cuda::layernorm_backward(gpu(), gdx.view(nc), gdw.view(c), gdb.view(c), gg.view(nc), gx.view(nc),
                                 view_at(wb, off, c), m.view(n), r.view(n));
        out[k] = download<std::uint16_t>(o);
        dinp[k] = download<std::uint16_t>(gdx);
        dweight[k] = download<float>(gdw);
        dbias[k] = download<float>(gdb);
      }
      EXPECT_EQ(out[0], out[1]) << "out";
      EXPECT_EQ(dinp[0], dinp[1]) << "dinp";
      EXPECT_TRUE(bitwise_equal(dweight[0], dweight[1])) << "dweight";
      EXPECT_TRUE(bitwise_equal(dbias[0], dbias[1])) << "dbias";
    }
  }
}

TEST_F(CudaBf16ParamsTest, EmbeddingReadsBf16TablesAsTheirFp32Values) {
  ZT_SEEDED_RNG(rng);
  struct S {
    std::int64_t B, T, C, V;
  };
  for (auto [B, T, C, V] : {S{2, 7, 37, 5}, S{4, 64, 768, 50}}) {
    for (std::int64_t off : kSameStrideOffsets) {
      SCOPED_TRACE(::testing::Message() << "B=" << B << " T=" << T << " C=" << C << " offset=" << off);
      const Shape btc{B, T, C}, bt{B, T}, vc{V, C}, pc{T, C};
      Buffer tok = upload(rng.ints(B * T, 0, static_cast<std::int32_t>(V)));
      const TwinUpload wte = twin_at(off, rng.normal(V * C)), wpe = twin_at(off, rng.normal(T * C));
      Buffer o16 = poisoned(DType::kBF16, B * T * C), o32 = poisoned(DType::kBF16, B * T * C);
      cuda::embedding_forward(gpu(), o16.view(btc), tok.view(bt), view_at(wte.bf16_buffer, off, vc),
                              view_at(wpe.bf16_buffer, off, pc));
      cuda::embedding_forward(gpu(), o32.view(btc), tok.view(bt), view_at(wte.f32_buffer, off, vc),
                              view_at(wpe.f32_buffer, off, pc));
      EXPECT_EQ(download<std::uint16_t>(o16), download<std::uint16_t>(o32));
    }
  }
}

TEST_F(CudaBf16ParamsTest, MatmulWithBf16WeightAndBiasMatchesCpu) {
  ZT_SEEDED_RNG(rng);
  struct S {
    std::int64_t N, C, OC;
  };
  for (auto [N, C, OC] : {S{7, 24, 40}, S{300, 768, 72}, S{4100, 256, 2048}}) {
    for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
      SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C << " OC=" << OC);
      const Shape sx{N, C}, so{N, OC}, sw = layout == WeightLayout::kInOut ? Shape{C, OC} : Shape{OC, C};
      std::vector<bf16> w = rounded(rng.normal(C * OC, 0.0f, 0.05f)), b = rounded(rng.normal(OC));
      std::vector<bf16> x = rounded(rng.normal(N * C)), g = rounded(rng.normal(N * OC));
      std::vector<bf16> out(N * OC), dx(N * C);
      std::vector<float> dw = rng.normal(C * OC, 0.0f, 0.1f), db = rng.normal(OC, 0.0f, 0.1f);
      Buffer gdw = upload(dw), gdb = upload(db);
      cpu::matmul_forward(cpu_ctx(), view_of(out, so), view_of(x, sx), view_of(w, sw), layout, view_of(b));
      cpu::matmul_backward(cpu_ctx(), view_of(dx, sx), view_of(dw, sw), view_of(db), view_of(g, so), view_of(x, sx),
                           view_of(w, sw), layout);
      // The bias one element into its buffer: 2-byte aligned, as a bf16 bias inside a unit is where
      // C % 8 != 0, so the launcher must copy it for cuBLASLt's epilogue.
      std::vector<bf16> b_shifted{bf16{0}};
      b_shifted.insert(b_shifted.end(), b.begin(), b.end());
      Buffer gx = upload_as(DType::kBF16, x), gg = upload_as(DType::kBF16, g), gw = upload_as(DType::kBF16, w),
             gb = upload_as(DType::kBF16, b_shifted);
      Buffer o = poisoned(DType::kBF16, N * OC), gdx = poisoned(DType::kBF16, N * C);
      cuda::matmul_forward(gpu(), o.view(so), gx.view(sx), gw.view(sw), layout, view_at(gb, 1, Shape{OC}));
      cuda::matmul_backward(gpu(), gdx.view(sx), gdw.view(sw), gdb.view(), gg.view(so), gx.view(sx), gw.view(sw),
                            layout);
      EXPECT_TRUE(within_bf16_bound(download_f32(o), widened(out))) << "out";
      EXPECT_TRUE(within_bf16_bound(download_f32(gdx), widened(dx))) << "dinp";
      EXPECT_TRUE(close_normwise(download<float>(gdw), to_double(dw), 1e-5)) << "dweight";
      EXPECT_TRUE(close_normwise(download<float>(gdb), to_double(db), 1e-5)) << "dbias";
    }
  }
}

}  // namespace
}  // namespace zt::test
