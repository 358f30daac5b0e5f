// Collectives between processes through OpenMPI (one rank per process, started by mpirun). Every
// operation is non-blocking (MPI-3 I-collectives), progressed by a CommWorker thread so that it
// moves while the caller computes, and waited through Work::wait's polling with a deadline, so
// a rank that dies or never arrives turns into a one-line error on every other rank and an abort
// of the job, never a silent hang. BF16 data travels as fp32 for reductions (MPI has no bf16).
#pragma once

#include <mpi.h>

#include <memory>
#include <mutex>

#include "engine/distributed/comm/comm_worker.h"
#include "engine/distributed/comm/communicator.h"

namespace zt {

class MpiCommunicator final : public Communicator {
 public:
  // Initialises MPI if nobody did (and then finalises it on destruction).
  MpiCommunicator(MemoryTracker& tracker, const CommOptions& options);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string backend_name() const override { return "mpi"; }
  Work all_gather(TensorView send, TensorView recv) override;
  Work reduce_scatter(TensorView send, TensorView recv, ReduceOp op) override;
  Work all_reduce(TensorView buf, ReduceOp op) override;
  Work broadcast(TensorView buf, int root) override;
  Work all_to_all(TensorView send, TensorView recv) override;
  void barrier() override;
  // MPI_Comm_split of this communicator: a communicator of its own (with its own progress thread).
  std::unique_ptr<Communicator> split(int color, int key) override;
  // With the progress thread: a gate in the posting queue, which holds back every later collective
  // until `ready` (polled there) returns true.
  void hold_until(std::function<bool()> ready) override;
  // Prints the message and aborts the whole job (the other ranks may be blocked in the collective).
  void abort_after_timeout(const std::string& message) override;
  // Also for the collectives in flight: once it returns, none reports to the profiler it replaces
  // (a run unwinding on an error destroys its profiler while its last collectives may finish).
  void set_profiler(OpProfiler* profiler) override;

 private:
  // Over `comm` (adopted: freed on destruction), in an MPI another communicator initialised.
  MpiCommunicator(MemoryTracker& tracker, const CommOptions& options, MPI_Comm comm);
  // Wraps an advance function so that a timeout prints the error and aborts the whole job.
  Work make_work(std::function<bool()> advance, std::string description);
  // Runs `op` on the worker (or inline without one); `staging` (the op's buffers) is released by
  // the Work on the calling thread after completion.
  Work launch(CommWorker::Operation op, std::shared_ptr<void> staging, std::string description);

  MemoryTracker& tracker_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int world_ = 1;
  std::unique_ptr<CommWorker> worker_;  // destroyed before MPI_Comm_free
  // The profiler the worker's collectives report their spans to, read under its mutex at each
  // one's completion.
  struct ProfilerSlot {
    std::mutex mutex;
    OpProfiler* profiler = nullptr;
  };
  std::shared_ptr<ProfilerSlot> profiler_slot_ = std::make_shared<ProfilerSlot>();
};

}  // namespace zt
