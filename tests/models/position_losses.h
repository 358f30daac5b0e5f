// A check the model tests share: the per-position losses a forward hands out
// (ForwardOptions::losses_out) against the logits it hands out.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace zt::testing {

// Each position's loss out of a forward (ForwardOptions::losses_out) is its row's cross-entropy
// from the logits the same forward gives (1e-5 relative, fp32), and the forward's loss is their
// mean summed in order, bit for bit.
inline void expect_position_losses(const std::vector<float>& losses, const std::vector<float>& logits,
                                   const std::vector<std::int32_t>& targets, int vocab, float loss) {
  ASSERT_EQ(losses.size(), targets.size());
  double sum = 0.0;
  for (std::size_t r = 0; r < losses.size(); ++r) {
    const float* row = logits.data() + r * static_cast<std::size_t>(vocab);
    const double top = *std::max_element(row, row + vocab);
    double z = 0.0;
    for (int v = 0; v < vocab; ++v) z += std::exp(static_cast<double>(row[v]) - top);
    const double expected = top + std::log(z) - row[targets[r]];
    EXPECT_NEAR(losses[r], expected, 1e-5 * std::max(1.0, expected)) << "position " << r;
    sum += losses[r];
  }
  EXPECT_EQ(static_cast<float>(sum / static_cast<double>(losses.size())), loss);
}

}  // namespace zt::testing
