// One launch order for every NCCL communicator of a process (internal to the NCCL backend,
// engine/distributed/comm/nccl_*.cpp).
#pragma once

#include <memory>
#include <mutex>

#include "engine/base/device/cuda_stream.h"

namespace zt {

// [Note: one launch order for all NCCL communicators]
// A process can hold several NCCL communicators on its GPU: launched without MPI, the trainer's
// control communicator (host results: losses, votes) and the parameter store's, and under hybrid
// sharding the store's group and cross-group communicators split from it, each on its own stream.
// NCCL orders nothing between communicators, and two collectives in flight at once can deadlock
// (a rank's kernel of one waits on a peer whose GPU runs the other's first); NCCL's advice is to
// keep them in separate epochs. So a collective's stream first waits for the last collective that
// another communicator of this process queued: the GPU runs them in the program's order, which
// every rank shares. With one NCCL communicator (mpirun: MPI is the control) nothing waits.
class LaunchOrder {
 public:
  void follow(const void* comm, cudaStream_t stream) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (last_ && last_comm_ != comm) last_->wait_on(stream);
  }
  void queued(const void* comm, std::shared_ptr<cuda::CudaEvent> done) {
    const std::lock_guard<std::mutex> lock(mutex_);
    last_ = std::move(done);
    last_comm_ = comm;
  }
  // A communicator going away (its stream synchronised) leaves nothing for others to wait on, and
  // no event outlives the CUDA context in a static.
  void forget(const void* comm) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (last_comm_ != comm) return;
    last_.reset();
    last_comm_ = nullptr;
  }

 private:
  std::mutex mutex_;
  std::shared_ptr<cuda::CudaEvent> last_;
  const void* last_comm_ = nullptr;
};

inline LaunchOrder& launch_order() {
  static LaunchOrder order;
  return order;
}

}  // namespace zt
