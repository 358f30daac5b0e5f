// Buffer: tracked, aligned, zero-filled allocations (memory from the host block cache).
#include "engine/base/core/buffer.h"

#include "engine/base/core/host_allocator.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace zt {

Buffer::Buffer(MemoryTracker& tracker, MemCategory category, DType dtype, std::int64_t numel, Device device,
               bool zero_fill)
    : tracker_(&tracker), dtype_(dtype), device_(device), category_(category), numel_(numel) {
  ZT_CHECK(numel >= 0);
  ZT_CHECK(device == Device::kCPU, "device buffers take the backend's DeviceAllocator (second constructor)");
  const std::size_t bytes = static_cast<std::size_t>(size_bytes());
  if (bytes > 0) {
    data_ = host_alloc(bytes);
    if (data_ == nullptr) {
      throw_runtime_error("out of memory allocating {} for {}", format_bytes(static_cast<std::int64_t>(bytes)),
                          mem_category_name(category));
    }
    if (zero_fill) std::memset(data_, 0, bytes);
  }
  tracker_->charge(category_, size_bytes());
}

Buffer::Buffer(MemoryTracker& tracker, MemCategory category, DType dtype, std::int64_t numel,
               DeviceAllocator& allocator, bool zero_fill)
    : tracker_(&tracker),
      allocator_(&allocator),
      dtype_(dtype),
      device_(allocator.device()),
      category_(category),
      numel_(numel) {
  ZT_CHECK(numel >= 0);
  const std::size_t bytes = static_cast<std::size_t>(size_bytes());
  if (bytes > 0) {
    data_ = allocator.allocate(bytes);  // throws RuntimeError naming the size when the device is full
    if (zero_fill) {
      try {
        allocator.fill_zero(data_, bytes);
      } catch (...) {  // the destructor does not run for a constructor that throws
        allocator.deallocate(data_, bytes);
        throw;
      }
    }
  }
  tracker_->charge(category_, size_bytes());
}

Buffer::~Buffer() { reset(); }

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    tracker_ = std::exchange(o.tracker_, nullptr);
    allocator_ = std::exchange(o.allocator_, nullptr);
    data_ = std::exchange(o.data_, nullptr);
    dtype_ = o.dtype_;
    device_ = o.device_;
    category_ = o.category_;
    numel_ = std::exchange(o.numel_, 0);
  }
  return *this;
}

TensorView Buffer::view(Shape shape) const {
  ZT_CHECK(shape.numel() == numel_, "reshape of {} elements to {}", numel_, shape.numel());
  return TensorView{data_, dtype_, device_, shape};
}

void Buffer::reset() {
  if (tracker_ != nullptr) tracker_->release(category_, size_bytes());
  if (allocator_ != nullptr) {
    if (data_ != nullptr) allocator_->deallocate(data_, static_cast<std::size_t>(size_bytes()));
  } else {
    host_free(data_, static_cast<std::size_t>(size_bytes()));
  }
  data_ = nullptr;
  tracker_ = nullptr;
  allocator_ = nullptr;
  numel_ = 0;
}

}  // namespace zt
