// The caching allocator's bookkeeping (engine/base/device/block_cache), on the host with a counting fake
// for cudaMalloc/cudaFree: runs on every machine (label cpu). Proves the property the training loop
// relies on: after the first step, repeating the same allocations makes no raw allocation.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "engine/base/device/block_cache.h"

namespace zt::cuda {
namespace {

struct FakeDevice {
  std::int64_t live_bytes = 0, capacity = 1 << 30;
  BlockCache make() {
    return BlockCache(
        [this](std::size_t b) -> void* {
          if (live_bytes + static_cast<std::int64_t>(b) > capacity) return nullptr;
          live_bytes += static_cast<std::int64_t>(b);
          return std::malloc(b);
        },
        [this](void* p, std::size_t b) {
          live_bytes -= static_cast<std::int64_t>(b);
          std::free(p);
        });
  }
};

TEST(BlockCache, SizeClassesRoundUpWithBoundedWaste) {
  EXPECT_EQ(BlockCache::size_class(0), 512u);
  EXPECT_EQ(BlockCache::size_class(1), 512u);
  EXPECT_EQ(BlockCache::size_class(513), 1024u);
  EXPECT_EQ(BlockCache::size_class(1 << 20), std::size_t{1} << 20);
  EXPECT_EQ(BlockCache::size_class((1 << 20) + 1), std::size_t{2} << 20);
  EXPECT_EQ(BlockCache::size_class((5 << 20) + 3), std::size_t{6} << 20);
}

TEST(BlockCache, RepeatedStepsMakeNoRawAllocationsAfterTheFirst) {
  FakeDevice dev;
  BlockCache cache = dev.make();
  const std::size_t sizes[] = {100, 3000, 1 << 20, (7 << 20) + 5, 3000};
  for (int step = 0; step < 5; ++step) {
    std::vector<std::pair<void*, std::size_t>> held;
    for (std::size_t s : sizes) held.emplace_back(cache.allocate(s), s);
    for (auto& [p, s] : held) {
      ASSERT_NE(p, nullptr);
      cache.deallocate(p, s);
    }
    EXPECT_EQ(cache.stats().device_allocs, 5) << "step " << step;
  }
  EXPECT_EQ(cache.stats().cache_hits, 20);
  EXPECT_EQ(cache.stats().cached_bytes, cache.stats().reserved_bytes);
  cache.release_cached();
  EXPECT_EQ(cache.stats().reserved_bytes, 0);
  EXPECT_EQ(dev.live_bytes, 0);
}

TEST(BlockCache, OutOfMemoryFreesIdleBlocksAndRetriesOnce) {
  FakeDevice dev;
  dev.capacity = 4 << 20;
  BlockCache cache = dev.make();
  void* a = cache.allocate(3 << 20);  // a 4 MiB class block: the whole fake device
  ASSERT_NE(a, nullptr);
  cache.deallocate(a, 3 << 20);
  void* b = cache.allocate(2 << 20);  // another class: only fits once the idle block is freed
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(cache.stats().device_frees, 1);
  EXPECT_EQ(cache.allocate(3 << 20), nullptr) << "nothing idle left to free: the caller reports OOM";
  cache.deallocate(b, 2 << 20);
}

}  // namespace
}  // namespace zt::cuda
