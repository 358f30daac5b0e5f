// Internal to the CUDA kernels (not part of the kernel API): the launchers' host-side helpers
// (context and view checks, grid sizes, activation dtype dispatch), and through
// device_helpers.cuh the device-side ones (bf16 conversions, fixed-order reductions, activation
// loads and stores), which kernels in *_kernels.cuh headers include alone.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "engine/base/core/check.h"
#include "engine/base/core/tensor.h"
#include "engine/base/device/cuda_check.h"
#include "kernels/contracts/activation_dtype.h"
#include "kernels/cuda/device_helpers.cuh"
#include "kernels/cuda/kernel_resources.h"
#include "kernels/exec_context.h"

namespace zt::cuda::detail {

inline cudaStream_t stream_of(const ExecContext& ctx) {
  ZT_CHECK(ctx.device == Device::kCUDA, "a CUDA kernel was given a {} context", device_name(ctx.device));
  return static_cast<cudaStream_t>(ctx.cuda_stream);
}

inline KernelResources& resources_of(const ExecContext& ctx) {
  ZT_CHECK(ctx.cuda_resources != nullptr, "CUDA kernels need ExecContext::cuda_resources");
  return *ctx.cuda_resources;
}

// Every non-empty view a CUDA kernel touches must live on the GPU.
inline void check_on_gpu(const TensorView& v, const char* name) {
  ZT_CHECK(v.data == nullptr || v.device == Device::kCUDA, "{} is on the {}, the kernel runs on the GPU", name,
           device_name(v.device));
}

// Whether p is a multiple of `bytes` (a vector access's width).
inline bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }
inline bool aligned16(const void* p) { return aligned(p, 16); }

inline unsigned int grid_for(std::int64_t n, int threads, std::int64_t max_blocks = 65535LL * 32) {
  std::int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  return static_cast<unsigned int>(blocks < max_blocks ? blocks : max_blocks);
}

// ---- Activation storage, host side (the device side is in device_helpers.cuh) ----

// The DType whose elements T stores: DTypeOf for the device storage types.
template <typename T>
constexpr DType act_dtype_of() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, __nv_bfloat16>, "activations are float or bf16");
  return std::is_same_v<T, float> ? DType::kF32 : DType::kBF16;
}

// The dtype an op's activation operands share: F32 or BF16, ignoring omitted operands (no data).
// A mix, or another dtype, fails a ZT_CHECK naming `op`. One check for both backends.
using zt::activation_dtype;

// Calls f(ActType<T>{}) with T the storage type of `dtype` (F32 or BF16, see activation_dtype):
// one launcher body serves both instantiations of a templated kernel.
template <typename T>
struct ActType {
  using type = T;
};
template <typename F>
void dispatch_activation(DType dtype, F&& f) {
  if (dtype == DType::kBF16) {
    f(ActType<__nv_bfloat16>{});
  } else {
    f(ActType<float>{});
  }
}

// The parameters' check (F32, or BF16 with BF16 activations), shared with the CPU kernels.
using zt::check_param_dtype;

// Calls f(ActType<T>{}, ActType<P>{}) for activation storage T and parameter storage P, over the
// pairs check_param_dtype admits: (float, float), (bf16, float) and (bf16, bf16), so kernels
// templated on both are instantiated for those three only.
template <typename F>
void dispatch_activation_params(DType activations, DType params, F&& f) {
  if (activations != DType::kBF16) {
    f(ActType<float>{}, ActType<float>{});
  } else if (params == DType::kBF16) {
    f(ActType<__nv_bfloat16>{}, ActType<__nv_bfloat16>{});
  } else {
    f(ActType<__nv_bfloat16>{}, ActType<float>{});
  }
}

// v's data as T, checking that T is v's dtype (TensorView::as for the device storage types).
template <typename T>
T* act_data(const TensorView& v) {
  ZT_CHECK(v.dtype == act_dtype_of<T>(), "view has dtype {}, the kernel reads {}", dtype_name(v.dtype),
           dtype_name(act_dtype_of<T>()));
  return static_cast<T*>(v.data);
}

// Whether p may take ActVec<T, kWideVec<T>>'s access: aligned to 16 bytes (4 floats, 8 bf16).
// A null pointer (an operand the launch does not have) is aligned.
template <typename T>
bool wide_vec_aligned(const T* p) {
  return aligned16(p);
}

// ---- end of activation storage ----

}  // namespace zt::cuda::detail
