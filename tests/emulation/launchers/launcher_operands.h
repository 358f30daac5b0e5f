// The launcher emulation tests' operands and fixture ([Note: launcher emulation] in
// launcher_emulation.h): host memory at a chosen offset from 16-byte alignment, viewed as the
// device's for the emulated launchers and as the host's for the CPU kernels.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/base/core/bf16.h"
#include "engine/base/core/memory_tracker.h"
#include "engine/base/core/tensor.h"

namespace zt::emulation {

// Operands in host memory, `offset` elements past a 256-byte boundary, as a view the CUDA
// launchers take for the device's (Device::kCUDA) or the CPU kernels take (kCPU). A new one holds
// zeros (its storage is value-initialised): gradients the kernels add into start from it.
class Operand {
 public:
  Operand(DType dtype, Shape shape, int offset = 0)
      : dtype_(dtype), shape_(shape), offset_(offset), storage_(static_cast<std::size_t>(bytes() + 512)) {}
  static Operand random(DType dtype, Shape shape, std::mt19937& rng, int offset = 0, float scale = 1.0f) {
    Operand o(dtype, shape, offset);
    std::normal_distribution<float> normal(0.0f, scale);
    for (std::int64_t i = 0; i < o.numel(); ++i) o.set(i, normal(rng));
    return o;
  }
  std::int64_t numel() const { return shape_.numel(); }
  TensorView view(Device device) { return TensorView{data(), dtype_, device, shape_}; }
  TensorView gpu() { return view(Device::kCUDA); }
  TensorView cpu() { return view(Device::kCPU); }
  Operand copy() const {
    Operand o(dtype_, shape_, offset_);
    std::memcpy(o.data(), const_cast<Operand*>(this)->data(), static_cast<std::size_t>(bytes()));
    return o;
  }
  float get(std::int64_t i) {
    if (dtype_ == DType::kBF16) return bf16_to_float(static_cast<bf16*>(data())[i]);
    if (dtype_ == DType::kI32) return static_cast<float>(static_cast<std::int32_t*>(data())[i]);
    return static_cast<float*>(data())[i];
  }
  void set(std::int64_t i, float v) {
    if (dtype_ == DType::kBF16) {
      static_cast<bf16*>(data())[i] = float_to_bf16(v);
    } else if (dtype_ == DType::kI32) {
      static_cast<std::int32_t*>(data())[i] = static_cast<std::int32_t>(v);
    } else {
      static_cast<float*>(data())[i] = v;
    }
  }
  DType dtype() const { return dtype_; }

 private:
  std::int64_t bytes() const { return numel() * static_cast<std::int64_t>(dtype_size_bytes(dtype_)); }
  void* data() {
    const auto base = reinterpret_cast<std::uintptr_t>(storage_.data());
    return reinterpret_cast<void*>((base + 255) / 256 * 256 + offset_ * dtype_size_bytes(dtype_));
  }
  DType dtype_;
  Shape shape_;
  int offset_;
  std::vector<std::uint8_t> storage_;
};

// |got - want| <= abs + rel |want| element by element: by default 1e-5 each with F32 operands,
// 2^-7 and 1e-3 with a BF16 one (a rounding on either side, sums in another order).
inline void expect_close(Operand& got, Operand& want, const std::string& what, double rel = -1.0, double abs = -1.0) {
  const bool bf16 = got.dtype() == DType::kBF16 || want.dtype() == DType::kBF16;
  if (rel < 0.0) rel = bf16 ? 1.0 / 128 : 1e-5;
  if (abs < 0.0) abs = bf16 ? 1e-3 : 1e-5;
  ASSERT_EQ(got.numel(), want.numel()) << what;
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.get(i), w = want.get(i);
    ASSERT_LE(std::abs(g - w), abs + rel * std::abs(w)) << what << " element " << i << ": " << g << " against " << w;
  }
}

class EmulatedLaunchers : public ::testing::Test {
 protected:
  EmulatedLaunchers() : resources_(tracker_, allocator_, 0), gpu_(cuda::cuda_context(nullptr, resources_)) {
    cpu_.num_threads = 1;
  }
  MemoryTracker tracker_;
  emulation::HostAsDevice allocator_;
  cuda::KernelResources resources_;
  ExecContext gpu_, cpu_;
  std::mt19937 rng_{std::random_device{}()};
};

}  // namespace zt::emulation
