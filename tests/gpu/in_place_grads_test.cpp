// Parameter gradients added in place into bf16 storage (ParamStore::in_place_grads, label gpu):
// with bf16 activations, matmul_backward and layernorm_backward take BF16 dweight/dbias and add
// round(widen(old) + contribution), the contribution being what the same call adds into F32
// gradients from zero. The bias and LayerNorm parameter gradients come from the same partial sums
// either way: bitwise. dweight is cuBLASLt's product with bf16 C/D (beta 1), whose algorithm may
// differ from the fp32-output one in summation order by a few fp32 ulps: each element within one
// bf16 step of the rounded reference, taken relative to the larger of the sum and its addends
// (where old and the contribution nearly cancel, a few ulps of the contribution exceed a step of
// the small result).
#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "kernels/cpu/layernorm.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/matmul.h"
#include "tests/gpu/gpu_test_util.h"

namespace zt::test {
namespace {

using CudaInPlaceGrads = GpuKernelTest;
using zt::WeightLayout;

// round(widen(old) + sum) element by element.
std::vector<float> rounded_sum(const std::vector<float>& old, const std::vector<float>& sum) {
  std::vector<float> out(old.size());
  for (std::size_t i = 0; i < old.size(); ++i) out[i] = round_to_bf16(old[i] + sum[i]);
  return out;
}

::testing::AssertionResult within_one_bf16_step(const std::vector<float>& got, const std::vector<float>& want,
                                                const std::vector<float>& old, const std::vector<float>& sum) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double scale = std::max({std::abs(double{want[i]}), std::abs(double{old[i]}), std::abs(double{sum[i]})});
    const double bound = std::ldexp(scale, -7) + 1e-30;
    if (!(std::abs(double{got[i]} - want[i]) <= bound)) {
      return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << " vs " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<float> rounded_normal(Rng& rng, std::int64_t n, float mean = 0.0f, float sd = 1.0f) {
  std::vector<float> v = rng.normal(n, mean, sd);
  for (float& x : v) x = round_to_bf16(x);
  return v;
}

TEST_F(CudaInPlaceGrads, MatmulBackwardAddsIntoBf16Gradients) {
  ZT_SEEDED_RNG(rng);
  for (auto [N, C, OC] : {std::array<std::int64_t, 3>{7, 24, 40}, {300, 768, 72}, {1024, 64, 256}}) {
    for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
      SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C << " OC=" << OC << " layout "
                                        << (layout == WeightLayout::kInOut ? "in_out" : "out_in"));
      const Shape wshape = layout == WeightLayout::kInOut ? Shape{C, OC} : Shape{OC, C};
      Buffer gx = upload_bf16(rounded_normal(rng, N * C)), gw = upload_bf16(rounded_normal(rng, C * OC, 0.0f, 0.05f)),
             gg = upload_bf16(rounded_normal(rng, N * OC));
      const std::vector<float> old_w = rounded_normal(rng, C * OC, 0.0f, 0.5f), old_b = rounded_normal(rng, OC);
      Buffer f32_w = upload(std::vector<float>(C * OC, 0.0f)), f32_b = upload(std::vector<float>(OC, 0.0f));
      Buffer bf_w = upload_bf16(old_w), bf_b = upload_bf16(old_b);
      for (auto [w, b] : {std::pair<Buffer*, Buffer*>{&f32_w, &f32_b}, {&bf_w, &bf_b}}) {
        cuda::matmul_backward(gpu(), {}, w->view(wshape), b->view(), gg.view(Shape{N, OC}), gx.view(Shape{N, C}),
                              gw.view(wshape), layout);
      }
      const std::vector<float> sum_w = download<float>(f32_w);
      EXPECT_TRUE(within_one_bf16_step(download_f32(bf_w), rounded_sum(old_w, sum_w), old_w, sum_w)) << "dweight";
      EXPECT_TRUE(bitwise_equal(download_f32(bf_b), rounded_sum(old_b, download<float>(f32_b)))) << "dbias";
    }
  }
}

TEST_F(CudaInPlaceGrads, LayerNormBackwardAddsIntoBf16Gradients) {
  ZT_SEEDED_RNG(rng);
  for (auto [N, C] : {std::pair<std::int64_t, std::int64_t>{5, 37}, {70, 768}}) {
    SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C);
    const Shape nc{N, C};
    Buffer gx = upload_bf16(rounded_normal(rng, N * C, 1.0f, 2.0f)), gg = upload_bf16(rounded_normal(rng, N * C));
    Buffer gw = upload_bf16(rounded_normal(rng, C)), gb = upload_bf16(rounded_normal(rng, C));
    Buffer out = poisoned(DType::kBF16, N * C), mean = poisoned(DType::kF32, N), rstd = poisoned(DType::kF32, N);
    cuda::layernorm_forward(gpu(), out.view(nc), mean.view(), rstd.view(), gx.view(nc), gw.view(), gb.view());
    const std::vector<float> old_w = rounded_normal(rng, C), old_b = rounded_normal(rng, C);
    Buffer f32_w = upload(std::vector<float>(C, 0.0f)), f32_b = upload(std::vector<float>(C, 0.0f));
    Buffer bf_w = upload_bf16(old_w), bf_b = upload_bf16(old_b);
    for (auto [w, b] : {std::pair<Buffer*, Buffer*>{&f32_w, &f32_b}, {&bf_w, &bf_b}}) {
      Buffer dinp = upload_bf16(std::vector<float>(N * C, 0.0f));
      cuda::layernorm_backward(gpu(), dinp.view(nc), w->view(), b->view(), gg.view(nc), gx.view(nc), gw.view(),
                               mean.view(), rstd.view());
    }
    EXPECT_TRUE(bitwise_equal(download_f32(bf_w), rounded_sum(old_w, download<float>(f32_w)))) << "dweight";
    EXPECT_TRUE(bitwise_equal(download_f32(bf_b), rounded_sum(old_b, download<float>(f32_b)))) << "dbias";
  }
}

}  // namespace
}  // namespace zt::test
