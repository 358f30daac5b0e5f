// The SIMT emulator itself ([Note: SIMT emulation] in simt_runtime.h): threads that return stop
// counting at the block's barriers, shuffles exchange lanes' values, and a barrier that some
// threads never reach stops the run with a message instead of hanging; and in the
// ThreadSanitizer build, a missing barrier is reported as a data race (so a change to how the
// emulator tells ThreadSanitizer about its fibers cannot quietly stop it seeing races).
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "tests/emulation/simt/cuda_runtime.h"
#include "tests/emulation/simt_runtime.h"

namespace {

// Thread i writes i into shared memory; after the barrier, each reads its neighbour's (the
// upper half returns first: the barrier then waits for the lower half only).
void neighbours(int* out, int n) {
  auto* smem = reinterpret_cast<int*>(simt::dynamic_smem());
  const int i = static_cast<int>(threadIdx.x);
  if (i >= n) return;
  smem[i] = i + 100 * static_cast<int>(blockIdx.x);
  __syncthreads();
  out[blockIdx.x * n + i] = smem[(i + 1) % n];
}

TEST(SimtRuntime, BarriersAcrossBlocksAndReturnedThreads) {
  const int n = 40;
  std::vector<int> out(3 * n, -1);
  simt::launch(dim3(3), 64, n * sizeof(int), neighbours, out.data(), n);
  for (int b = 0; b < 3; ++b) {
    for (int i = 0; i < n; ++i) ASSERT_EQ(out[b * n + i], (i + 1) % n + 100 * b) << "block " << b << " thread " << i;
  }
  EXPECT_TRUE(simt::violations().empty());
}

void lane_xor(int* out) {
  const int lane = static_cast<int>(threadIdx.x);
  out[lane] = __shfl_xor_sync(0xffffffffu, lane * 10, 5);
}

TEST(SimtRuntime, ShuffleExchangesLanes) {
  std::vector<int> out(64, -1);
  simt::launch(dim3(1), 64, 0, lane_xor, out.data());
  for (int t = 0; t < 64; ++t) EXPECT_EQ(out[t], (t ^ 5) * 10) << "thread " << t;
}

// Lane 0 waits at its warp's barrier while every other thread waits at the block's: neither ever
// completes.
void mismatched_barriers(int*) {
  if (threadIdx.x == 0) {
    __syncwarp();
  } else {
    __syncthreads();
  }
}

TEST(SimtRuntimeDeathTest, ABarrierSomeThreadsNeverReachStopsTheRun) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(simt::launch(dim3(1), 64, 0, mismatched_barriers, static_cast<int*>(nullptr)),
               "threads wait at a barrier the others never reach");
}

#if defined(__SANITIZE_THREAD__)
// neighbours() without its barrier: each thread reads its neighbour's slot with nothing ordering
// that read after the neighbour's write.
void neighbours_without_barrier(int* out, int n) {
  auto* smem = reinterpret_cast<int*>(simt::dynamic_smem());
  const int i = static_cast<int>(threadIdx.x);
  smem[i] = i;
  out[i] = smem[(i + 1) % n];
}
#endif

TEST(SimtRuntimeDeathTest, AMissingBarrierIsADataRaceUnderThreadSanitizer) {
#if !defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the ThreadSanitizer build (tsan.*) runs this";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<int> out(64, -1);
  EXPECT_DEATH(
      {
        simt::launch(dim3(1), 64, 64 * sizeof(int), neighbours_without_barrier, out.data(), 64);
        std::_Exit(1);
      },
      "ThreadSanitizer: data race");
#endif
}

}  // namespace
