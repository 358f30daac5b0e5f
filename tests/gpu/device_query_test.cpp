// GPU smoke test (label gpu): the CUDA runtime links and reports devices; skips visibly without one.
#include <gtest/gtest.h>

#include "kernels/cuda/device_query.h"

TEST(CudaDeviceQuery, ReportsEveryDeviceByName) {
  const int n = zt::cuda::device_count();
  if (n == 0) GTEST_SKIP() << "no CUDA device on this machine";
  for (int i = 0; i < n; ++i) {
    const std::string desc = zt::cuda::device_description(i);
    EXPECT_NE(desc.find("sm_"), std::string::npos) << desc;
  }
}
