// The bound of the bf16 CUDA-vs-CPU kernel tests (bf16_matmul_attention_test.cpp's header):
// |gpu - cpu| <= 2^-7 |cpu| + fp32_tol * max|cpu| + slack, per element.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace zt::test {

inline constexpr double kUnitRoundoff = 1.0 / 256;  // bf16 round to nearest: |round(x) - x| <= 2^-8 |x|

// Every element within the header's bound (slack empty: none); NaN (an unwritten, poisoned
// element) fails. ZT_TEST_PRINT_ERRORS=1 prints the largest difference / allowed ratio.
inline ::testing::AssertionResult within_bound(const std::vector<float>& got, const std::vector<float>& ref,
                                               double fp32_tol, const std::vector<double>& slack = {}) {
  if (got.size() != ref.size()) return ::testing::AssertionFailure() << "size " << got.size() << " vs " << ref.size();
  double max_ref = 0.0;
  for (float x : ref) max_ref = std::max(max_ref, std::abs(static_cast<double>(x)));
  const double atol = fp32_tol * max_ref;
  double worst_ratio = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double diff = std::abs(static_cast<double>(got[i]) - ref[i]);
    const double allowed = std::abs(static_cast<double>(ref[i])) / 128.0 + atol + (slack.empty() ? 0.0 : slack[i]);
    if (!(diff <= allowed)) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << got[i] << ", reference " << ref[i] << ", allowed difference " << allowed;
    }
    if (allowed > 0.0) worst_ratio = std::max(worst_ratio, diff / allowed);
  }
  if (std::getenv("ZT_TEST_PRINT_ERRORS") != nullptr) std::printf("    worst difference / allowed %.3g\n", worst_ratio);
  return ::testing::AssertionSuccess();
}

}  // namespace zt::test
