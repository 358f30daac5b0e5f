// Buffer: the one owning allocation type. It charges its bytes to a MemoryTracker category for
// its whole life, so the tracker's figures are the engine's real footprint. CPU memory is
// 64-byte aligned; device memory comes from a DeviceAllocator (the CUDA backend's caching
// allocator) through the second constructor, behind the same type and the same tracker.
#pragma once

#include <cstdint>
#include <utility>

#include "engine/base/core/device_allocator.h"
#include "engine/base/core/memory_tracker.h"
#include "engine/base/core/tensor.h"

namespace zt {

class Buffer {
 public:
  Buffer() = default;
  // Allocates numel elements of dtype, zero-filled unless `zero_fill` is false (for buffers whose
  // every element is written before it is read, such as activations).
  Buffer(MemoryTracker& tracker, MemCategory category, DType dtype, std::int64_t numel, Device device = Device::kCPU,
         bool zero_fill = true);
  // The same on the allocator's device (allocator.device()); the allocator must outlive the buffer.
  Buffer(MemoryTracker& tracker, MemCategory category, DType dtype, std::int64_t numel, DeviceAllocator& allocator,
         bool zero_fill = true);
  ~Buffer();

  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;

  bool empty() const { return data_ == nullptr; }
  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return view().as<T>();
  }
  DType dtype() const { return dtype_; }
  std::int64_t numel() const { return numel_; }
  std::int64_t size_bytes() const { return numel_ * static_cast<std::int64_t>(dtype_size_bytes(dtype_)); }
  MemCategory category() const { return category_; }
  Device device() const { return device_; }

  // The whole buffer as a 1-D view, or reshaped (numel must match).
  TensorView view() const { return TensorView{data_, dtype_, device_, Shape{numel_}}; }
  TensorView view(Shape shape) const;

  // Frees the memory and returns its bytes to the tracker.
  void reset();

 private:
  MemoryTracker* tracker_ = nullptr;
  DeviceAllocator* allocator_ = nullptr;  // null: host memory from host_alloc
  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  Device device_ = Device::kCPU;
  MemCategory category_ = MemCategory::kWorkspace;
  std::int64_t numel_ = 0;
};

}  // namespace zt
