// Collectives between GPUs through NCCL, one rank per process and GPU, behind the Communicator
// interface. Each collective runs on the communicator's own stream: it waits (by an event) for the
// work already queued on the compute stream it is ordered against, and Work::wait makes the
// compute stream wait for its result, so the host never blocks on device data and communication
// overlaps the kernels queued in between. Buffers on the host (the trainer's loss, norms and
// checkpoint votes) are staged through device memory, and their Work::wait returns once the data
// is back on the host. Reductions are done in fp32 (a BF16 operand is cast on the communication
// stream first, and the result rounded once), average as NCCL's ncclAvg.
// Never a silent hang: a CollectiveWatchdog polls every collective's completion event and NCCL's
// asynchronous error; a collective past options().timeout_s, or an error, prints one line naming
// the collective and what the rank was doing, aborts the NCCL communicator and exits the process.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/distributed/comm/communicator.h"
#include "engine/distributed/launch/rendezvous.h"
#include "kernels/exec_context.h"

namespace zt {

class ComputeBackend;

// NCCL's unique id (128 bytes) as bytes: rank 0 makes it, a rendezvous hands it to every rank.
std::vector<std::uint8_t> make_nccl_unique_id();

class NcclCommunicator final : public Communicator {
 public:
  // Joins the NCCL communicator `unique_id` names as `rank` of `world_size` on ctx's device;
  // collectives are ordered against ctx's stream and staging comes from ctx's allocator. Set-up
  // that has not finished within options.timeout_s (a rank missing) is aborted with an error.
  NcclCommunicator(MemoryTracker& tracker, const CommOptions& options, const ExecContext& ctx, int rank, int world_size,
                   const std::vector<std::uint8_t>& unique_id);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string backend_name() const override { return "nccl"; }
  bool orders_on_device() const override { return true; }
  Work all_gather(TensorView send, TensorView recv) override;
  Work reduce_scatter(TensorView send, TensorView recv, ReduceOp op) override;
  Work all_reduce(TensorView buf, ReduceOp op) override;
  Work broadcast(TensorView buf, int root) override;
  // Grouped point-to-point sends and receives (ncclSend/ncclRecv), any dtype, as bytes.
  Work all_to_all(TensorView send, TensorView recv) override;
  void barrier() override;
  // ncclCommSplit: the ranks passing the same color, numbered by key, on the same device and
  // compute stream, with a stream and watchdog of their own (hybrid sharding's groups).
  std::unique_ptr<Communicator> split(int color, int key) override;
  // As MPI's: prints the message, aborts the NCCL communicator (releasing peers blocked in its
  // collectives, which would otherwise wait out train.collective_timeout_s) and ends the process.
  [[noreturn]] void abort_after_timeout(const std::string& message) override;

  // Keeps `owner` alive as long as this communicator (the host-side communicator of a job
  // launched without MPI owns the device context it stages through, with that context's tracker).
  void own_backend(std::shared_ptr<void> owner);

 private:
  class Collective;
  struct Impl;
  // split()'s: a communicator of `parent`'s ranks that pass `color`.
  NcclCommunicator(NcclCommunicator& parent, int color, int key);
  // The watchdog of this communicator's collectives and asynchronous errors (after set-up).
  void start_watchdog();
  // The process's live communicators, for aborting them all at once while an exception unwinds
  // ([Note: aborting every NCCL communicator at once] in the .cpp).
  struct LiveSet {
    std::mutex mutex;
    std::vector<Impl*> impls;  // in the order their set-up finished
  };
  static LiveSet& live();
  static void abort_every_communicator();
  void register_live();
  void unregister_live();
  std::shared_ptr<void> owned_backend_;  // first: destroyed after impl_ (which uses it)
  int rank_ = 0;
  int world_ = 1;
  std::unique_ptr<Impl> impl_;
};

// The communicator a run on CUDA hands its parameter store (make_device_communicator in
// communicator.h): NCCL over the same ranks as `control` (the host communicator: MPI, or the local
// world of one), which broadcasts rank 0's unique id. Ordered against ctx's stream.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& control, MemoryTracker& tracker,
                                                     const ExecContext& ctx);

// The host communicator of a job launched without MPI (ZT_RANK, torchrun's RANK, Slurm without
// PMI): NCCL on GPU local_rank (mod the devices present), through a device context of its own,
// the unique id shared by the rendezvous the environment names (file or TCP; see rendezvous.h).
std::unique_ptr<Communicator> make_launched_nccl_communicator(MemoryTracker& tracker, const CommOptions& options,
                                                              const LaunchInfo& launch);

}  // namespace zt
