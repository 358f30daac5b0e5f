// CUDA stream and event owners; every call checked (ZT_CUDA_CHECK), destructors never throw.
#include "engine/base/device/cuda_stream.h"

#include "engine/base/device/cuda_check.h"

namespace zt::cuda {

CudaStream::CudaStream(int device, Priority priority) {
  ZT_CUDA_CHECK(cudaSetDevice(device));
  int least = 0, greatest = 0;  // numerically, greatest <= least
  ZT_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  ZT_CUDA_CHECK(
      cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, priority == Priority::kHigh ? greatest : least));
}

CudaStream::~CudaStream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);  // pending work still completes
}

void CudaStream::synchronize() const { ZT_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

CudaEvent::CudaEvent(bool timing) {
  ZT_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

void CudaEvent::record(cudaStream_t stream) { ZT_CUDA_CHECK(cudaEventRecord(event_, stream)); }

void CudaEvent::synchronize() const { ZT_CUDA_CHECK(cudaEventSynchronize(event_)); }

void CudaEvent::wait_on(cudaStream_t stream) const { ZT_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0)); }

float CudaEvent::elapsed_ms(const CudaEvent& start, const CudaEvent& end) {
  float ms = 0.0f;
  ZT_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, end.event_));
  return ms;
}

void copy_async(TensorView dst, TensorView src, cudaStream_t stream) {
  ZT_CHECK(dst.dtype == src.dtype && dst.numel() == src.numel(), "copy of {} {} elements into {} {}", src.numel(),
           dtype_name(src.dtype), dst.numel(), dtype_name(dst.dtype));
  if (dst.numel() == 0) return;
  ZT_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, src.size_bytes(), cudaMemcpyDefault, stream));
}

}  // namespace zt::cuda
