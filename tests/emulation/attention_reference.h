// Shared by the SIMT emulation tests of the flash attention kernels: causal attention in fp64 on
// the kernels' (widened) operands, with and without dropout on the probabilities (the CPU's mask,
// dropout_keep), multi-head or grouped-query, and the per-element bound the bf16 results are held to.
//
// Bound per element: |got - ref| <= 2^-8 |ref| (the result's own rounding to bf16, half an ulp
// being at most 2^-8 of the value) + 1.1 slack + 1e-4 max|ref| (fp32 sums in another order, expf),
// the slack being what the tensor-core kernels round that the fp64 reference does not, propagated
// from the reference's operands with u = 2^-8: the dropped probabilities before P V and P^T dO
// (u sum P' |v| or |dO|), dS before dS K and dS^T Q (u |dS|), and the row term delta = dO . out
// taken from the rounded out (sum |dO| (u |out| + out's slack)), which reaches dS as P e_delta.
// The CUDA-core kernels round less (only their bf16 results and the out delta reads), so the same
// bound holds for them with room to spare. A wrong tile bound, mask index or fragment layout gives
// errors of the order of the values.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_bf16.h>  // the emulator's stand-in (tests/emulation/simt)

#include "engine/base/core/bf16.h"
#include "kernels/cpu/dropout.h"

namespace zt::test::emulation {

using bf16_dev = __nv_bfloat16;

constexpr double kU = 1.0 / 256;

struct Problem {
  std::int64_t B, T, NH, hs;
  float p;               // dropout on the probabilities
  std::int64_t NKV = 0;  // key/value heads (grouped-query attention); 0: NH

  std::int64_t kv_heads() const { return NKV > 0 ? NKV : NH; }
  std::int64_t qkv_width() const { return (NH + 2 * kv_heads()) * hs; }  // q | k | v
};

inline std::vector<bf16_dev> to_device_bf16(const std::vector<float>& x) {
  std::vector<bf16_dev> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i].bits = float_to_bf16(x[i]).bits;
  return out;
}
inline std::vector<float> widen(const std::vector<bf16_dev>& x) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = bf16_to_float(bf16{x[i].bits});
  return out;
}

// The fp64 results and their slack (see the header comment).
struct Reference {
  std::vector<double> out, lse, dqkv, out_slack, dqkv_slack;
};

inline Reference reference(const Problem& pr, const std::vector<float>& qkv, const std::vector<float>& dout,
                           const DropoutSpec& drop) {
  const std::int64_t B = pr.B, T = pr.T, NH = pr.NH, hs = pr.hs, C = NH * hs, W = pr.qkv_width();
  const std::int64_t NKV = pr.kv_heads(), group = NH / NKV;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  const double keep_scale = drop.active() ? 1.0 / (1.0 - static_cast<double>(drop.p)) : 1.0;
  Reference r{std::vector<double>(static_cast<std::size_t>(B * T * C), 0.0),
              std::vector<double>(static_cast<std::size_t>(B * NH * T), 0.0), std::vector<double>(qkv.size(), 0.0),
              std::vector<double>(static_cast<std::size_t>(B * T * C), 0.0), std::vector<double>(qkv.size(), 0.0)};
  std::vector<double> P(static_cast<std::size_t>(T * T)), F(P.size()), dS(P.size()), e_dS(P.size());
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < NH; ++h) {
      // Query head h reads key/value head h / group; part 0 is q, 1 k, 2 v.
      const std::int64_t kvh = h / group;
      const std::int64_t col[3] = {h * hs, C + kvh * hs, C + (NKV + kvh) * hs};
      auto x = [&](std::int64_t part, std::int64_t t, std::int64_t d) {
        return static_cast<double>(qkv[static_cast<std::size_t>((b * T + t) * W + col[part] + d)]);
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
          const bool kept = !drop.active() || dropout_keep(drop, drop.first_sample + b, (h * T + i) * T + j);
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
          // dk and dv sum the terms of every query head reading this key/value head.
          const auto at_col = [&](std::int64_t part) {
            return static_cast<std::size_t>((b * T + t) * W + col[part] + d);
          };
          r.dqkv[at_col(0)] = scale * dq;
          r.dqkv[at_col(1)] += scale * dk;
          r.dqkv[at_col(2)] += dv;
          r.dqkv_slack[at_col(0)] = 1.1 * scale * dq_e;
          r.dqkv_slack[at_col(1)] += 1.1 * scale * dk_e;
          r.dqkv_slack[at_col(2)] += 1.1 * dv_e;
        }
      }
    }
  }
  return r;
}

inline ::testing::AssertionResult within_bound(const std::vector<float>& got, const std::vector<double>& ref,
                                               const std::vector<double>& slack) {
  double max_ref = 0.0;
  for (double x : ref) max_ref = std::max(max_ref, std::abs(x));
  double worst = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double allowed = kU * std::abs(ref[i]) + slack[i] + 1e-4 * max_ref;
    const double diff = std::abs(static_cast<double>(got[i]) - ref[i]);
    if (!(diff <= allowed)) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << got[i] << ", reference " << ref[i] << ", allowed difference " << allowed;
    }
    worst = std::max(worst, diff / allowed);
  }
  if (std::getenv("ZT_TEST_PRINT_ERRORS") != nullptr) std::printf("    worst difference / allowed %.3g\n", worst);
  return ::testing::AssertionSuccess();
}

}  // namespace zt::test::emulation
