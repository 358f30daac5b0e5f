// RAII owners of CUDA streams and events, and host<->device copies of TensorViews. Streams are
// created non-blocking (no implicit sync with the legacy default stream) and destroyed with
// their owner; each stream's purpose is named where it is created.
#pragma once

#include <cuda_runtime_api.h>

#include "engine/base/core/tensor.h"

namespace zt::cuda {

class CudaStream {
 public:
  // kHigh: the device's greatest stream priority, so that the scheduler starts this stream's
  // kernels ahead of queued normal-priority work (the communication stream: a collective's kernels
  // then overlap the compute kernels instead of waiting behind them).
  enum class Priority { kNormal, kHigh };
  explicit CudaStream(int device, Priority priority = Priority::kNormal);
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  cudaStream_t get() const { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

class CudaEvent {
 public:
  // Timing events record timestamps (for benchmarks); others are lighter fences between streams.
  explicit CudaEvent(bool timing = false);
  ~CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream);
  void synchronize() const;
  // Makes `stream` wait for this event's recorded work (no host sync).
  void wait_on(cudaStream_t stream) const;
  // Milliseconds between two recorded, completed timing events.
  static float elapsed_ms(const CudaEvent& start, const CudaEvent& end);

 private:
  cudaEvent_t event_ = nullptr;
};

// dst = src for same dtype and numel, either side on the host or the device (unified addressing
// picks the direction); queued on `stream`. Pageable host memory makes the call wait for the copy.
void copy_async(TensorView dst, TensorView src, cudaStream_t stream);

}  // namespace zt::cuda
