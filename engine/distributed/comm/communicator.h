// The collectives the sharding engine needs, on flat F32 or BF16 buffers, behind one interface:
// all-gather, reduce-scatter, all-reduce, broadcast, barrier. Each returns a Work handle (the
// operation may still be in flight) whose wait() gives up with a clear error after the timeout,
// naming the collective and the step, instead of hanging when a rank died or never arrived.
// Backends: LocalCommunicator (one process), MpiCommunicator (ranks as processes, host memory),
// NcclCommunicator (one GPU per rank, built with CUDA) and StagedCommunicator (device memory moved
// through a host backend: several ranks on one GPU, comm.backend = "mpi").
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/base/core/buffer.h"
#include "engine/base/core/memory_tracker.h"
#include "engine/base/core/tensor.h"

namespace zt {

struct ExecContext;  // kernels/exec_context.h
class OpProfiler;    // kernels/op_profiler.h

enum class ReduceOp { kSum, kAvg };

struct CommOptions {
  double timeout_s = 300.0;  // a collective that has not completed by then is an error
  // Reductions in a fixed order (each element summed over ranks 0, 1, ..., N-1 in fp32), the same
  // for all-reduce and reduce-scatter, so every ZeRO stage produces bitwise identical sums.
  bool deterministic = false;
  // Backends that need a thread to move data while the caller computes (MPI on the CPU) start one
  // (engine/distributed/comm/comm_worker.h); false polls inside Work::wait only (nothing overlaps).
  bool progress_thread = true;
};

// An in-flight collective. wait() drives it to completion (or throws RuntimeError on timeout);
// a default-constructed Work is already complete.
class Work {
 public:
  Work() = default;
  // `advance` makes progress and returns true once everything (including copies back) is done.
  // `on_timeout` (optional) gets the error message first; a backend that cannot recover (MPI with
  // a rank gone) prints it and aborts the job there.
  Work(std::function<bool()> advance, std::string description, double timeout_s, const std::string* context,
       std::function<void(const std::string&)> on_timeout = nullptr);

  // `bounded_by_stop_grace` false: a wait known to outlast the stop rule's grace period (a rank
  // that waits while a peer does long work, such as another group's checkpoint save) gives up
  // only at the timeout.
  void wait(bool bounded_by_stop_grace = true);
  // Advances once without blocking (no deadline: the caller's own wait has one); true once done.
  bool test();
  bool done() const { return !advance_; }

 private:
  std::function<bool()> advance_;
  std::string description_;
  double timeout_s_ = 0.0;
  const std::string* context_ = nullptr;
  std::function<void(const std::string&)> on_timeout_;
};

// A failing run (an exception unwinding) that drops a collective still in flight: the backend may
// still write into its buffers (an MPI request is abandoned, not cancelled, and the progress thread
// polls it until the communicator goes), and its Work holds the staging the backend writes into.
// Both are kept, never freed, until the process ends, which the failure brings: leaked on purpose,
// on a path that ends the job (their bytes stay charged to the tracker: they are still held).
// Any thread.
void keep_until_exit(Work work);
void keep_until_exit(Buffer buffer);

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend_name() const = 0;
  // Whether collectives are ordered on the device (NCCL: each queued on the GPU behind those queued
  // before it, whichever of the process's communicators queued them: nccl_launch_order.h), so one
  // may be started on another's result before that one completes. The host backends: false.
  virtual bool orders_on_device() const { return false; }

  // recv [world * n] = every rank's send [n], in rank order. Same dtype on both sides. send may be
  // this rank's own slice of recv (recv + rank * n): then it is gathered in place.
  virtual Work all_gather(TensorView send, TensorView recv) = 0;
  // recv [n] on rank r = reduction over ranks of send[r*n, (r+1)*n). BF16 data is reduced in fp32
  // and rounded once at the end; recv may be F32 or the send dtype.
  virtual Work reduce_scatter(TensorView send, TensorView recv, ReduceOp op) = 0;
  // buf = reduction over ranks of buf, in place (F32 or BF16, reduced in fp32).
  virtual Work all_reduce(TensorView buf, ReduceOp op) = 0;
  // buf on every rank = buf on `root`.
  virtual Work broadcast(TensorView buf, int root) = 0;
  // recv [world * n] on rank r: slot j = rank j's send slot r (send [world * n]); the bytes moved as
  // they are, any dtype (quantized collectives move packed words through it). The host backends
  // (MPI, local) have it; the others throw RuntimeError naming themselves.
  virtual Work all_to_all(TensorView send, TensorView recv);
  virtual void barrier() = 0;
  // A communicator over the ranks of this one that pass the same `color`, numbered by `key` (ties
  // by rank): MPI_Comm_split. Collective over this communicator's ranks, at set-up. The new one
  // uses this one's options and must be destroyed first. Throws RuntimeError on a backend that
  // cannot split (NCCL and the staged one, so far).
  virtual std::unique_ptr<Communicator> split(int color, int key);

  // Collectives started after this call are handed to the wire only once `ready` returns true:
  // StagedCommunicator's operands land in host memory by asynchronous copies, and a backend with a
  // progress thread (MPI) polls `ready` there, in its posting order, so the caller never blocks.
  // The default waits here (Work::wait, within options().timeout_s). `ready` may throw (a device error).
  virtual void hold_until(std::function<bool()> ready);
  // What a collective past its timeout does before its Work throws: a backend whose peers may be
  // blocked in it (MPI) prints the message and ends the whole job. The default does nothing.
  virtual void abort_after_timeout(const std::string& message) { (void)message; }

  // log.profile_ops: the backend times its collectives into `profiler` while a step is open
  // ([Note: exposed communication] in kernels/op_profiler.h); null stops it. A backend that cannot
  // time its collectives (the staged one, the local one) ignores it.
  virtual void set_profiler(OpProfiler* profiler) { profiler_ = profiler; }

  // What the current work is part of ("step 12"), quoted in timeout errors.
  virtual void set_context(std::string context);
  // Its address, for a Work composed of this communicator's collectives (quantized_collectives.h).
  const std::string* context_ptr() const { return &context_; }
  const CommOptions& options() const { return options_; }
  // Elements this rank has sent so far, counted as a ring algorithm moves them (all-gather,
  // all-to-all and reduce-scatter of a unit of n: n (N-1)/N; all-reduce: 2 n (N-1)/N), the measure
  // of the ZeRO paper's communication volume (2 Psi per step for stages 0-2, 3 Psi for stage 3),
  // and the same in bytes, each element counted at its dtype's size (quantized collectives move
  // fewer bytes per parameter: a packed I32 word carries four int8 codes).
  virtual std::int64_t elements_sent() const { return elements_sent_; }
  virtual std::int64_t bytes_sent() const { return bytes_sent_; }
  // Timeout and reduction order for the collectives that follow (e.g. once the config is read).
  // Virtual: a communicator over others (staged, hybrid) passes them on to those that run them.
  virtual void set_options(const CommOptions& options) { options_ = options; }

 protected:
  explicit Communicator(CommOptions options) : options_(options) {}

  // Adds the ring volume of a collective over `total` elements of `dtype` (factor 2 for an
  // all-reduce).
  void count_volume(std::int64_t total, DType dtype, int factor = 1) {
    const std::int64_t elements = factor * total * (world_size() - 1) / world_size();
    elements_sent_ += elements;
    bytes_sent_ += elements * static_cast<std::int64_t>(dtype_size_bytes(dtype));
  }

  CommOptions options_;
  OpProfiler* profiler_ = nullptr;
  std::string context_ = "start-up";
  std::int64_t elements_sent_ = 0;
  std::int64_t bytes_sent_ = 0;
};

// Collective: `root`'s text on every rank (its length, then its bytes, in two broadcasts).
std::string broadcast_string(Communicator& comm, const std::string& text, int root = 0);

// Collective: runs `local` (this rank's own work: no collective inside) on every rank, then agrees:
// where it threw on any rank, every rank throws the first failing rank's error ("rank R: ...", or
// as it is where every rank threw that same error; an
// AgreedInputError where that was an InputError, else an AgreedRuntimeError), so one rank's missing
// file or full GPU ends the job at once rather than leaving the others in the next collective until
// its timeout. Rank 0 prints the job's line ("zerotrain: error: ...") before any rank throws.
void on_every_rank(Communicator& world, const std::function<void()>& local);
// Collective: ends every rank with `message`, which each holds alike (worked out from what they
// gathered): rank 0 prints it once for the job, then every rank throws AgreedInputError (an input
// error) or AgreedRuntimeError, as on_every_rank does.
[[noreturn]] void fail_on_every_rank(Communicator& world, const std::string& message, bool input_error);

// Collective: every rank's `mine` (host values, the same count on every rank) on every rank, rank
// r's at [r * mine.size(), (r + 1) * mine.size()). The bytes move as they are (as I32 words).
template <typename T>
std::vector<T> all_gather_values(Communicator& comm, std::span<const T> mine) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) % 4 == 0, "values moved as 4-byte words");
  const std::int64_t words = static_cast<std::int64_t>(mine.size() * (sizeof(T) / 4));
  std::vector<T> all(mine.size() * static_cast<std::size_t>(comm.world_size()));
  comm.all_gather(TensorView{const_cast<T*>(mine.data()), DType::kI32, Device::kCPU, Shape{words}},
                  TensorView{all.data(), DType::kI32, Device::kCPU, Shape{words * comm.world_size()}})
      .wait();
  return all;
}

// The communicator for this process: MPI when launched by mpirun/srun (and built with MPI),
// otherwise a single rank. Temporary buffers are charged to `tracker` as comm_buffers.
std::unique_ptr<Communicator> make_communicator(MemoryTracker& tracker, const CommOptions& options);

// How the parameter store's collectives reach the other ranks (config comm.backend, and the
// trainer's ZT_TEST_STAGED_COLLECTIVES hook).
enum class DeviceCommBackend {
  kNccl,                // NcclCommunicator on a CUDA context (the default there)
  kMpiStaged,           // StagedCommunicator over MPI: device memory through pinned host memory (several
                        // ranks on one GPU, where NCCL refuses)
  kHostStagedForTests,  // StagedCommunicator over MPI with HostStagingDevice: the staged path on
                        // the CPU, for the tests (never chosen by a config)
};

// The communicator for collectives on ctx's device memory over the same ranks as `control` (the
// host communicator, which hands every rank what the device one needs to start): NCCL on a CUDA
// context (make_nccl_communicator; throws in a build without CUDA), or a StagedCommunicator over a
// host communicator of its own (MPI under mpirun, else the local one) whose staging is charged to
// its own tracker, not `tracker`.
std::unique_ptr<Communicator> make_device_communicator(Communicator& control, MemoryTracker& tracker,
                                                       const ExecContext& ctx, DeviceCommBackend backend);

// Seconds this process has spent blocked in Work::wait: the communication that computation did
// not hide (the trainer logs it per step as comm_wait_ms). The host's blocking only: an NCCL
// collective with device results makes the compute stream wait, not the host, so on CUDA its
// stalls show in step_ms and the op profile, not here.
double comm_wait_seconds();

}  // namespace zt
