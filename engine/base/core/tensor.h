// A non-owning view of a dense, row-major tensor: data pointer, dtype, device and shape.
// Kernels and the model pass these around; ownership lives in Buffer (buffer.h).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>

#include "engine/base/core/check.h"
#include "engine/base/core/dtype.h"

namespace zt {

class Shape {
 public:
  static constexpr int kMaxDims = 4;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims) {
    ZT_CHECK(dims.size() <= kMaxDims, "at most {} dims", kMaxDims);
    for (std::int64_t d : dims) dims_[ndim_++] = d;
  }

  int ndim() const { return ndim_; }
  std::int64_t operator[](int i) const {
    ZT_CHECK(i >= 0 && i < ndim_);
    return dims_[i];
  }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < ndim_; ++i) n *= dims_[i];
    return n;
  }
  bool operator==(const Shape& o) const {
    if (ndim_ != o.ndim_) return false;
    for (int i = 0; i < ndim_; ++i)
      if (dims_[i] != o.dims_[i]) return false;
    return true;
  }
  const std::int64_t* begin() const { return dims_.data(); }
  const std::int64_t* end() const { return dims_.data() + ndim_; }

 private:
  std::array<std::int64_t, kMaxDims> dims_{};
  int ndim_ = 0;
};

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Device device = Device::kCPU;
  Shape shape;

  std::int64_t numel() const { return shape.numel(); }
  std::size_t size_bytes() const { return static_cast<std::size_t>(numel()) * dtype_size_bytes(dtype); }

  // Typed access with a dtype check: view.as<float>() on an F32 view.
  template <typename T>
  T* as() const;

  // Elements [offset, offset + n) of the flattened view, as a 1-D view.
  TensorView slice(std::int64_t offset, std::int64_t n) const {
    ZT_CHECK(offset >= 0 && n >= 0 && offset + n <= numel(), "slice [{}, {}) of {} elements", offset, offset + n,
             numel());
    return TensorView{static_cast<char*>(data) + offset * static_cast<std::int64_t>(dtype_size_bytes(dtype)), dtype,
                      device, Shape{n}};
  }
};

template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kF32;
};
template <>
struct DTypeOf<std::int32_t> {
  static constexpr DType value = DType::kI32;
};
template <>
struct DTypeOf<std::uint16_t> {
  static constexpr DType value = DType::kU16;
};
struct bf16;
template <>
struct DTypeOf<bf16> {
  static constexpr DType value = DType::kBF16;
};

template <typename T>
T* TensorView::as() const {
  ZT_CHECK(dtype == DTypeOf<T>::value, "view has dtype {}", dtype_name(dtype));
  return static_cast<T*>(data);
}

}  // namespace zt
