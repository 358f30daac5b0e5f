// cuBLASLt handle and workspace creation; scratch buffers from the caching allocator.
#include "kernels/cuda/kernel_resources.h"

#include <nlohmann/json.hpp>

#include "engine/base/device/cublaslt_library.h"
#include "engine/base/device/cuda_check.h"

namespace zt::cuda {

KernelResources::KernelResources(MemoryTracker& tracker, DeviceAllocator& allocator, std::size_t cublas_workspace_bytes)
    : tracker_(tracker), allocator_(allocator) {
  ZT_CHECK(allocator.device() == Device::kCUDA, "KernelResources needs a CUDA allocator");
  workspace_ = Buffer(tracker_, MemCategory::kWorkspace, DType::kU16,
                      static_cast<std::int64_t>(cublas_workspace_bytes / 2), allocator_,  // U16: no byte dtype
                      /*zero_fill=*/false);
  // Last: a throw from the constructor runs no destructor, so nothing after the handle may throw.
  ZT_CUDA_CHECK(cuda::cublaslt().create(&cublaslt_));
}

KernelResources::~KernelResources() {
  if (cublaslt_ != nullptr) cuda::cublaslt().destroy(cublaslt_);
}

namespace {

const char* rows_name(NormBackwardRows rows) {
  switch (rows) {
    case NormBackwardRows::kBlock: return "block a row";
    case NormBackwardRows::kWarp: return "warp a row";
    case NormBackwardRows::kFastest: return "fastest (timed)";
  }
  return "?";
}

const char* route_name(BiasGradRoute route) {
  switch (route) {
    case BiasGradRoute::kKernels: return "kernels";
    case BiasGradRoute::kFastest: return "fastest (timed)";
    case BiasGradRoute::kEpilogue: return "epilogue";
  }
  return "?";
}

}  // namespace

nlohmann::json KernelResources::choices_summary() const {
  nlohmann::json norms = nlohmann::json::array();
  for (const auto& [key, rows] : norm_backward_choices_) {
    norms.push_back({{"norm", key[0] == 0 ? "layernorm" : "rmsnorm"},
                     {"activations", dtype_name(static_cast<DType>(key[1]))},
                     {"params", dtype_name(static_cast<DType>(key[2]))},
                     {"rows", key[3]},
                     {"cols", key[4]},
                     {"kernel", rows_name(rows)}});
  }
  nlohmann::json searches = nlohmann::json::array();
  std::int64_t not_first = 0;
  double first_ms = 0.0, kept_ms = 0.0;  // over the searches where the first ran
  for (const GemmSearch& g : gemm_searches) {
    searches.push_back({{"m", g.m},
                        {"n", g.n},
                        {"k", g.k},
                        {"trans_a", g.trans_a},
                        {"trans_b", g.trans_b},
                        {"epilogue", g.epilogue},
                        {"on_slice", g.slice},
                        {"offered", g.offered},
                        {"timed", g.timed},
                        {"kept", g.kept},
                        {"first_ms", g.first_ms},
                        {"kept_ms", g.kept_ms}});
    not_first += g.kept != 0 ? 1 : 0;
    if (g.first_ms >= 0.0f) {
      first_ms += g.first_ms;
      kept_ms += g.kept_ms;
    }
  }
  std::int64_t epilogue_won = 0;
  for (const auto& [key, epilogue] : bias_grad_in_epilogue_) epilogue_won += epilogue ? 1 : 0;
  return {{"timed_gemm_search", timed_gemm_search},
          {"gemm_configurations", gemm_algorithms_.size()},
          {"gemm_configurations_refused", refused_gemms_.size()},
          {"timed_slice_searches", timed_slice_searches},
          {"gemm_searches_kept_other_than_first", not_first},
          {"gemm_searches_first_ms", first_ms},
          {"gemm_searches_kept_ms", kept_ms},
          {"gemm_searches", searches},
          {"bias_grad_route", route_name(bias_grad_route)},
          {"bias_grad_configurations_timed", bias_grad_in_epilogue_.size()},
          {"bias_grad_configurations_epilogue_faster", epilogue_won},
          {"bias_grad_epilogue_calls", bias_grad_epilogue_calls},
          {"norm_backward_rows", rows_name(norm_backward_rows)},
          {"norm_backward_choices", norms}};
}

Buffer KernelResources::scratch(DType dtype, std::int64_t numel) {
  return Buffer(tracker_, MemCategory::kWorkspace, dtype, numel, allocator_, /*zero_fill=*/false);
}

}  // namespace zt::cuda
