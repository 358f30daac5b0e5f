// Shared helpers for the CUDA kernel tests (label gpu): a fixture owning a stream, the caching
// allocator and the kernel resources, which skips visibly (GTEST_SKIP with the reason) when the
// machine has no CUDA device; uploads, downloads, and NaN-poisoned outputs so an element a kernel
// fails to write shows up as a NaN in the comparison; views at an element offset (misaligned).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <vector>

#include "engine/base/core/bf16.h"
#include "engine/base/core/buffer.h"
#include "engine/base/core/memory_tracker.h"
#include "engine/base/device/cuda_allocator.h"
#include "engine/base/device/cuda_check.h"
#include "engine/base/device/cuda_stream.h"
#include "kernels/cuda/device_query.h"
#include "kernels/cuda/kernel_resources.h"
#include "tests/kernels/kernel_test_util.h"

// Without a CUDA device a GPU test skips visibly, unless ZT_REQUIRE_GPU is set (tools/gpu_session.sh
// sets it on the lent GPU machine): there a device the runtime cannot see (a driver older than the
// toolkit, say) must fail, not pass as skips. Fatal in SetUp: the test body does not run.
#define ZT_SKIP_WITHOUT_GPU()                                                                            \
  do {                                                                                                   \
    if (::zt::cuda::device_count() == 0) {                                                               \
      if (std::getenv("ZT_REQUIRE_GPU") != nullptr) {                                                    \
        FAIL() << "ZT_REQUIRE_GPU is set but CUDA sees no device: " << ::zt::cuda::device_count_error(); \
      }                                                                                                  \
      GTEST_SKIP() << "no CUDA device on this machine (" << ::zt::cuda::device_count_error()             \
                   << "): the kernel never ran here";                                                    \
    }                                                                                                    \
  } while (0)

namespace zt::test {

class GpuKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ZT_SKIP_WITHOUT_GPU();
    stream_ = std::make_unique<cuda::CudaStream>(0);
    allocator_ = std::make_unique<cuda::CudaCachingAllocator>(0, stream_->get());
    resources_ = std::make_unique<cuda::KernelResources>(tracker_, *allocator_);
  }
  void TearDown() override {
    if (stream_) stream_->synchronize();
  }

  ExecContext gpu() { return cuda::cuda_context(stream_->get(), *resources_); }

  // A device buffer of `dtype` holding the bytes of `values` (T is the host storage type).
  template <typename T>
  Buffer upload_as(DType dtype, const std::vector<T>& values) {
    // fp32 values passed as bf16 would travel as raw half-words (NaN patterns among them): refuse.
    if (sizeof(T) != dtype_size_bytes(dtype)) {
      throw std::invalid_argument(
          fmt::format("upload_as: host elements of {} bytes for a {}-byte dtype", sizeof(T), dtype_size_bytes(dtype)));
    }
    Buffer b(tracker_, MemCategory::kWorkspace, dtype, static_cast<std::int64_t>(values.size()), *allocator_,
             /*zero_fill=*/false);
    cuda::copy_async(b.view(), TensorView{const_cast<T*>(values.data()), dtype, Device::kCPU, b.view().shape},
                     stream_->get());
    stream_->synchronize();  // `values` may be a temporary
    return b;
  }
  Buffer upload(const std::vector<float>& v) { return upload_as(DType::kF32, v); }
  Buffer upload(const std::vector<std::int32_t>& v) { return upload_as(DType::kI32, v); }
  // `values` starting at element `offset` of a fresh device buffer (the elements before are 0); see
  // view_at for the view and download_from for reading them back.
  Buffer upload_at(std::int64_t offset, const std::vector<float>& values) {
    std::vector<float> padded(static_cast<std::size_t>(offset), 0.0f);
    padded.insert(padded.end(), values.begin(), values.end());
    return upload(padded);
  }
  // fp32 values rounded to bf16 on the host (the CPU's rounding).
  Buffer upload_bf16(const std::vector<float>& values) {
    std::vector<std::uint16_t> bits(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) bits[i] = float_to_bf16(values[i]).bits;
    return upload_as(DType::kBF16, bits);
  }
  // n elements of dtype, every byte 0xFF: NaN as F32 and as BF16, so unwritten outputs fail.
  Buffer poisoned(DType dtype, std::int64_t n) {
    Buffer b(tracker_, MemCategory::kWorkspace, dtype, n, *allocator_, /*zero_fill=*/false);
    if (n > 0) ZT_CUDA_CHECK(cudaMemsetAsync(b.data(), 0xFF, static_cast<std::size_t>(b.size_bytes()), stream_->get()));
    return b;
  }
  // The buffer's bytes as T (T's size must match the dtype's).
  template <typename T>
  std::vector<T> download(const Buffer& b) {
    EXPECT_EQ(sizeof(T), dtype_size_bytes(b.dtype()));
    std::vector<T> out(static_cast<std::size_t>(b.numel()));
    cuda::copy_async(TensorView{out.data(), b.dtype(), Device::kCPU, b.view().shape}, b.view(), stream_->get());
    stream_->synchronize();
    return out;
  }
  // upload_at's bf16 twin: `values` from element `offset` of a fresh BF16 buffer (the elements
  // before are 0).
  Buffer upload_bf16_at(std::int64_t offset, const std::vector<bf16>& values) {
    std::vector<bf16> padded(static_cast<std::size_t>(offset), bf16{0});
    padded.insert(padded.end(), values.begin(), values.end());
    return upload_as(DType::kBF16, padded);
  }
  // The BF16 buffer's elements from `offset` on.
  std::vector<bf16> download_bf16_from(const Buffer& b, std::int64_t offset) {
    const std::vector<bf16> all = download<bf16>(b);
    return std::vector<bf16>(all.begin() + offset, all.end());
  }
  // The F32 buffer's elements from `offset` on.
  std::vector<float> download_from(const Buffer& b, std::int64_t offset) {
    std::vector<float> all = download<float>(b);
    return std::vector<float>(all.begin() + offset, all.end());
  }
  std::vector<float> download_f32(const Buffer& b) {
    if (b.dtype() == DType::kF32) return download<float>(b);
    std::vector<std::uint16_t> bits = download<std::uint16_t>(b);
    std::vector<float> out(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) out[i] = bf16_to_float(bf16{bits[i]});
    return out;
  }

  MemoryTracker tracker_;
  std::unique_ptr<cuda::CudaStream> stream_;
  std::unique_ptr<cuda::CudaCachingAllocator> allocator_;
  std::unique_ptr<cuda::KernelResources> resources_;
};

// `shape` over b's elements from `offset` on. The allocator's blocks are 512-byte aligned, so at
// offset 0 kernels take their 16-byte (float4) paths where the shape allows, and offset 1 forces
// their single-float fallbacks.
// Cross-entropy shapes both precisions' tests take: N rows of V real columns padded to Vp (one
// column; a padded row of one vector group; odd widths; GPT-2's vocabulary).
struct CrossEntropyShape {
  std::int64_t N;
  int V;
  std::int64_t Vp;
};
inline constexpr CrossEntropyShape kCrossEntropyShapes[] = {
    {1, 1, 1}, {3, 5, 64}, {2, 7, 8}, {5, 13, 15}, {4, 37, 37}, {17, 1000, 1024}, {8, 50257, 50304}};

inline TensorView view_at(const Buffer& b, std::int64_t offset, Shape shape) {
  TensorView v = b.view().slice(offset, shape.numel());
  v.shape = shape;
  return v;
}

// The vectors one after another: several outputs compared at once (two runs, bitwise).
inline std::vector<float> concat(std::initializer_list<std::vector<float>> parts) {
  std::vector<float> all;
  for (const std::vector<float>& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

// The CPU reference's output as fp64, for close_normwise.
inline std::vector<double> ref_of(const std::vector<float>& v) { return to_double(v); }

// Host values rounded to bf16 (the CPU's rounding), and bf16 values widened back (exact).
inline std::vector<bf16> rounded(const std::vector<float>& v) {
  std::vector<bf16> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = float_to_bf16(v[i]);
  return out;
}
inline std::vector<float> widened(const std::vector<bf16>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_float(v[i]);
  return out;
}

}  // namespace zt::test
