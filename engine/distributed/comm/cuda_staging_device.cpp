// The staging device of a CUDA context (StagedCommunicator's, comm.backend = "mpi"): a high-priority
// copy stream on the context's GPU, ordered against the compute stream by events, and pinned host
// staging from a caching allocator.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <memory>

#include "engine/base/core/check.h"
#include "engine/base/device/cuda_check.h"
#include "engine/base/device/cuda_stream.h"
#include "engine/base/device/pinned_host_allocator.h"
#include "engine/distributed/comm/staging_device.h"
#include "kernels/exec_context.h"

namespace zt {

namespace {

class CudaFence final : public StagingFence {
 public:
  CudaFence(cudaStream_t stream, int device) : device_(device) { event_.record(stream); }
  bool reached() override {
    // Polled on the MPI progress thread too: its CUDA calls must use this rank's device, not the
    // runtime's default device 0 (a context there on a machine of several GPUs).
    thread_local int selected = -1;
    if (selected != device_) {
      ZT_CUDA_CHECK(cudaSetDevice(device_));
      selected = device_;
    }
    const cudaError_t state = cudaEventQuery(event_.get());
    if (state == cudaErrorNotReady) return false;
    ZT_CUDA_CHECK(state);
    return true;
  }

 private:
  int device_;
  cuda::CudaEvent event_;
};

class CudaStagingDevice final : public StagingDevice {
 public:
  CudaStagingDevice(cudaStream_t compute, int device)
      : compute_(compute), device_(device), copies_(device, cuda::CudaStream::Priority::kHigh) {}

  // The copy stream may still read or fill staging: nothing it queued may outlive the pinned blocks.
  // A failed synchronisation (a device fault) is said: the pinned blocks are freed after it anyway.
  ~CudaStagingDevice() override {
    if (const cudaError_t e = cudaStreamSynchronize(copies_.get()); e != cudaSuccess) {
      std::fprintf(stderr, "zerotrain: the staging copies' stream failed at shutdown: %s\n", cudaGetErrorString(e));
    }
  }

  Device device() const override { return Device::kCUDA; }

  Buffer allocate_host(MemoryTracker& tracker, DType dtype, std::int64_t numel) override {
    return Buffer(tracker, MemCategory::kCommBuffers, dtype, numel, pinned_, /*zero_fill=*/false);
  }

  void copies_follow_compute() override { order(compute_, copies_.get()); }
  void copy(TensorView dst, TensorView src) override { cuda::copy_async(dst, src, copies_.get()); }
  std::shared_ptr<StagingFence> fence() override { return std::make_shared<CudaFence>(copies_.get(), device_); }
  void compute_follows_copies() override { order(copies_.get(), compute_); }

 private:
  // `later` waits for the work queued on `earlier` so far (no host wait).
  static void order(cudaStream_t earlier, cudaStream_t later) {
    cuda::CudaEvent point;
    point.record(earlier);
    point.wait_on(later);  // the event may be destroyed now: the wait keeps what it recorded
  }

  cudaStream_t compute_;
  int device_;
  cuda::PinnedHostAllocator pinned_;  // before copies_: destroyed after the stream is synchronised
  cuda::CudaStream copies_;
};

}  // namespace

std::unique_ptr<StagingDevice> make_cuda_staging_device(const ExecContext& ctx) {
  ZT_CHECK(ctx.device == Device::kCUDA && ctx.cuda_stream != nullptr, "the staged communicator needs a CUDA context");
  int device = 0;
  ZT_CUDA_CHECK(cudaGetDevice(&device));  // the compute backend selected it
  return std::make_unique<CudaStagingDevice>(static_cast<cudaStream_t>(ctx.cuda_stream), device);
}

}  // namespace zt
