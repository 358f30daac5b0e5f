// cuBLASLt opened on first use (engine/base/device/cublaslt_library): on the host, no GPU needed
// (label cpu, CUDA builds). A process that never asks for it does not carry the library (its
// start no longer pays the loader's pass over ~540 MB); the first call opens it and finds every
// entry point the kernels use; the functions are the library's own.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "engine/base/device/cublaslt_library.h"

namespace zt::cuda {
namespace {

// Whether libcublasLt is mapped into this process (/proc/self/maps).
bool mapped() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("libcublasLt") != std::string::npos) return true;
  }
  return false;
}

TEST(CublasLtLibrary, AbsentUntilFirstUseThenEveryEntryPointResolved) {
  // ctest runs each case in its own process; a run of the whole binary may have opened it before.
  if (cublaslt_opened()) GTEST_SKIP() << "an earlier test in this process opened cuBLASLt";
  EXPECT_FALSE(mapped()) << "libcublasLt is in the process before anything asked for it (linked again?)";

  const CublasLt& lt = cublaslt();
  EXPECT_TRUE(cublaslt_opened());
  EXPECT_TRUE(mapped());
  const void* entries[] = {reinterpret_cast<const void*>(lt.create),
                           reinterpret_cast<const void*>(lt.destroy),
                           reinterpret_cast<const void*>(lt.get_status_name),
                           reinterpret_cast<const void*>(lt.get_status_string),
                           reinterpret_cast<const void*>(lt.matmul),
                           reinterpret_cast<const void*>(lt.matmul_desc_create),
                           reinterpret_cast<const void*>(lt.matmul_desc_destroy),
                           reinterpret_cast<const void*>(lt.matmul_desc_set_attribute),
                           reinterpret_cast<const void*>(lt.matrix_layout_create),
                           reinterpret_cast<const void*>(lt.matrix_layout_destroy),
                           reinterpret_cast<const void*>(lt.matrix_layout_set_attribute),
                           reinterpret_cast<const void*>(lt.matmul_preference_create),
                           reinterpret_cast<const void*>(lt.matmul_preference_destroy),
                           reinterpret_cast<const void*>(lt.matmul_preference_set_attribute),
                           reinterpret_cast<const void*>(lt.matmul_algo_get_heuristic),
                           reinterpret_cast<const void*>(lt.matmul_algo_check),
                           reinterpret_cast<const void*>(lt.matmul_algo_cap_get_attribute),
                           reinterpret_cast<const void*>(lt.get_version)};
  static_assert(sizeof entries == sizeof(CublasLt), "a CublasLt entry point the test does not check");
  for (const void* p : entries) EXPECT_NE(p, nullptr);
  EXPECT_EQ(&cublaslt(), &lt);  // opened once

  // The library's own functions, callable without a device: status names, and descriptors
  // (host objects) created, set and destroyed.
  EXPECT_STREQ(lt.get_status_name(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
  // The version a deterministic run records (cuda_kernels_identity): the toolkit's own major.
  EXPECT_EQ(lt.get_version() / 10000, static_cast<std::size_t>(CUBLAS_VER_MAJOR));
  cublasLtMatrixLayout_t layout = nullptr;
  ASSERT_EQ(lt.matrix_layout_create(&layout, CUDA_R_16BF, 64, 32, 64), CUBLAS_STATUS_SUCCESS);
  const std::int32_t batch = 3;
  EXPECT_EQ(lt.matrix_layout_set_attribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(lt.matrix_layout_destroy(layout), CUBLAS_STATUS_SUCCESS);
}

}  // namespace
}  // namespace zt::cuda
