// The materialised attention's causal softmax kernels (kernels/cuda/attention_kernels.cuh) run on
// the CPU under the SIMT emulator ([Note: SIMT emulation] in simt_runtime.h), launched as
// attention.cu launches them (8 rows a block, one warp a row), against fp64 row softmaxes:
//   F32 in place (att is the scores' buffer, as attention.cu's F32 forward and backward use it):
//     forward normwise 1e-6 (expf and fp32 sums in the warp's order); backward within 1e-6 of the
//     terms' size M = max_k p_k (|dp_k| + sum_j p_j |dp_j|) scale: dp_k - dot cancels, so the
//     result can be far smaller than the fp32 sum's error is relative to;
//   BF16 (fp32 scores or dP in scratch, bf16 probabilities): per element within 2^-7 of the fp64
//     value (one rounding of each result; emulation_util.h's close_to_cpu), the backward plus
//     1e-6 M;
//   above the diagonal exactly zero either way.
// Rows cover several (sample, head) pairs, T below and above a warp's 32 lanes, and a last block
// with fewer than 8 rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cuda/attention_kernels.cuh"
#include "tests/emulation/emulation_util.h"
#include "tests/emulation/simt_runtime.h"
#include "tests/kernels/kernel_test_util.h"

namespace zt::test {
namespace {

namespace at = cuda::detail::attention;
using namespace emulation;  // NOLINT: the emulation tests' shared helpers

dim3 softmax_grid(std::int64_t rows) {
  return dim3(static_cast<unsigned>((rows + at::kRowsPerBlock - 1) / at::kRowsPerBlock));
}

// fp64 causal softmax of each row r (query r % T) of [rows, T] scores; zero above the diagonal.
std::vector<double> softmax_reference(const std::vector<float>& s, std::int64_t rows, std::int64_t T) {
  std::vector<double> p(s.size(), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t len = r % T + 1;
    const float* row = s.data() + r * T;
    const double mx = *std::max_element(row, row + len);
    double sum = 0.0;
    for (std::int64_t k = 0; k < len; ++k) sum += std::exp(row[k] - mx);
    for (std::int64_t k = 0; k < len; ++k) p[r * T + k] = std::exp(row[k] - mx) / sum;
  }
  return p;
}

// fp64 softmax backward: p * (dp - sum_k p dp) * scale on and below the diagonal, zero above.
std::vector<double> softmax_backward_reference(const std::vector<float>& p, const std::vector<float>& dp,
                                               std::int64_t rows, std::int64_t T, double scale) {
  std::vector<double> out(p.size(), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t len = r % T + 1;
    double dot = 0.0;
    for (std::int64_t k = 0; k < len; ++k) dot += static_cast<double>(p[r * T + k]) * dp[r * T + k];
    for (std::int64_t k = 0; k < len; ++k) out[r * T + k] = p[r * T + k] * (dp[r * T + k] - dot) * scale;
  }
  return out;
}

// M above: the size of the terms each backward result is summed from.
double backward_magnitude(const std::vector<float>& p, const std::vector<float>& dp, std::int64_t rows, std::int64_t T,
                          double scale) {
  double most = 0.0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t len = r % T + 1;
    double dot_abs = 0.0;
    for (std::int64_t k = 0; k < len; ++k) dot_abs += std::abs(static_cast<double>(p[r * T + k]) * dp[r * T + k]);
    for (std::int64_t k = 0; k < len; ++k) {
      most = std::max(most, p[r * T + k] * (std::abs(dp[r * T + k]) + dot_abs) * scale);
    }
  }
  return most;
}

::testing::AssertionResult close_backward(const std::vector<float>& got, const std::vector<double>& ref,
                                          double magnitude, bool bf16) {
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double bound = (bf16 ? std::abs(ref[i]) / 128.0 : 0.0) + 1e-6 * magnitude;
    if (!(std::abs(got[i] - ref[i]) <= bound)) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << got[i] << ", reference " << ref[i] << " (bound " << bound << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult zero_above_diagonal(const std::vector<float>& x, std::int64_t rows, std::int64_t T) {
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t k = r % T + 1; k < T; ++k) {
      if (x[r * T + k] != 0.0f) {
        return ::testing::AssertionFailure() << "row " << r << " column " << k << ": " << x[r * T + k];
      }
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult close(const std::vector<float>& got, const std::vector<double>& ref, bool bf16) {
  if (!bf16) return close_normwise(got, ref, 1e-6);
  return close_to_cpu(got, std::vector<float>(ref.begin(), ref.end()), true);
}

// Where a kernel writes, as attention.cu points it: BF16 into separate bf16 storage, F32 in place
// over its fp32 input.
template <typename Act>
Act* output_of(std::vector<Act>& separate, std::vector<float>& fp32_input) {
  if constexpr (std::is_same_v<Act, float>) {
    return fp32_input.data();
  } else {
    return separate.data();
  }
}

template <typename Act>
void softmax_case(Rng& rng, std::int64_t samples_times_heads, std::int64_t T) {
  constexpr bool kBf16 = !std::is_same_v<Act, float>;
  SCOPED_TRACE(::testing::Message() << (kBf16 ? "BF16" : "F32") << " rows=" << samples_times_heads * T << " T=" << T);
  const std::int64_t rows = samples_times_heads * T;
  const float scale = 1.0f / std::sqrt(64.0f);
  // Scores as the product leaves them (scaled), spread enough that the row maximum matters.
  const std::vector<float> scores = rng.normal(rows * T, 0.0f, 4.0f);
  const std::vector<float> dp = rng.normal(rows * T);

  // Forward: F32 in place over the scores; BF16 from fp32 scores into bf16 probabilities.
  std::vector<float> scores_buf = scores;
  std::vector<Act> att = device_values<Act>(std::vector<float>(static_cast<std::size_t>(rows * T), NAN));
  simt::launch(softmax_grid(rows), at::kThreads, 0, at::causal_softmax_forward<Act>, output_of(att, scores_buf),
               static_cast<const float*>(scores_buf.data()), rows, static_cast<int>(T));
  const std::vector<float> probs = kBf16 ? host_values(att) : scores_buf;
  EXPECT_TRUE(close(probs, softmax_reference(scores, rows, T), kBf16));
  EXPECT_TRUE(zero_above_diagonal(probs, rows, T));

  // Backward from those probabilities: F32 in place over dp; BF16 into bf16 scratch.
  std::vector<float> dp_buf = dp;
  std::vector<Act> dpre = device_values<Act>(std::vector<float>(static_cast<std::size_t>(rows * T), NAN));
  const std::vector<Act> att_in = device_values<Act>(probs);
  simt::launch(softmax_grid(rows), at::kThreads, 0, at::causal_softmax_backward<Act>, output_of(dpre, dp_buf),
               static_cast<const float*>(dp_buf.data()), att_in.data(), rows, static_cast<int>(T), scale);
  const std::vector<float> dpre_got = kBf16 ? host_values(dpre) : dp_buf;
  EXPECT_TRUE(close_backward(dpre_got, softmax_backward_reference(probs, dp, rows, T, scale),
                             backward_magnitude(probs, dp, rows, T, scale), kBf16));
  EXPECT_TRUE(zero_above_diagonal(dpre_got, rows, T));
  expect_no_violations();
}

TEST(AttentionSoftmaxEmulation, CausalSoftmaxForwardAndBackwardMatchFp64) {
  ZT_SEEDED_RNG(rng);
  // (sample x head pairs, T): a single short row block, T across the 32 lanes, and 3 x 23 = 69 rows
  // (a last block of 5 rows).
  for (const auto& [pairs, T] : {std::pair<std::int64_t, std::int64_t>{1, 5}, {2, 45}, {3, 23}}) {
    softmax_case<float>(rng, pairs, T);
    softmax_case<bf16_dev>(rng, pairs, T);
  }
}

}  // namespace
}  // namespace zt::test
