// ComputeBackend::device_memory on a GPU (label gpu): the device's total and free memory beside
// what the caching allocator holds, the rest counted as outside it (the context, the libraries'
// handles); a 64 MiB buffer shows in the allocator's share and not outside it.
#include <algorithm>
#include <cstdlib>
#include <limits>

#include "kernels/compute_backend.h"
#include "kernels/ops.h"
#include "tests/gpu/gpu_test_util.h"

namespace zt::test {
namespace {

TEST(DeviceMemory, TheAllocatorsShareAndTheRestAddUpToWhatIsHeld) {
  ZT_SKIP_WITHOUT_GPU();
  MemoryTracker tracker;
  const ComputeBackend backend(Device::kCUDA, 1, tracker, 0);
  const nlohmann::json before = backend.device_memory();
  ASSERT_FALSE(before.empty());
  const std::int64_t total = before["total_bytes"], available = before["free_bytes"];
  EXPECT_GT(total, 0);
  EXPECT_GT(available, 0);
  EXPECT_LE(available, total);
  EXPECT_EQ(before["outside_allocator_bytes"].get<std::int64_t>(),
            total - available - before["allocator_reserved_bytes"].get<std::int64_t>());
  EXPECT_GT(before["outside_allocator_bytes"].get<std::int64_t>(), 0) << "the CUDA context at least";
  constexpr std::int64_t kBytes = 64 << 20;
  {
    const Buffer b = ops::allocate(backend.context(), tracker, MemCategory::kWorkspace, DType::kF32, kBytes / 4);
    const nlohmann::json with = backend.device_memory();
    EXPECT_GE(
        with["allocator_reserved_bytes"].get<std::int64_t>() - before["allocator_reserved_bytes"].get<std::int64_t>(),
        kBytes);
    EXPECT_GE(with["allocator_peak_reserved_bytes"].get<std::int64_t>(), kBytes);
  }
  // cudaMalloc may round and the driver may map more, but not by a second buffer's worth. The
  // device's free memory is the whole GPU's, and the GPU tests run several processes at once: one
  // of them allocating between two readings moves "outside" too, so three tries, one must hold.
  std::int64_t closest = std::numeric_limits<std::int64_t>::max();
  for (int attempt = 0; attempt < 3 && closest >= kBytes; ++attempt) {
    MemoryTracker own;
    const ComputeBackend fresh(Device::kCUDA, 1, own, 0);
    const std::int64_t outside = fresh.device_memory()["outside_allocator_bytes"].get<std::int64_t>();
    const Buffer b = ops::allocate(fresh.context(), own, MemCategory::kWorkspace, DType::kF32, kBytes / 4);
    closest =
        std::min(closest, std::abs(fresh.device_memory()["outside_allocator_bytes"].get<std::int64_t>() - outside));
  }
  EXPECT_LT(closest, kBytes) << "a 64 MiB buffer moved the memory outside the allocator in each of three tries";
}

TEST(DeviceMemory, EmptyOnTheCpu) {
  MemoryTracker tracker;
  const ComputeBackend backend(Device::kCPU, 1, tracker);
  EXPECT_TRUE(backend.device_memory().empty());
}

}  // namespace
}  // namespace zt::test
