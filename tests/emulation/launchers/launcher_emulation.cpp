// The definitions the emulated launchers link against in place of the CUDA build's
// ([Note: launcher emulation] in launcher_emulation.h): KernelResources without cuBLASLt, CudaEvent
// on the host clock, and ZT_CUDA_CHECK's errors.
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/base/core/check.h"
#include "engine/base/device/cuda_check.h"
#include "engine/base/device/cuda_stream.h"

namespace zt::cuda_emu {

namespace {
// Each live event's last record (the class has no member for it); an event takes its entry away.
std::map<const CudaEvent*, std::chrono::steady_clock::time_point>& recorded_times() {
  static thread_local std::map<const CudaEvent*, std::chrono::steady_clock::time_point> times;
  return times;
}
std::chrono::steady_clock::time_point& recorded(const CudaEvent* e) { return recorded_times()[e]; }
}  // namespace

CudaEvent::CudaEvent(bool) {}
CudaEvent::~CudaEvent() { recorded_times().erase(this); }
void CudaEvent::record(cudaStream_t) { recorded(this) = std::chrono::steady_clock::now(); }
void CudaEvent::synchronize() const {}
float CudaEvent::elapsed_ms(const CudaEvent& start, const CudaEvent& end) {
  return std::chrono::duration<float, std::milli>(recorded(&end) - recorded(&start)).count();
}

namespace detail {
void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  throw_runtime_error("{}:{}: {} failed: emulated error {}", file, line, call, static_cast<int>(err));
}
void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw_runtime_error("{}:{}: {} failed: emulated status {}", file, line, call, static_cast<int>(status));
}
}  // namespace detail

}  // namespace zt::cuda_emu

#undef cuda
namespace zt::cuda {

KernelResources::KernelResources(MemoryTracker& tracker, DeviceAllocator& allocator, std::size_t)
    : tracker_(tracker), allocator_(allocator) {}
KernelResources::~KernelResources() = default;
Buffer KernelResources::scratch(DType dtype, std::int64_t numel) {
  return Buffer(tracker_, MemCategory::kWorkspace, dtype, numel, allocator_, /*zero_fill=*/false);
}
nlohmann::json KernelResources::choices_summary() const { return nlohmann::json::object(); }

}  // namespace zt::cuda
