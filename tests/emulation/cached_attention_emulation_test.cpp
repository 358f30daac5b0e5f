// The CUDA cached attention kernel (kernels/cuda/cached_attention_kernels.cuh, decoding) run on
// the CPU under the SIMT emulator against the CPU kernel: F32 and BF16, multi-head and
// grouped-query, head sizes from 8 (lanes idle) to 256 (eight dimensions a lane), caches shorter
// than the block's warps, one and several new positions, two samples; the cache's positions in
// one block or split across blocks and merged by the combine kernel ([Note: split positions]: the
// launcher's choice, and forced splits where a query's later splits hold none of its positions).
// Tolerances: 1e-5 normwise (expf against the CPU's exp_approx, the warps' and splits' partial sums
// merged in another order), BF16 results also within 2^-7 per element (close_to_cpu).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/contracts/operand_checks.h"
#include "kernels/cpu/cached_attention.h"
#include "kernels/cuda/cached_attention_kernels.cuh"
#include "tests/emulation/emulation_util.h"
#include "tests/emulation/simt_runtime.h"
#include "tests/kernels/kernel_test_util.h"

namespace zt::test {
namespace {

namespace ca = cuda::detail::cached_attention;
using namespace emulation;  // NOLINT: the emulation tests' shared helpers

// `span` 0: the launcher's split (ca::split_positions); else splits of `span` positions.
template <typename T>
void run_shape(Rng& rng, std::int64_t B, std::int64_t P, std::int64_t Tq, int NH, int NKV, int hs, int span = 0) {
  constexpr bool kBf16 = !std::is_same_v<T, float>;
  SCOPED_TRACE(::testing::Message() << (kBf16 ? "BF16" : "F32") << " B=" << B << " P=" << P << " Tq=" << Tq
                                    << " NH=" << NH << " NKV=" << NKV << " hs=" << hs << " span=" << span);
  const DType dt = dtype_of<T>();
  const std::int64_t W = static_cast<std::int64_t>(NH + 2 * NKV) * hs, C = static_cast<std::int64_t>(NH) * hs;
  std::vector<T> cache = device_values<T>(rng.normal(B * P * W));
  std::vector<T> want(static_cast<std::size_t>(B * Tq * C)), got = want;
  const TensorView cache_view{cache.data(), dt, Device::kCPU, Shape{B, P, W}};
  cpu::cached_attention_forward(reference_ctx(), TensorView{want.data(), dt, Device::kCPU, Shape{B, Tq, C}}, cache_view,
                                NH, NKV);
  const CachedAttentionDims d =
      cached_attention_dims(TensorView{got.data(), dt, Device::kCPU, Shape{B, Tq, C}}, cache_view, NH, NKV);
  ca::Geometry g{static_cast<int>(d.T),
                 static_cast<int>(d.Tq),
                 static_cast<int>(d.W),
                 static_cast<int>(d.C),
                 static_cast<int>(d.hs),
                 NH,
                 NH / NKV,
                 static_cast<int>(d.k_off),
                 static_cast<int>(d.v_off),
                 1.0f / std::sqrt(static_cast<float>(hs))};
  if (span == 0) {
    std::tie(g.splits, g.span) = ca::split_positions(Tq * NH * B, P);
  } else {
    g.span = span;
    g.splits = static_cast<int>((P + span - 1) / span);
  }
  std::vector<float> partials(static_cast<std::size_t>(B * Tq * NH * g.splits * ca::kPartialFloats),
                              std::numeric_limits<float>::quiet_NaN());  // every entry read is written first
  const dim3 rows(static_cast<unsigned>(Tq * NH), static_cast<unsigned>(B));
  simt::launch(dim3(rows.x, rows.y, static_cast<unsigned>(g.splits)), ca::kThreads, 0, ca::cached_attention_kernel<T>,
               got.data(), g.splits > 1 ? partials.data() : nullptr, static_cast<const T*>(cache.data()), g);
  if (g.splits > 1) {
    simt::launch(rows, cuda::detail::kWarpSize, 0, ca::cached_attention_combine<T>, got.data(),
                 static_cast<const float*>(partials.data()), g);
  }
  EXPECT_TRUE(close_to_cpu(host_values(got), host_values(want), kBf16));
  for (const std::string& v : simt::violations()) ADD_FAILURE() << "emulator rule broken: " << v;
}

TEST(CachedAttentionEmulation, MatchesTheCpuKernel) {
  ZT_SEEDED_RNG(rng);
  run_shape<float>(rng, 1, 1, 1, 2, 2, 8);    // one position: three warps see none
  run_shape<float>(rng, 1, 3, 2, 2, 1, 16);   // grouped-query, fewer positions than warps
  run_shape<float>(rng, 2, 21, 3, 4, 2, 64);  // two samples, several new positions
  run_shape<bf16_dev>(rng, 1, 18, 1, 3, 1, 128);
  run_shape<float>(rng, 1, 9, 1, 1, 1, 256);      // eight dimensions a lane
  run_shape<bf16_dev>(rng, 1, 12, 12, 2, 2, 32);  // every position new (a prompt's forward)
}

TEST(CachedAttentionEmulation, SplitPositionsMatchTheCpuKernel) {
  ZT_SEEDED_RNG(rng);
  // Decoding a long cache: the launcher splits it (5 splits of 60 for 2 heads and 300 positions).
  ASSERT_EQ(ca::split_positions(2, 300), (std::pair<int, int>{5, 60}));
  run_shape<float>(rng, 1, 300, 1, 2, 1, 64);
  run_shape<bf16_dev>(rng, 2, 200, 1, 3, 3, 128);
  // Several new positions, each split holding some of each query's positions.
  run_shape<float>(rng, 1, 70, 3, 2, 2, 16, /*span=*/18);
  // A prompt split by force: a query's later splits hold none of its positions (m = -inf).
  run_shape<float>(rng, 1, 40, 40, 2, 1, 32, /*span=*/16);
  run_shape<bf16_dev>(rng, 1, 9, 9, 1, 1, 8, /*span=*/4);
}

TEST(CachedAttentionEmulation, SplitsOnlyWhereTheGridIsSmallAndTheCacheLong) {
  EXPECT_EQ(ca::split_positions(12, 1024), (std::pair<int, int>{16, 64}));          // GPT-2 decoding a full context
  EXPECT_EQ(ca::split_positions(12 * 1024, 1024), (std::pair<int, int>{1, 1024}));  // its prompt's forward
  EXPECT_EQ(ca::split_positions(1, 10), (std::pair<int, int>{1, 10}));              // a short cache
  EXPECT_EQ(ca::split_positions(1, 100000), (std::pair<int, int>{64, 1563}));       // at most kMaxSplits
  EXPECT_EQ(ca::split_positions(32, 8192), (std::pair<int, int>{9, 911}));          // Llama 3.2 1B's heads
}

}  // namespace
}  // namespace zt::test
