// Collectives on device memory through a host communicator (MPI): several ranks on one GPU, where
// NCCL refuses (comm.backend = "mpi" with device = "cuda"). For each collective the device operands
// are copied into host staging on the device's copy stream, behind the work the compute stream has
// queued; the host collective is handed to the wire only once those copies have landed (hold_until,
// polled on the host backend's progress thread, so the caller does not block); and Work::wait, once
// the host collective is done, queues the copies of the results back and makes the compute stream
// wait for them. It serves ZeroParamStore exactly as NcclCommunicator does: the same calls, the same
// waits, results ordered on the compute stream by events. Reductions are the host backend's (fp32,
// in rank order under train.deterministic), so stages agree bitwise as they do on the CPU.
//
// [Note: staging reuse without fences]
// Staging is returned to its pool as soon as a Work completes, although the copy of its result to
// the device may still be queued. That is safe because every copy runs on the one copy stream, and a
// host collective touches its staging only after its own gate fence, recorded on that stream after
// its input copies: by then every earlier copy, and so every read of a reused block, has finished.
//
// Host staging and the host backend's own buffers are charged to this communicator's tracker
// (host_staging()), not the run's: the run's categories measure the device, as with NCCL.
#pragma once

#include <functional>
#include <memory>

#include "engine/distributed/comm/communicator.h"
#include "engine/distributed/comm/staging_device.h"

namespace zt {

class StagedCommunicator final : public Communicator {
 public:
  // `make_host` builds the host communicator over the job's ranks, charging the tracker it is given.
  using HostFactory = std::function<std::unique_ptr<Communicator>(MemoryTracker& staging)>;
  StagedCommunicator(const HostFactory& make_host, std::unique_ptr<StagingDevice> device);
  ~StagedCommunicator() override;

  int rank() const override { return host_->rank(); }
  int world_size() const override { return host_->world_size(); }
  std::string backend_name() const override { return host_->backend_name() + " (staged through host memory)"; }
  Work all_gather(TensorView send, TensorView recv) override;
  Work all_to_all(TensorView send, TensorView recv) override;
  Work reduce_scatter(TensorView send, TensorView recv, ReduceOp op) override;
  Work all_reduce(TensorView buf, ReduceOp op) override;
  Work broadcast(TensorView buf, int root) override;
  void barrier() override { host_->barrier(); }
  void abort_after_timeout(const std::string& message) override { host_->abort_after_timeout(message); }
  // The host backend runs the collectives: its waits quote the context and keep the options.
  void set_context(std::string context) override;
  void set_options(const CommOptions& options) override;

  // Host memory the collectives staged through (and the host backend's own buffers), per category.
  const MemoryTracker& host_staging() const { return staging_tracker_; }

 private:
  class Collective;
  MemoryTracker staging_tracker_;  // first: the host backend and the staging charge it until the end
  std::unique_ptr<StagingDevice> device_;
  std::unique_ptr<Communicator> host_;
};

}  // namespace zt
