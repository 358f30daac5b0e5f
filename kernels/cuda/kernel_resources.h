// What the CUDA kernels need beyond their arguments, created once per device and stream and
// handed to them through ExecContext::cuda_resources: the cuBLASLt handle, its workspace (sized
// once, so no kernel allocates in the step loop), and tracked transient scratch.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include <nlohmann/json_fwd.hpp>  // choices_summary; the full header costs every .cu ~3 s (parsed thrice)

#include <cublasLt.h>

#include "engine/base/core/buffer.h"
#include "engine/base/core/device_allocator.h"
#include "engine/base/core/memory_tracker.h"
#include "kernels/cuda/norm_backward_rows.h"
#include "kernels/exec_context.h"

namespace zt::cuda {

// cuBLASLt's recommended workspace for Hopper is 32 MiB (more lets it pick split-K kernels).
constexpr std::size_t kDefaultCublasWorkspaceBytes = static_cast<std::size_t>(kCublasWorkspaceBytes);

struct CudnnAttentionPlans;  // kernels/cuda/cudnn_attention.cpp: cuDNN's handle and graphs

enum class BiasGradRoute { kKernels, kFastest, kEpilogue };

class KernelResources {
 public:
  // `allocator` serves the workspace and every scratch buffer; it must order its reuse on the
  // stream the kernels run on ([Note: stream-ordered reuse] in engine/base/device/cuda_allocator.h).
  KernelResources(MemoryTracker& tracker, DeviceAllocator& allocator,
                  std::size_t cublas_workspace_bytes = kDefaultCublasWorkspaceBytes);
  ~KernelResources();
  KernelResources(const KernelResources&) = delete;
  KernelResources& operator=(const KernelResources&) = delete;

  cublasLtHandle_t cublaslt() const { return cublaslt_; }
  void* cublas_workspace() const { return workspace_.data(); }
  std::size_t cublas_workspace_bytes() const { return static_cast<std::size_t>(workspace_.size_bytes()); }

  // Scratch for the duration of one kernel call (e.g. LayerNorm's per-chunk partial sums), charged
  // to MemCategory::kWorkspace while held and then returned to the allocator's cache. Not zeroed.
  Buffer scratch(DType dtype, std::int64_t numel);
  DeviceAllocator& allocator() const { return allocator_; }

  // How fp32 matrix products run (engine/base/core/dtype.h): kFp32 by default, so the fp32 GPU path
  // tracks the CPU within ~1e-5; kTf32 (~1e-3 relative) and kBf16 (~4e-3) trade that for tensor
  // cores. kTf32 applies to every cuBLASLt product, kBf16 to the linear layers (cuda::matmul_*).
  MatmulPrecision fp32_matmuls = MatmulPrecision::kFp32;

  // Which kernels run the fused attention (precision.attention; kernels/cuda/cuda_backend.cpp
  // decides per call).
  AttentionKernels attention = AttentionKernels::kAuto;
  // Whether ops::matmul_gelu_forward / matmul_backward_through_gelu run the GELU in cuBLASLt's
  // epilogue (precision.gelu_epilogue) or as the separate kernels, which the CPU matches bit for bit.
  bool gelu_epilogue = false;
  // Whether cuDNN's attention backward takes its deterministic algorithm (train.deterministic; runs
  // repeat bit for bit) or its default, which adds dK and dV by atomics in any order (faster: the
  // deterministic one measured 4.2 ms of a 34 ms GPT-2 step on an H100). The kernel tests keep it.
  bool deterministic_attention = true;
  // [Note: timed algorithm search] (lt_gemm.cu): the first call of each product configuration
  // times cuBLASLt's candidate algorithms on its own operands and keeps the fastest, where false
  // keeps the heuristic's first (reproducible: the timed choice may differ between runs, and with
  // it the rounding). Off unless train.deterministic is (ComputeBackend); the kernel tests keep it off.
  bool timed_gemm_search = false;
  // The most output the timed search copies into scratch to time a product that adds into it
  // ([Note: timed algorithm search]); larger outputs are timed on a slice of their columns. A
  // member so the GPU tests can make small products take the slice.
  std::int64_t timed_scratch_limit_bytes = kTimedScratchLimitBytes;
  std::int64_t timed_slice_searches = 0;  // configurations timed on a slice (tests)
  // What each timed search found, in the order searched, for op_profile.json: the shape, how many
  // candidates the heuristic offered and how many ran, the index kept (0: the heuristic's first,
  // what a run without the search takes) and the best time of the first and of the kept one
  // (-1 where the first refused the operands), so a profile says what the search gives back.
  struct GemmSearch {
    std::int64_t m, n, k;
    bool trans_a, trans_b, slice;
    int epilogue, offered, timed, kept;
    float first_ms, kept_ms;
  };
  std::vector<GemmSearch> gemm_searches;
  std::int64_t norm_rows_timings = 0;  // norm backward shapes whose two kernels were timed (tests)
  // Where the linear layers' bias gradients are summed ([Note: the bias gradient in the weight
  // product] in bias_grad.cu): the two-stage kernels (reproducible; the default), the faster of
  // those and cuBLASLt's epilogue on the weight-gradient product as timed once per configuration
  // (set with timed_gemm_search), or the epilogue wherever cuBLASLt offers it (tests).
  BiasGradRoute bias_grad_route = BiasGradRoute::kKernels;
  std::int64_t bias_grad_epilogue_calls = 0;  // bias gradients the epilogue summed (tests, benchmark)
  // Which chunk kernel the models' LayerNorm and RMSNorm backwards run (NormBackwardRows): the
  // block a row (reproducible; the default), or kFastest, set with timed_gemm_search ([Note: the
  // norm backward's kernel, timed] in norm_rows_choice.cpp).
  NormBackwardRows norm_backward_rows = NormBackwardRows::kBlock;
  // What the run chose by timing so far, for op_profile.json: the routes asked for, how many
  // product configurations and which norm kernels and bias-gradient routes were chosen.
  nlohmann::json choices_summary() const;

  // cuDNN's handle and attention graphs, made on first use (kernels/cuda/cudnn_attention.cpp).
  std::shared_ptr<CudnnAttentionPlans> cudnn_attention_plans;

  // cuBLASLt's heuristic choice per product configuration (lt_gemm.cu builds the key from every
  // value its descriptors and preferences are made of): asked once per configuration, as a step
  // repeats the same few dozen shapes and the query costs tens of microseconds of host time.
  using GemmKey = std::array<std::int64_t, 23>;
  std::map<GemmKey, cublasLtMatmulAlgo_t>& gemm_algorithms() { return gemm_algorithms_; }
  // Configurations cuBLASLt refused (no algorithm, or the kept one refused the operands) for a
  // product that has a fallback (the residual in the epilogue): later calls take the fallback at
  // once instead of asking the heuristic again on every call.
  std::set<GemmKey>& refused_gemms() { return refused_gemms_; }
  // BiasGradRoute::kFastest's choice per weight-gradient product configuration (true: the epilogue).
  std::map<GemmKey, bool>& bias_grad_in_epilogue() { return bias_grad_in_epilogue_; }
  // NormBackwardRows::kFastest's choice per norm backward shape: {norm, activation and parameter
  // dtypes, rows, columns}.
  using NormRowsKey = std::array<std::int64_t, 5>;
  std::map<NormRowsKey, NormBackwardRows>& norm_backward_choices() { return norm_backward_choices_; }

 private:
  MemoryTracker& tracker_;
  DeviceAllocator& allocator_;
  cublasLtHandle_t cublaslt_ = nullptr;
  Buffer workspace_;
  std::map<GemmKey, cublasLtMatmulAlgo_t> gemm_algorithms_;
  std::set<GemmKey> refused_gemms_;
  std::map<GemmKey, bool> bias_grad_in_epilogue_;
  std::map<NormRowsKey, NormBackwardRows> norm_backward_choices_;
};

// The ExecContext for CUDA kernels on `stream` with these resources.
inline ExecContext cuda_context(void* stream, KernelResources& resources) {
  ExecContext ctx;
  ctx.device = Device::kCUDA;
  ctx.cuda_stream = stream;
  ctx.cuda_resources = &resources;
  ctx.allocator = &resources.allocator();
  return ctx;
}

}  // namespace zt::cuda
