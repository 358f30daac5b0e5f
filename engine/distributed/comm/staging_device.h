// What StagedCommunicator needs of the device whose memory it moves through a host communicator:
// host memory for the copies (pinned on a GPU, so copies run asynchronously), copies between it and
// the device on a copy stream of the device's own, ordered behind the compute stream, and fences on
// that stream that the host can poll. The CUDA implementation (cuda_staging_device.cpp) is the one
// for training; HostStagingDevice (host_staging_device.h) stands in for a device on the CPU, so the
// CPU tests and the trainer run the staged path's logic where no GPU is present.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/base/core/buffer.h"
#include "engine/base/core/tensor.h"

namespace zt {

struct ExecContext;  // kernels/exec_context.h

// A point on the copy stream: reached once every copy queued before it has completed.
class StagingFence {
 public:
  virtual ~StagingFence() = default;
  // Polls without blocking; throws on a device error. Called from the communication thread too.
  virtual bool reached() = 0;
};

class StagingDevice {
 public:
  virtual ~StagingDevice() = default;

  // Operands on this device are staged through the host; others are handed over as they are.
  virtual Device device() const = 0;
  // Host memory the copies run from and the host collectives read and write (category comm_buffers).
  virtual Buffer allocate_host(MemoryTracker& tracker, DType dtype, std::int64_t numel) = 0;
  // The copy stream waits for the work queued on the compute stream so far.
  virtual void copies_follow_compute() = 0;
  // dst = src (same dtype and size; one side on the host), queued on the copy stream.
  virtual void copy(TensorView dst, TensorView src) = 0;
  // The copy stream's work queued so far, as a fence the host polls.
  virtual std::shared_ptr<StagingFence> fence() = 0;
  // The compute stream waits for the copies queued so far (the host does not).
  virtual void compute_follows_copies() = 0;
};

// The staging device of a CUDA context: a high-priority copy stream on ctx's device, ordered against
// ctx's stream, and a caching allocator of pinned host memory. Refuses in a build without CUDA.
std::unique_ptr<StagingDevice> make_cuda_staging_device(const ExecContext& ctx);

}  // namespace zt
