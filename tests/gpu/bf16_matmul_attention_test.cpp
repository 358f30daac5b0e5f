// CUDA matmul, materialised attention and flash attention with BF16 activation operands
// (docs/precision.md) against the CPU kernels called with the same BF16 operands on the host (label
// gpu; flash attention's reference is the materialised CPU attention). Bound per element:
//   |gpu - cpu| <= 2^-7 |cpu| + fp32_tol * max|cpu| + slack,
// 2^-7 |cpu| for the two roundings (half a bf16 ulp each, an ulp being at most 2^-7 of the value),
// fp32_tol the F32 test's normwise tolerance of the op (summation order, expf), and slack the
// worst-case effect of the roundings one side makes and the other does not (zero for matmul: both
// sides round the weight and the result only). Attention's slack is computed per element from the
// reference's operands in fp64 (attention_slack below) rather than folded into a normwise bound: a
// normwise bound would have to allow for u * sum_j P_ij |v_j|, which exceeds max|out| several
// times over where the averaging in P @ V cancels, and would then pass most bugs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cudnn_attention.h"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/matmul.h"
#include "tests/gpu/bf16_bound.h"
#include "tests/gpu/gpu_test_util.h"

namespace zt::test {
namespace {

using CudaBf16MatmulAttention = GpuKernelTest;
using zt::WeightLayout;

// ---- attention ----

struct AttnShape {
  std::int64_t B, T, NH, hs;
  std::int64_t NKV = 0;  // key/value heads (grouped-query attention); 0: NH
  std::int64_t kv() const { return NKV > 0 ? NKV : NH; }
  std::int64_t width() const { return (NH + 2 * kv()) * hs; }  // a qkv row: q | k | v
};

// One attention problem's host operands (bf16) and the CPU reference's results.
struct AttnCase {
  AttnShape s;
  std::vector<bf16> qkv, dout, out, att, dqkv;
};

AttnCase cpu_attention(Rng& rng, AttnShape s, const DropoutSpec& drop) {
  const std::int64_t C = s.NH * s.hs;
  AttnCase c{s, rounded(rng.normal(s.B * s.T * s.width())), rounded(rng.normal(s.B * s.T * C)), {}, {}, {}};
  c.out.resize(static_cast<std::size_t>(s.B * s.T * C));
  c.att.resize(static_cast<std::size_t>(s.B * s.NH * s.T * s.T));
  c.dqkv.resize(c.qkv.size());
  const Shape sq{s.B, s.T, s.width()}, so{s.B, s.T, C}, sa{s.B, s.NH, s.T, s.T};
  const int nh = static_cast<int>(s.NH), nkv = static_cast<int>(s.kv());
  cpu::attention_forward(cpu_ctx(), view_of(c.out, so), view_of(c.att, sa), view_of(c.qkv, sq), nh, drop, nkv);
  cpu::attention_backward(cpu_ctx(), view_of(c.dqkv, sq), view_of(c.dout, so), view_of(c.qkv, sq), view_of(c.att, sa),
                          nh, drop, nkv);
  return c;
}

enum class AttnKind { kMaterialised, kFlash, kFlashTensorCores };

struct Slack {
  std::vector<double> out, dqkv;
};

// [Note: attention slack] What the GPU rounds that the CPU reference (fp32 staging: fp32 P @ V, the
// rounded att read back in the backward, fp32 dpre) does not, propagated to each result element in
// fp64 from the reference's operands (P = its att, widened), with u = 2^-8:
//   materialised: P @ V multiplies the bf16 att (u P; with dropout round(att * mask scale) once more:
//     2u), its own att may sit an ulp (2u) from the CPU's where a rounding flipped (dV, and dpre
//     through P and the row term), dpre is rounded to bf16 before dQ and dK (u |dpre|);
//   flash: the forward is the CPU's arithmetic (no slack); the backward recomputes an unrounded P
//     where the CPU reads the rounded att (u P in dV and dpre), and its row term delta = dO . out
//     reads the rounded out (u |dO| . |out|);
//   flash on tensor cores: as flash, and it rounds the (dropped) probabilities before P V and
//     P^T dO (u P' in out, one more u in dV) and dpre before dQ and dK (u |dpre|).
// Slack terms: out u_o sum_k P'|v|; dV u_v sum_q P'|dO|; dQ sum_k e |K|; dK sum_q e |Q|, with
// e_qk = scale (u_p P |dP' - dot| + P e_dot_q) + u_r |dpre_qk|, e_dot_q = u_p sum_k P |dP'| + u_o'
// sum_e |dO||out|, P' the dropped probabilities, dP' = mask scale * dO . v. Second-order terms
// are covered by a 10% margin. With grouped-query heads a key/value head's dK and dV sum its query
// heads' terms, and so do their slacks.
Slack attention_slack(const AttnCase& c, AttnKind kind, const DropoutSpec& drop) {
  const std::int64_t B = c.s.B, T = c.s.T, NH = c.s.NH, hs = c.s.hs, C = NH * hs, W = c.s.width();
  const std::int64_t NKV = c.s.kv(), group = NH / NKV;
  const double u = kUnitRoundoff, scale = 1.0 / std::sqrt(static_cast<double>(hs));
  const bool flash = kind != AttnKind::kMaterialised, tensor_cores = kind == AttnKind::kFlashTensorCores;
  const double u_out = tensor_cores ? u : flash ? 0.0 : (drop.active() ? 2 * u : u);
  const double u_dv = tensor_cores ? 2 * u : flash ? u : (drop.active() ? 3 * u : 2 * u);
  const double u_p = flash ? u : 2 * u, u_r = flash && !tensor_cores ? 0.0 : u, u_delta = flash ? u : 0.0;
  const std::vector<float> qkv = widened(c.qkv), dout = widened(c.dout), out = widened(c.out), att = widened(c.att);
  Slack sl{std::vector<double>(out.size(), 0.0), std::vector<double>(qkv.size(), 0.0)};
  std::vector<double> pd(static_cast<std::size_t>(T * T)), dp(pd.size()), e(pd.size());
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < NH; ++h) {
      // Query head h reads key/value head h / group: the columns of its q, k and v in a qkv row.
      const std::int64_t q_col = h * hs, k_col = C + (h / group) * hs, v_col = C + (NKV + h / group) * hs;
      // Element d of row t of x (rows `width` wide) at column `col` of sample b.
      auto at = [&](const std::vector<float>& x, std::int64_t width, std::int64_t col, std::int64_t t, std::int64_t d) {
        return static_cast<double>(x[static_cast<std::size_t>((b * T + t) * width + col + d)]);
      };
      auto q = [&](std::int64_t t, std::int64_t d) { return at(qkv, W, q_col, t, d); };
      auto k = [&](std::int64_t t, std::int64_t d) { return at(qkv, W, k_col, t, d); };
      auto v = [&](std::int64_t t, std::int64_t d) { return at(qkv, W, v_col, t, d); };
      auto dO = [&](std::int64_t t, std::int64_t d) { return at(dout, C, q_col, t, d); };
      auto o = [&](std::int64_t t, std::int64_t d) { return at(out, C, q_col, t, d); };
      const float* P = att.data() + (b * NH + h) * T * T;
      for (std::int64_t i = 0; i < T; ++i) {
        double dot = 0.0, dot_abs = 0.0, dO_out = 0.0;
        for (std::int64_t j = 0; j <= i; ++j) {
          const bool kept = !drop.active() || dropout_keep(drop, drop.first_sample + b, (h * T + i) * T + j);
          const double m = !kept ? 0.0 : drop.active() ? 1.0 / (1.0 - drop.p) : 1.0;
          double s = 0.0;
          for (std::int64_t d = 0; d < hs; ++d) s += dO(i, d) * v(j, d);
          pd[i * T + j] = P[i * T + j] * m;
          dp[i * T + j] = s * m;
          dot += P[i * T + j] * dp[i * T + j];
          dot_abs += P[i * T + j] * std::abs(dp[i * T + j]);
        }
        for (std::int64_t d = 0; d < hs; ++d) dO_out += std::abs(dO(i, d) * o(i, d));
        const double e_dot = u_p * dot_abs + u_delta * dO_out;
        for (std::int64_t j = 0; j <= i; ++j) {
          const double pij = P[i * T + j], dpre = scale * pij * (dp[i * T + j] - dot);
          e[i * T + j] = scale * (u_p * pij * std::abs(dp[i * T + j] - dot) + pij * e_dot) + u_r * std::abs(dpre);
        }
      }
      for (std::int64_t i = 0; i < T; ++i) {
        for (std::int64_t d = 0; d < hs; ++d) {
          double so = 0.0, sdq = 0.0, sdk = 0.0, sdv = 0.0;
          for (std::int64_t j = 0; j <= i; ++j) {  // row i as a query: out, dQ
            so += pd[i * T + j] * std::abs(v(j, d));
            sdq += e[i * T + j] * std::abs(k(j, d));
          }
          for (std::int64_t r = i; r < T; ++r) {  // row i as a key: dK, dV
            sdk += e[r * T + i] * std::abs(q(r, d));
            sdv += pd[r * T + i] * std::abs(dO(r, d));
          }
          sl.out[(b * T + i) * C + q_col + d] = 1.1 * u_out * so;
          double* row = sl.dqkv.data() + (b * T + i) * W + d;
          row[q_col] = 1.1 * sdq;
          row[k_col] += 1.1 * sdk;  // summed over the key/value head's query heads
          row[v_col] += 1.1 * u_dv * sdv;
        }
      }
    }
  }
  return sl;
}

// Materialised attention, with and without dropout on the probabilities (the CPU's masks, drawn on
// bf16 probabilities by cuda::dropout_forward). att is compared with the plain bound: both sides
// round the same fp32 softmax once. fp32 tolerances of tests/gpu/attention_ce_test.cpp.
TEST_F(CudaBf16MatmulAttention, AttentionMatchesCpuOnBf16Operands) {
  ZT_SEEDED_RNG(rng);
  const DropoutSpec no_drop{}, drop{0.2f, /*seed=*/99, /*site=*/4, /*first_sample=*/(std::int64_t{1} << 32) + 17};
  for (const DropoutSpec* spec : {&no_drop, &drop}) {
    for (AttnShape s :
         {AttnShape{1, 1, 1, 8}, AttnShape{2, 7, 3, 5}, AttnShape{2, 130, 4, 16}, AttnShape{1, 64, 12, 64}}) {
      SCOPED_TRACE(::testing::Message() << "B=" << s.B << " T=" << s.T << " NH=" << s.NH << " hs=" << s.hs
                                        << (spec->active() ? " dropout" : ""));
      const AttnCase c = cpu_attention(rng, s, *spec);
      const Slack slack = attention_slack(c, AttnKind::kMaterialised, *spec);
      const std::int64_t C = s.NH * s.hs;
      const Shape sq{s.B, s.T, s.width()}, so{s.B, s.T, C}, sa{s.B, s.NH, s.T, s.T};
      const int nh = static_cast<int>(s.NH);
      Buffer gqkv = upload_as(DType::kBF16, c.qkv), gdout = upload_as(DType::kBF16, c.dout);
      Buffer go = poisoned(DType::kBF16, so.numel()), gatt = poisoned(DType::kBF16, sa.numel()),
             gdq = poisoned(DType::kBF16, sq.numel());
      cuda::attention_forward(gpu(), go.view(so), gatt.view(sa), gqkv.view(sq), nh, *spec);
      cuda::attention_backward(gpu(), gdq.view(sq), gdout.view(so), gqkv.view(sq), gatt.view(sa), nh, *spec);
      const std::vector<float> a = download_f32(gatt);
      EXPECT_TRUE(within_bound(a, widened(c.att), 1e-5)) << "att";
      EXPECT_TRUE(within_bound(download_f32(go), widened(c.out), 1e-5, slack.out)) << "out";
      EXPECT_TRUE(within_bound(download_f32(gdq), widened(c.dqkv), 5e-5, slack.dqkv)) << "dqkv";
      for (std::int64_t r = 0; r < s.B * s.NH * s.T; ++r)
        for (std::int64_t k = r % s.T + 1; k < s.T; ++k) ASSERT_EQ(a[r * s.T + k], 0.0f) << "above the diagonal";
    }
  }
}

// Flash attention against the materialised CPU attention, with and without dropout; fp32
// tolerances of tests/gpu/flash_attention_test.cpp. Head size 8 takes the CUDA-core kernels, the
// others the tensor-core ones (flash_attention_tensor_cores says which, and so which slack). lse
// stays fp32 and is checked there (it reads the same widened values here), so only out and dqkv
// are compared.
TEST_F(CudaBf16MatmulAttention, FlashAttentionMatchesMaterialisedCpuOnBf16Operands) {
  ZT_SEEDED_RNG(rng);
  const DropoutSpec no_drop{}, drop{0.2f, /*seed=*/99, /*site=*/4, /*first_sample=*/(std::int64_t{1} << 32) + 17};
  for (const DropoutSpec* spec : {&no_drop, &drop}) {
    // Multi-head, then grouped-query heads (Llama's four query heads per key/value head at head
    // size 64, and one key/value head for all at 128) on the tensor-core kernels, and two per
    // key/value head on the CUDA-core ones (head size 8).
    for (AttnShape s : {AttnShape{1, 1, 1, 8}, AttnShape{2, 67, 3, 16}, AttnShape{2, 130, 4, 32},
                        AttnShape{1, 200, 2, 64}, AttnShape{1, 70, 2, 128}, AttnShape{2, 300, 3, 64},
                        AttnShape{2, 130, 8, 64, 2}, AttnShape{2, 70, 4, 128, 1}, AttnShape{2, 75, 4, 8, 2}}) {
      const bool tensor_cores = cuda::flash_attention_tensor_cores(DType::kBF16, s.hs);
      SCOPED_TRACE(::testing::Message() << "B=" << s.B << " T=" << s.T << " NH=" << s.NH << " NKV=" << s.kv()
                                        << " hs=" << s.hs << (spec->active() ? " dropout" : "")
                                        << (tensor_cores ? " tensor cores" : " CUDA cores"));
      ASSERT_TRUE(cuda::flash_attention_supports(s.B, s.NH, s.hs));
      const AttnCase c = cpu_attention(rng, s, *spec);
      const Slack slack = attention_slack(c, tensor_cores ? AttnKind::kFlashTensorCores : AttnKind::kFlash, *spec);
      const std::int64_t C = s.NH * s.hs;
      const Shape sq{s.B, s.T, s.width()}, so{s.B, s.T, C}, sl{s.B, s.NH, s.T};
      const int nh = static_cast<int>(s.NH), nkv = static_cast<int>(s.kv());
      Buffer gqkv = upload_as(DType::kBF16, c.qkv), gdout = upload_as(DType::kBF16, c.dout);
      Buffer go = poisoned(DType::kBF16, so.numel()), glse = poisoned(DType::kF32, sl.numel()),
             gdq = poisoned(DType::kBF16, sq.numel());
      cuda::flash_attention_forward(gpu(), go.view(so), glse.view(sl), gqkv.view(sq), nh, *spec, nkv);
      cuda::flash_attention_backward(gpu(), gdq.view(sq), gdout.view(so), go.view(so), gqkv.view(sq), glse.view(sl), nh,
                                     *spec, nkv);
      EXPECT_TRUE(within_bound(download_f32(go), widened(c.out), 1e-5, slack.out)) << "out";
      EXPECT_TRUE(within_bound(download_f32(gdq), widened(c.dqkv), 5e-5, slack.dqkv)) << "dqkv";
    }
  }
}

// cuDNN's fused attention against the materialised CPU attention at the tensor-core flash kernels'
// bound (it too rounds P and dS to bf16 before their products); its lse against the flash
// kernels' (the same statistic: the backward of either may follow the forward of the other, to
// fp32 rounding); its backward twice, bitwise (the deterministic algorithm), and once with cuDNN's
// default algorithm (train.deterministic off) within the same bound. Skips visibly where
// cuDNN cannot run, unless ZT_REQUIRE_CUDNN is set (tools/gpu_session.sh, when it found cuDNN).
TEST_F(CudaBf16MatmulAttention, CudnnAttentionMatchesMaterialisedCpuOnBf16Operands) {
  const std::string unavailable = cuda::cudnn_attention_unavailable();
  if (!unavailable.empty()) {
    if (std::getenv("ZT_REQUIRE_CUDNN") != nullptr) FAIL() << "ZT_REQUIRE_CUDNN is set but " << unavailable;
    GTEST_SKIP() << "cuDNN attention cannot run here: " << unavailable;
  }
  ZT_SEEDED_RNG(rng);
  for (AttnShape s : {AttnShape{1, 1, 1, 8}, AttnShape{2, 67, 3, 16}, AttnShape{2, 130, 4, 32},
                      AttnShape{1, 200, 2, 64}, AttnShape{1, 70, 2, 128}, AttnShape{2, 300, 3, 64}}) {
    SCOPED_TRACE(::testing::Message() << "B=" << s.B << " T=" << s.T << " NH=" << s.NH << " hs=" << s.hs);
    const AttnCase c = cpu_attention(rng, s, {});
    const Slack slack = attention_slack(c, AttnKind::kFlashTensorCores, {});
    const std::int64_t C = s.NH * s.hs;
    const Shape sq{s.B, s.T, s.width()}, so{s.B, s.T, C}, sl{s.B, s.NH, s.T};
    const int nh = static_cast<int>(s.NH);
    Buffer gqkv = upload_as(DType::kBF16, c.qkv), gdout = upload_as(DType::kBF16, c.dout);
    Buffer go = poisoned(DType::kBF16, so.numel()), glse = poisoned(DType::kF32, sl.numel()),
           gdq = poisoned(DType::kBF16, sq.numel());
    std::string why;
    const bool serves = cuda::cudnn_attention_serves(gpu(), DType::kBF16, s.B, s.T, nh, s.hs, false,
                                                     {go.data(), gqkv.data(), gdq.data(), gdout.data()}, &why);
    // cuDNN 9 builds no plan for a sequence of one token (s_q = s_kv = 1): the refusal must say
    // why, and ops:: then runs the flash kernels (the other test cases here cover them at T = 1).
    if (s.T == 1 && !serves) {
      EXPECT_FALSE(why.empty()) << "a refusal names its reason";
      continue;
    }
    ASSERT_TRUE(serves) << why;
    cuda::cudnn_attention_forward(gpu(), go.view(so), glse.view(sl), gqkv.view(sq), nh);
    cuda::cudnn_attention_backward(gpu(), gdq.view(sq), gdout.view(so), go.view(so), gqkv.view(sq), glse.view(sl), nh);
    EXPECT_TRUE(within_bound(download_f32(go), widened(c.out), 1e-5, slack.out)) << "out";
    EXPECT_TRUE(within_bound(download_f32(gdq), widened(c.dqkv), 5e-5, slack.dqkv)) << "dqkv";
    // lse: the flash kernels' on the same operands, within fp32 rounding of max(1, |lse|).
    Buffer fo = poisoned(DType::kBF16, so.numel()), flse = poisoned(DType::kF32, sl.numel());
    cuda::flash_attention_forward(gpu(), fo.view(so), flse.view(sl), gqkv.view(sq), nh);
    const std::vector<float> lse = download_f32(glse), ref_lse = download_f32(flse);
    for (std::size_t i = 0; i < lse.size(); ++i) {
      ASSERT_LE(std::abs(double{lse[i]} - ref_lse[i]), 1e-5 * std::max(1.0, std::abs(double{ref_lse[i]})))
          << "lse row " << i << ": cuDNN " << lse[i] << ", flash " << ref_lse[i];
    }
    Buffer again = poisoned(DType::kBF16, sq.numel());
    cuda::cudnn_attention_backward(gpu(), again.view(sq), gdout.view(so), go.view(so), gqkv.view(sq), glse.view(sl),
                                   nh);
    EXPECT_EQ(download_f32(again), download_f32(gdq)) << "the backward repeats bit for bit";
    // Without train.deterministic: cuDNN's default backward (dK, dV added in any order), its own
    // graph, within the same bound of the CPU.
    resources_->deterministic_attention = false;
    Buffer fast = poisoned(DType::kBF16, sq.numel());
    cuda::cudnn_attention_backward(gpu(), fast.view(sq), gdout.view(so), go.view(so), gqkv.view(sq), glse.view(sl), nh);
    EXPECT_TRUE(within_bound(download_f32(fast), widened(c.dqkv), 5e-5, slack.dqkv)) << "dqkv, default algorithm";
    resources_->deterministic_attention = true;
  }
}

// Grouped-query heads through cuDNN (key/value head h / (n_head / n_kv_head) for query head h) against
// the flash kernels on the same bf16 operands, whose grouped-query path tests/gpu/
// flash_attention_test.cpp holds to the CPU: out and dqkv normwise within 2e-2 (each rounds P and
// dS to bf16 in its own order), lse within fp32 rounding, the backward repeatable bit for bit.
// Skips visibly where cuDNN cannot run (unless ZT_REQUIRE_CUDNN is set).
TEST_F(CudaBf16MatmulAttention, CudnnGroupedQueryAttentionMatchesTheFlashKernels) {
  const std::string unavailable = cuda::cudnn_attention_unavailable();
  if (!unavailable.empty()) {
    if (std::getenv("ZT_REQUIRE_CUDNN") != nullptr) FAIL() << "ZT_REQUIRE_CUDNN is set but " << unavailable;
    GTEST_SKIP() << "cuDNN attention cannot run here: " << unavailable;
  }
  ZT_SEEDED_RNG(rng);
  struct S {
    std::int64_t B, T, NH, NKV, hs;
  };
  for (const S& s : {S{2, 67, 4, 2, 16}, S{1, 130, 8, 1, 64}, S{2, 300, 6, 2, 128}}) {
    SCOPED_TRACE(::testing::Message() << "B=" << s.B << " T=" << s.T << " NH=" << s.NH << " NKV=" << s.NKV
                                      << " hs=" << s.hs);
    const std::int64_t C = s.NH * s.hs, W = (s.NH + 2 * s.NKV) * s.hs;
    const Shape sq{s.B, s.T, W}, so{s.B, s.T, C}, sl{s.B, s.NH, s.T};
    const int nh = static_cast<int>(s.NH), nkv = static_cast<int>(s.NKV);
    Buffer gqkv = upload_bf16(rng.normal(sq.numel())), gdout = upload_bf16(rng.normal(so.numel()));
    Buffer go = poisoned(DType::kBF16, so.numel()), glse = poisoned(DType::kF32, sl.numel()),
           gdq = poisoned(DType::kBF16, sq.numel());
    std::string why;
    ASSERT_TRUE(cuda::cudnn_attention_serves(gpu(), DType::kBF16, s.B, s.T, nh, s.hs, false,
                                             {go.data(), gqkv.data(), gdq.data(), gdout.data()}, &why, nkv))
        << why;
    cuda::cudnn_attention_forward(gpu(), go.view(so), glse.view(sl), gqkv.view(sq), nh, nkv);
    cuda::cudnn_attention_backward(gpu(), gdq.view(sq), gdout.view(so), go.view(so), gqkv.view(sq), glse.view(sl), nh,
                                   nkv);
    Buffer fo = poisoned(DType::kBF16, so.numel()), flse = poisoned(DType::kF32, sl.numel()),
           fdq = poisoned(DType::kBF16, sq.numel());
    cuda::flash_attention_forward(gpu(), fo.view(so), flse.view(sl), gqkv.view(sq), nh, {}, nkv);
    cuda::flash_attention_backward(gpu(), fdq.view(sq), gdout.view(so), fo.view(so), gqkv.view(sq), flse.view(sl), nh,
                                   {}, nkv);
    EXPECT_TRUE(close_normwise(download_f32(go), to_double(download_f32(fo)), 2e-2)) << "out";
    EXPECT_TRUE(close_normwise(download_f32(gdq), to_double(download_f32(fdq)), 2e-2)) << "dqkv";
    const std::vector<float> lse = download_f32(glse), ref_lse = download_f32(flse);
    for (std::size_t i = 0; i < lse.size(); ++i) {
      ASSERT_LE(std::abs(double{lse[i]} - ref_lse[i]), 1e-5 * std::max(1.0, std::abs(double{ref_lse[i]})))
          << "lse row " << i << ": cuDNN " << lse[i] << ", flash " << ref_lse[i];
    }
    Buffer again = poisoned(DType::kBF16, sq.numel());
    cuda::cudnn_attention_backward(gpu(), again.view(sq), gdout.view(so), go.view(so), gqkv.view(sq), glse.view(sl), nh,
                                   nkv);
    EXPECT_EQ(download_f32(again), download_f32(gdq)) << "the backward repeats bit for bit";
  }
}

// ---- mixed dtypes ----

// Runs fn, expecting an InternalError whose message names `op`.
template <typename Fn>
void expect_rejected(const char* op, Fn&& fn) {
  try {
    fn();
    ADD_FAILURE() << op << " accepted mixed activation dtypes";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
  }
}

// Device-free: each op checks its operands' dtypes before it touches the stream, the resources or
// the data, so views labelled as device memory over a host array (never read) and a context without
// a stream reach the check and nothing else.
TEST(CudaBf16MatmulAttentionChecks, MixedActivationDtypesAreRejectedNamingTheOp) {
  const std::int64_t B = 2, T = 4, NH = 2, hs = 8, C = NH * hs;
  const Shape sq{B, T, 3 * C}, so{B, T, C}, sa{B, NH, T, T}, sl{B, NH, T}, sw{C, C};
  static float never_read[1];
  auto view = [](DType dtype, Shape s) { return TensorView{never_read, dtype, Device::kCUDA, s}; };
  ExecContext ctx;
  ctx.device = Device::kCUDA;
  const int nh = static_cast<int>(NH);
  const TensorView w = view(DType::kF32, sw), lse = view(DType::kF32, sl);
  expect_rejected("matmul_forward", [&] {
    cuda::matmul_forward(ctx, view(DType::kF32, so), view(DType::kBF16, so), w, WeightLayout::kInOut, {});
  });
  expect_rejected("matmul_backward", [&] {  // dinp F32 beside BF16 dout and inp
    cuda::matmul_backward(ctx, view(DType::kF32, so), view(DType::kF32, sw), {}, view(DType::kBF16, so),
                          view(DType::kBF16, so), w, WeightLayout::kInOut);
  });
  expect_rejected("attention_forward", [&] {  // att F32 beside BF16 out and qkv
    cuda::attention_forward(ctx, view(DType::kBF16, so), view(DType::kF32, sa), view(DType::kBF16, sq), nh);
  });
  expect_rejected("attention_backward", [&] {  // att BF16 beside F32 dqkv, dout, qkv
    cuda::attention_backward(ctx, view(DType::kF32, sq), view(DType::kF32, so), view(DType::kF32, sq),
                             view(DType::kBF16, sa), nh);
  });
  expect_rejected("flash_attention_forward",
                  [&] { cuda::flash_attention_forward(ctx, view(DType::kF32, so), lse, view(DType::kBF16, sq), nh); });
  expect_rejected("flash_attention_backward", [&] {  // dout F32 beside BF16 dqkv, out, qkv
    cuda::flash_attention_backward(ctx, view(DType::kBF16, sq), view(DType::kF32, so), view(DType::kBF16, so),
                                   view(DType::kBF16, sq), lse, nh);
  });
}

}  // namespace
}  // namespace zt::test
