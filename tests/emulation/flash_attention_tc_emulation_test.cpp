// The tensor-core flash attention kernels (kernels/cuda/flash_attention_tc_kernels.cuh) run on the
// CPU under the SIMT emulator ([Note: SIMT emulation] in simt_runtime.h), against attention in
// fp64 on the same bf16 operands, with and without dropout on the probabilities (the CPU's mask,
// cpu::dropout_keep). This runs the kernels' own source in every build, GPU or not; the gpu-labelled
// tests run the compiled kernels where a device exists.
//
// Bound per element: |got - ref| <= 2^-8 |ref| (the result's own rounding to bf16, half an ulp
// being at most 2^-8 of the value) + 1.1 slack + 1e-4 max|ref| (fp32 sums in another order, expf),
// the slack being what the kernels round that the fp64 reference does not, propagated from the
// reference's operands with u = 2^-8: the dropped probabilities before P V and P^T dO
// (u sum P' |v| or |dO|), dS before dS K and dS^T Q (u |dS|), and the row term delta = dO . out
// taken from the rounded out (sum |dO| (u |out| + out's slack)), which reaches dS as P e_delta.
// A wrong tile bound, mask index or fragment layout gives errors of the order of the values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/dropout.h"
#include "kernels/cuda/flash_attention_tc_kernels.cuh"
#include "tests/emulation/simt_runtime.h"
#include "tests/kernels/kernel_test_util.h"

namespace zt::cuda::detail::tc_flash {
// The kernels' dynamic shared memory (their `extern __shared__` array): sm_90's per-block maximum.
alignas(128) unsigned char smem[227 * 1024];
}  // namespace zt::cuda::detail::tc_flash

namespace zt::test {
namespace {

namespace tc = cuda::detail::tc_flash;
using bf16_dev = __nv_bfloat16;

constexpr double kU = 1.0 / 256;

struct Problem {
  std::int64_t B, T, NH, hs;
  float p;  // dropout on the probabilities
};

std::vector<bf16_dev> to_device_bf16(const std::vector<float>& x) {
  std::vector<bf16_dev> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i].bits = float_to_bf16(x[i]).bits;
  return out;
}
std::vector<float> widen(const std::vector<bf16_dev>& x) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = bf16_to_float(bf16{x[i].bits});
  return out;
}

// The fp64 results and their slack (see the header comment).
struct Reference {
  std::vector<double> out, lse, dqkv, out_slack, dqkv_slack;
};

Reference reference(const Problem& pr, const std::vector<float>& qkv, const std::vector<float>& dout,
                    const cpu::DropoutSpec& drop) {
  const std::int64_t B = pr.B, T = pr.T, NH = pr.NH, hs = pr.hs, C = NH * hs, C3 = 3 * C;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  const double keep_scale = drop.active() ? 1.0 / (1.0 - static_cast<double>(drop.p)) : 1.0;
  Reference r{std::vector<double>(static_cast<std::size_t>(B * T * C), 0.0),
              std::vector<double>(static_cast<std::size_t>(B * NH * T), 0.0),
              std::vector<double>(qkv.size(), 0.0), std::vector<double>(static_cast<std::size_t>(B * T * C), 0.0),
              std::vector<double>(qkv.size(), 0.0)};
  std::vector<double> P(static_cast<std::size_t>(T * T)), F(P.size()), dS(P.size()), e_dS(P.size());
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < NH; ++h) {
      auto x = [&](std::int64_t part, std::int64_t t, std::int64_t d) {
        return static_cast<double>(qkv[static_cast<std::size_t>((b * T + t) * C3 + part * C + h * hs + d)]);
      };
      auto dO = [&](std::int64_t t, std::int64_t d) {
        return static_cast<double>(dout[static_cast<std::size_t>((b * T + t) * C + h * hs + d)]);
      };
      auto at = [&](std::int64_t t, std::int64_t d) { return static_cast<std::size_t>((b * T + t) * C + h * hs + d); };
      for (std::int64_t i = 0; i < T; ++i) {
        double mx = -INFINITY;
        std::vector<double> s(static_cast<std::size_t>(i + 1));
        for (std::int64_t j = 0; j <= i; ++j) {
          double dot = 0.0;
          for (std::int64_t d = 0; d < hs; ++d) dot += x(0, i, d) * x(1, j, d);
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        double sum = 0.0;
        for (double v : s) sum += std::exp(v - mx);
        const double lse = mx + std::log(sum);
        r.lse[static_cast<std::size_t>((b * NH + h) * T + i)] = lse;
        for (std::int64_t j = 0; j <= i; ++j) {
          P[i * T + j] = std::exp(s[j] - lse);
          const bool kept = !drop.active() || cpu::dropout_keep(drop, drop.first_sample + b, (h * T + i) * T + j);
          F[i * T + j] = kept ? keep_scale : 0.0;
        }
        for (std::int64_t d = 0; d < hs; ++d) {
          double o = 0.0, slack = 0.0;
          for (std::int64_t j = 0; j <= i; ++j) {
            o += P[i * T + j] * F[i * T + j] * x(2, j, d);
            slack += kU * P[i * T + j] * F[i * T + j] * std::abs(x(2, j, d));
          }
          r.out[at(i, d)] = o;
          r.out_slack[at(i, d)] = 1.1 * slack;
        }
      }
      for (std::int64_t i = 0; i < T; ++i) {
        double delta = 0.0, e_delta = 0.0;
        for (std::int64_t d = 0; d < hs; ++d) {
          delta += dO(i, d) * r.out[at(i, d)];
          e_delta += std::abs(dO(i, d)) * (kU * std::abs(r.out[at(i, d)]) + r.out_slack[at(i, d)]);
        }
        for (std::int64_t j = 0; j <= i; ++j) {
          double dp = 0.0;
          for (std::int64_t d = 0; d < hs; ++d) dp += dO(i, d) * x(2, j, d);
          dS[i * T + j] = P[i * T + j] * (F[i * T + j] * dp - delta);
          e_dS[i * T + j] = kU * std::abs(dS[i * T + j]) + P[i * T + j] * e_delta;
        }
      }
      for (std::int64_t t = 0; t < T; ++t) {
        for (std::int64_t d = 0; d < hs; ++d) {
          double dq = 0.0, dq_e = 0.0, dk = 0.0, dk_e = 0.0, dv = 0.0, dv_e = 0.0;
          for (std::int64_t j = 0; j <= t; ++j) {  // t as a query
            dq += dS[t * T + j] * x(1, j, d);
            dq_e += e_dS[t * T + j] * std::abs(x(1, j, d));
          }
          for (std::int64_t i = t; i < T; ++i) {  // t as a key
            dk += dS[i * T + t] * x(0, i, d);
            dk_e += e_dS[i * T + t] * std::abs(x(0, i, d));
            dv += P[i * T + t] * F[i * T + t] * dO(i, d);
            dv_e += kU * P[i * T + t] * F[i * T + t] * std::abs(dO(i, d));
          }
          const std::size_t row = static_cast<std::size_t>((b * T + t) * C3 + h * hs + d);
          r.dqkv[row] = scale * dq;
          r.dqkv[row + C] = scale * dk;
          r.dqkv[row + 2 * C] = dv;
          r.dqkv_slack[row] = 1.1 * scale * dq_e;
          r.dqkv_slack[row + C] = 1.1 * scale * dk_e;
          r.dqkv_slack[row + 2 * C] = 1.1 * dv_e;
        }
      }
    }
  }
  return r;
}

::testing::AssertionResult within_bound(const std::vector<float>& got, const std::vector<double>& ref,
                                        const std::vector<double>& slack) {
  double max_ref = 0.0;
  for (double x : ref) max_ref = std::max(max_ref, std::abs(x));
  double worst = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double allowed = kU * std::abs(ref[i]) + slack[i] + 1e-4 * max_ref;
    const double diff = std::abs(static_cast<double>(got[i]) - ref[i]);
    if (!(diff <= allowed)) {
      return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", reference " << ref[i]
                                           << ", allowed difference " << allowed;
    }
    worst = std::max(worst, diff / allowed);
  }
  if (std::getenv("ZT_TEST_PRINT_ERRORS") != nullptr) std::printf("    worst difference / allowed %.3g\n", worst);
  return ::testing::AssertionSuccess();
}

// Runs the three kernels (and the delta the launcher computes between them, as flash_delta_kernel
// does: fp32 sums over the head's columns of dout * the rounded out) on one problem.
template <int HS>
void run_problem(const Problem& pr, std::uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "B=" << pr.B << " T=" << pr.T << " NH=" << pr.NH << " hs=" << HS
                                    << " dropout=" << pr.p);
  ASSERT_EQ(pr.hs, HS);
  Rng rng(seed);
  const std::int64_t B = pr.B, T = pr.T, NH = pr.NH, C = NH * HS;
  const cpu::DropoutSpec drop{pr.p, /*seed=*/seed, /*site=*/7, /*first_sample=*/(std::int64_t{1} << 32) + 5};
  const std::vector<bf16_dev> qkv = to_device_bf16(rng.normal(B * T * 3 * C));
  const std::vector<bf16_dev> dout = to_device_bf16(rng.normal(B * T * C));
  std::vector<bf16_dev> out(static_cast<std::size_t>(B * T * C), bf16_dev{0xFFFF});  // NaN: unwritten shows
  std::vector<bf16_dev> dqkv(qkv.size(), bf16_dev{0xFFFF});
  std::vector<float> lse(static_cast<std::size_t>(B * NH * T), NAN), delta(lse.size());
  const cuda::detail::FlashGeometry g{static_cast<int>(T), static_cast<int>(C), static_cast<int>(NH),
                                      static_cast<float>(1.0 / std::sqrt(static_cast<double>(HS)))};
  const cuda::detail::MaskParams mask = cuda::detail::mask_params(drop);
  const dim3 grid(static_cast<unsigned>((T + tc::kRows - 1) / tc::kRows), static_cast<unsigned>(B * NH));
  constexpr std::size_t fwd_bytes = tc::forward_smem<HS>().bytes, bwd_bytes = tc::backward_smem<HS>().bytes;
  static_assert(fwd_bytes <= sizeof(tc::smem) && bwd_bytes <= sizeof(tc::smem), "sm_90 has 227 KiB per block");

  simt::launch(grid, tc::kThreads, tc::smem, fwd_bytes, tc::tc_forward_kernel<HS>, out.data(), lse.data(),
               qkv.data(), g, mask);
  const std::vector<float> out_f = widen(out), dout_f = widen(dout);
  for (std::int64_t r = 0; r < B * NH * T; ++r) {
    const std::int64_t b = r / (NH * T), h = (r / T) % NH, i = r % T;
    float sum = 0.0f;
    for (std::int64_t d = 0; d < HS; ++d) {
      const std::size_t at = static_cast<std::size_t>((b * T + i) * C + h * HS + d);
      sum += dout_f[at] * out_f[at];
    }
    delta[static_cast<std::size_t>(r)] = sum;
  }
  simt::launch(grid, tc::kThreads, tc::smem, bwd_bytes, tc::tc_dq_kernel<HS>, dqkv.data(), qkv.data(), dout.data(),
               lse.data(), delta.data(), g, mask);
  simt::launch(grid, tc::kThreads, tc::smem, bwd_bytes, tc::tc_dkv_kernel<HS>, dqkv.data(), qkv.data(), dout.data(),
               lse.data(), delta.data(), g, mask);

  for (const std::string& v : simt::violations()) ADD_FAILURE() << "WMMA rule broken: " << v;
  const Reference ref = reference(pr, widen(qkv), dout_f, drop);
  EXPECT_TRUE(within_bound(out_f, ref.out, ref.out_slack)) << "out";
  EXPECT_TRUE(close_normwise(lse, ref.lse, 1e-5)) << "lse";
  EXPECT_TRUE(within_bound(widen(dqkv), ref.dqkv, ref.dqkv_slack)) << "dqkv";
}

// Head sizes 16-128; T of one row, of a partial tile, and of several tiles not a multiple of 64;
// batch and heads above one so the (sample, head) grid rows and the mask's sample index are used.
TEST(FlashAttentionTensorCoreEmulation, MatchesFp64AttentionWithAndWithoutDropout) {
  const std::uint32_t seed = test_seed();
  SCOPED_TRACE(::testing::Message() << "ZT_TEST_SEED=" << seed);
  for (float p : {0.0f, 0.2f}) {
    run_problem<16>({1, 1, 1, 16, p}, seed);
    run_problem<16>({2, 67, 3, 16, p}, seed + 1);
    run_problem<32>({2, 130, 2, 32, p}, seed + 2);
    run_problem<64>({1, 200, 2, 64, p}, seed + 3);
    run_problem<128>({1, 70, 2, 128, p}, seed + 4);
  }
}

}  // namespace
}  // namespace zt::test
