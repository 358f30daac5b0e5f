// Element types the engine stores, and where a buffer lives. Sizes and names are used by the
// memory tracker, the tensor views and the safetensors writer alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace zt {

enum class DType : std::uint8_t { kF32, kBF16, kI32, kU16 };

constexpr std::size_t dtype_size_bytes(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kU16: return 2;
  }
  return 0;
}

// The names safetensors uses ("F32", "BF16", "I32", "U16").
constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kI32: return "I32";
    case DType::kU16: return "U16";
  }
  return "?";
}

enum class Device : std::uint8_t { kCPU, kCUDA };

constexpr std::string_view device_name(Device d) { return d == Device::kCPU ? "cpu" : "cuda"; }

// How the GPU multiplies fp32 matrices (precision.matmul): exactly in FP32; on tensor cores with
// TF32 inputs (10-bit mantissas); or on tensor cores with the inputs rounded to bf16 (as PyTorch's
// autocast does at each matmul), both accumulating in fp32 into fp32 results. The CPU is always
// FP32.
enum class MatmulPrecision : std::uint8_t { kFp32, kTf32, kBf16 };

constexpr std::string_view matmul_precision_name(MatmulPrecision p) {
  return p == MatmulPrecision::kFp32 ? "fp32" : p == MatmulPrecision::kTf32 ? "tf32" : "bf16";
}

// Which kernels run the fused causal attention on the GPU (precision.attention): kAuto takes cuDNN's
// fused attention wherever it serves (kernels/cuda/cudnn_attention.h) and the project's flash
// kernels elsewhere; kCudnn insists on cuDNN (a run it cannot serve stops at start); kFlash always
// takes the flash kernels. The CPU has one attention (materialised) and takes kAuto only.
enum class AttentionKernels : std::uint8_t { kAuto, kCudnn, kFlash };

constexpr std::string_view attention_kernels_name(AttentionKernels a) {
  return a == AttentionKernels::kAuto ? "auto" : a == AttentionKernels::kCudnn ? "cudnn" : "flash";
}

}  // namespace zt
