// GPU smoke test (label gpu): the CUDA runtime links and reports devices; skips visibly without one.
#include <gtest/gtest.h>

#include "kernels/cuda/device_query.h"
#include "tests/gpu/gpu_test_util.h"

TEST(CudaDeviceQuery, ReportsEveryDeviceByName) {
  ZT_SKIP_WITHOUT_GPU();
  const int n = zt::cuda::device_count();
  for (int i = 0; i < n; ++i) {
    const std::string desc = zt::cuda::device_description(i);
    EXPECT_NE(desc.find("sm_"), std::string::npos) << desc;
  }
}
