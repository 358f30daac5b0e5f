// The interface a non-CPU backend implements so Buffer can own its memory: the CUDA backend's
// caching allocator (engine/base/device/cuda_allocator.h) is the one implementation. Buffer still
// charges the MemoryTracker itself, so device bytes land in the same categories as host bytes.
#pragma once

#include <cstddef>

#include "engine/base/core/dtype.h"

namespace zt {

class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  virtual Device device() const = 0;
  // At least `bytes` bytes, 256-byte aligned; throws RuntimeError when the device is out of memory.
  virtual void* allocate(std::size_t bytes) = 0;
  // Gives back a block from allocate() with the same `bytes`; must not throw (destructors call it).
  virtual void deallocate(void* block, std::size_t bytes) noexcept = 0;
  // Zeroes `bytes` bytes at `block`, ordered before any later work the allocator's users submit.
  virtual void fill_zero(void* block, std::size_t bytes) = 0;
};

}  // namespace zt
