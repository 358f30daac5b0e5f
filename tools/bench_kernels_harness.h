// zt_bench_kernels' harness (tools/bench_kernels.cpp): its device buffers of random values, and
// the timing of a case (CUDA events: warm-up runs, then the median of timed runs).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/base/core/bf16.h"
#include "engine/base/core/buffer.h"
#include "engine/base/device/cuda_allocator.h"
#include "engine/base/device/cuda_check.h"
#include "engine/base/device/cuda_stream.h"
#include "kernels/cuda/kernel_resources.h"

namespace zt::bench {

struct Result {
  std::string name;
  double median_ms;
  double bytes;  // memory traffic the kernel cannot avoid (0 for compute-bound products)
  double flops;  // for products
};

class Bench {
 public:
  Bench() : stream_(0), alloc_(0, stream_.get()), res_(tracker_, alloc_) {}
  ExecContext ctx() { return cuda::cuda_context(stream_.get(), res_); }
  // Every buffer holds uniform random values in [-1, 1) (bf16: rounded on the host), a stream of its
  // own per buffer: constant or periodic bytes would flatter the kernels (less bit toggling, so
  // higher clocks under the power limit; shortcuts on zeros) and never hold a NaN.
  Buffer buf(DType t, std::int64_t n) {
    Buffer b(tracker_, MemCategory::kWorkspace, t, n, alloc_, /*zero_fill=*/false);
    fill_random(b, ++buffers_made_);
    return b;
  }
  Buffer tokens(std::int64_t n, int vocab) {
    std::vector<std::int32_t> host(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) host[i] = static_cast<std::int32_t>((i * 2654435761u) % vocab);
    Buffer b(tracker_, MemCategory::kWorkspace, DType::kI32, n, alloc_, false);
    cuda::copy_async(b.view(), TensorView{host.data(), DType::kI32, Device::kCPU, Shape{n}}, stream_.get());
    stream_.synchronize();
    return b;
  }
  // Median of `reps` timed runs after `warmup` untimed ones.
  double time_ms(const std::function<void()>& fn, int warmup = 5, int reps = 30) {
    for (int i = 0; i < warmup; ++i) fn();
    std::vector<float> ms;
    cuda::CudaEvent start(true), end(true);
    for (int i = 0; i < reps; ++i) {
      start.record(stream_.get());
      fn();
      end.record(stream_.get());
      end.synchronize();
      ms.push_back(cuda::CudaEvent::elapsed_ms(start, end));
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
  cudaStream_t stream() { return stream_.get(); }

 private:
  // splitmix64 of (stream, index): cheap, and each element independent of the chunking.
  static float uniform_pm1(std::uint64_t stream, std::uint64_t i) {
    std::uint64_t z = (stream << 40) + i + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return static_cast<float>(z >> 40) * 0x1p-23f - 1.0f;  // 24 random bits -> [-1, 1)
  }
  void fill_random(Buffer& b, std::uint64_t stream) {
    ZT_CHECK(b.dtype() == DType::kF32 || b.dtype() == DType::kBF16, "bench buffers are F32 or BF16");
    constexpr std::int64_t kChunk = 1 << 20;
    std::vector<float> f32(kChunk);
    std::vector<bf16> b16(b.dtype() == DType::kBF16 ? kChunk : 0);
    for (std::int64_t off = 0; off < b.numel(); off += kChunk) {
      const std::int64_t n = std::min(kChunk, b.numel() - off);
      for (std::int64_t i = 0; i < n; ++i) f32[i] = uniform_pm1(stream, static_cast<std::uint64_t>(off + i));
      const bool is_f32 = b.dtype() == DType::kF32;
      if (!is_f32)
        for (std::int64_t i = 0; i < n; ++i) b16[i] = float_to_bf16(f32[i]);
      cuda::copy_async(b.view().slice(off, n),
                       TensorView{is_f32 ? static_cast<void*>(f32.data()) : static_cast<void*>(b16.data()), b.dtype(),
                                  Device::kCPU, Shape{n}},
                       stream_.get());
      stream_.synchronize();  // the host chunk is rewritten next round
    }
  }
  std::uint64_t buffers_made_ = 0;
  MemoryTracker tracker_;
  cuda::CudaStream stream_;
  cuda::CudaCachingAllocator alloc_;
  cuda::KernelResources res_;
};

}  // namespace zt::bench
