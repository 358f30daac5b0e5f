// A StagingDevice whose "device" is host memory, with the asynchrony of a GPU's copy stream: a copy
// is only queued when asked for, and runs when a fence behind it is reached, which takes
// `fence_delay_polls` polls, or when the compute stream is made to follow the copies. So a host
// collective posted before its gate opened would read staging the copies have not filled yet, and
// a result never ordered back would never arrive: the staged path's ordering is exercised, not
// bypassed. The CPU tests and the trainer's ZT_TEST_STAGED_COLLECTIVES hook run StagedCommunicator
// over it. `stands_for` is the device whose views it stages (their memory is host memory all the
// same): the CPU by default; a test names kCUDA to tell "device" operands from host ones.
#pragma once

#include <memory>

#include "engine/distributed/comm/staging_device.h"

namespace zt {

class HostStagingDevice final : public StagingDevice {
 public:
  explicit HostStagingDevice(int fence_delay_polls = 0, Device stands_for = Device::kCPU);

  Device device() const override { return device_; }
  Buffer allocate_host(MemoryTracker& tracker, DType dtype, std::int64_t numel) override;
  void copies_follow_compute() override {}  // the CPU's "compute stream" is done when a call returns
  void copy(TensorView dst, TensorView src) override;
  std::shared_ptr<StagingFence> fence() override;
  void compute_follows_copies() override;

  // Copies asked for so far (the tests check that device operands, and only they, were staged).
  std::int64_t copies() const;

 private:
  struct CopyQueue;
  int delay_polls_;
  Device device_;
  std::shared_ptr<CopyQueue> queue_;  // shared with the fences, which run it
};

}  // namespace zt
