// MpiCommunicator: each collective is a small state machine over MPI requests, posted and
// advanced by the CommWorker thread (or, without one, by MPI_Test inside Work::wait). Deterministic mode replaces MPI's
// reductions (whose order MPI does not fix) by an all-to-all of chunks and a local sum over ranks 0..N-1.
#include "engine/distributed/comm/mpi_communicator.h"

#include <fmt/format.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "engine/base/core/buffer.h"
#include "engine/base/core/check.h"
#include "engine/base/core/console.h"
#include "engine/distributed/comm/reduce_buffers.h"
#include "engine/distributed/launch/rendezvous.h"
#include "engine/distributed/launch/signals.h"
#include "kernels/op_profiler.h"

namespace zt {

namespace {

void mpi_check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw_runtime_error("MPI {} failed: {}", what, std::string(text, static_cast<std::size_t>(len)));
  }
}

int to_int_count(std::int64_t n, const char* what) {
  ZT_CHECK(n >= 0 && n <= INT_MAX, "{}: {} elements exceed MPI's int counts", what, n);
  return static_cast<int>(n);
}

bool test(MPI_Request& request) {
  if (request == MPI_REQUEST_NULL) return true;
  int flag = 0;
  mpi_check(MPI_Test(&request, &flag, MPI_STATUS_IGNORE), "MPI_Test");
  return flag != 0;
}

std::string describe(const char* op, const TensorView& v) {
  return fmt::format("{} ({} x {})", op, v.numel(), dtype_name(v.dtype));
}

}  // namespace

MpiCommunicator::MpiCommunicator(MemoryTracker& tracker, const CommOptions& options)
    : Communicator(options), tracker_(tracker) {
  const int provided = ensure_mpi_initialised("MPI communicator");
  mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &world_);
  if (options.progress_thread && provided >= MPI_THREAD_MULTIPLE) worker_ = std::make_unique<CommWorker>();
  install_launcher_termination_handler();
}

MpiCommunicator::MpiCommunicator(MemoryTracker& tracker, const CommOptions& options, MPI_Comm comm)
    : Communicator(options), tracker_(tracker), comm_(comm) {
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &world_);
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  if (options.progress_thread && provided >= MPI_THREAD_MULTIPLE) worker_ = std::make_unique<CommWorker>();
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  MPI_Comm sub = MPI_COMM_NULL;
  mpi_check(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split");
  return std::unique_ptr<Communicator>(new MpiCommunicator(tracker_, options_, sub));
}

MpiCommunicator::~MpiCommunicator() {
  worker_.reset();  // no MPI call from another thread past this point
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

Work MpiCommunicator::make_work(std::function<bool()> advance, std::string description) {
  return Work(std::move(advance), fmt::format("rank {}: {}", rank_, description), options_.timeout_s, context_ptr(),
              [this](const std::string& message) { abort_after_timeout(message); });
}

// On a timeout the other ranks may be gone or stuck: print this rank's error and abort the job
// (unwinding to MPI_Finalize would wait for them forever).
void MpiCommunicator::abort_after_timeout(const std::string& message) {
  print_stderr(error_line(message));
  std::fflush(stderr);
  CommWorker::halt_all();  // no completion runs while the abort tears the process down
  MPI_Abort(comm_, 1);
}

void MpiCommunicator::hold_until(std::function<bool()> ready) {
  if (!worker_) {  // collectives post inline: wait for the operands here
    Communicator::hold_until(std::move(ready));
    return;
  }
  // The worker posts in submission order and never past an entry that has not posted all it has:
  // this entry "posts" once ready() is true, so the collectives behind it wait for it.
  // A gate that fails (a device error under the copies) must not open: the collective behind it
  // would post staging its copies never filled, and the peers would take it for data. End the job.
  worker_->submit([this, ready = std::move(ready)]() -> CommWorker::Progress {
    try {
      if (!ready()) return {false, false};
    } catch (const std::exception& e) {
      abort_after_timeout(
          fmt::format("rank {}: a collective's operands did not reach host memory: {}", rank_, e.what()));
    }
    return {true, true};
  });
}

void MpiCommunicator::set_profiler(OpProfiler* profiler) {
  const std::lock_guard<std::mutex> lock(profiler_slot_->mutex);
  profiler_slot_->profiler = profiler;
  Communicator::set_profiler(profiler);
}

Work MpiCommunicator::launch(CommWorker::Operation op, std::shared_ptr<void> staging, std::string description) {
  if (profiler_ != nullptr && profiler_->in_step()) {
    // The collective's span on the host, from its first post to its completion (log.profile_ops),
    // to the profiler of its completion's time (none once set_profiler took it away).
    auto begin = std::make_shared<std::chrono::steady_clock::time_point>();
    op = [op = std::move(op), slot = profiler_slot_, begin]() mutable -> CommWorker::Progress {
      if (*begin == std::chrono::steady_clock::time_point{}) *begin = std::chrono::steady_clock::now();
      const CommWorker::Progress p = op();
      if (p.done) {
        const std::lock_guard<std::mutex> lock(slot->mutex);
        if (slot->profiler != nullptr) slot->profiler->add_comm_span(*begin, std::chrono::steady_clock::now());
      }
      return p;
    };
  }
  if (worker_) {
    auto completion = worker_->submit(std::move(op));
    // The Work keeps the staging buffers, so they are freed by this thread once it has waited.
    return make_work(
        [completion, staging] {
          if (!completion->done.load(std::memory_order_acquire)) return false;
          if (completion->error) std::rethrow_exception(completion->error);
          return true;
        },
        std::move(description));
  }
  // No progress thread: post now, progress inside Work::wait.
  auto shared = std::make_shared<CommWorker::Operation>(std::move(op));
  if ((*shared)().done) return {};
  return make_work([shared, staging] { return (*shared)().done; }, std::move(description));
}

namespace {

// A collective with one MPI request: `post` issues it, `finish` runs once it completed.
CommWorker::Operation single_request(std::function<void(MPI_Request*)> post, std::function<void()> finish) {
  auto request = std::make_shared<MPI_Request>(MPI_REQUEST_NULL);
  auto posted = std::make_shared<bool>(false);
  return [=]() -> CommWorker::Progress {
    if (!*posted) {
      post(request.get());
      *posted = true;
    }
    if (!test(*request)) return {true, false};
    if (finish) finish();
    return {true, true};
  };
}

}  // namespace

Work MpiCommunicator::all_gather(TensorView send, TensorView recv) {
  ZT_CHECK(send.dtype == recv.dtype && recv.numel() == send.numel() * world_, "all_gather: recv must be [world * n]");
  const int bytes = to_int_count(static_cast<std::int64_t>(send.size_bytes()), "all_gather");
  count_volume(recv.numel(), recv.dtype);
  MPI_Comm comm = comm_;
  // A send buffer that is this rank's own slice of recv is gathered in place (no copy).
  const bool in_place = send.data == static_cast<char*>(recv.data) + static_cast<std::int64_t>(rank_) * bytes;
  return launch(single_request(
                    [=](MPI_Request* r) {
                      mpi_check(MPI_Iallgather(in_place ? MPI_IN_PLACE : send.data, bytes, MPI_BYTE, recv.data, bytes,
                                               MPI_BYTE, comm, r),
                                "MPI_Iallgather");
                    },
                    nullptr),
                nullptr, describe("all_gather", send));
}

Work MpiCommunicator::all_to_all(TensorView send, TensorView recv) {
  ZT_CHECK(send.dtype == recv.dtype && send.numel() == recv.numel() && send.numel() % world_ == 0,
           "all_to_all: send and recv must both be [world * n] of one dtype");
  ZT_CHECK(send.data != recv.data, "all_to_all: send and recv must not overlap");
  const int bytes = to_int_count(static_cast<std::int64_t>(send.size_bytes()) / world_, "all_to_all");
  count_volume(recv.numel(), recv.dtype);
  MPI_Comm comm = comm_;
  return launch(single_request(
                    [=](MPI_Request* r) {
                      mpi_check(MPI_Ialltoall(send.data, bytes, MPI_BYTE, recv.data, bytes, MPI_BYTE, comm, r),
                                "MPI_Ialltoall");
                    },
                    nullptr),
                nullptr, describe("all_to_all", send));
}

// [Note: a world of one under MPI]
// `mpirun -np 1` gives a world of one an MPI communicator. A sum or an average over one rank is
// the value itself: reduce_scatter casts it into recv's dtype (rounded once, as the staged path
// would) and all_reduce leaves it, with no fp32 staging, as the local communicator does, which is
// what the memory prediction counts (a store with zero.solo_path = false calls these at one rank).
Work MpiCommunicator::reduce_scatter(TensorView send, TensorView recv, ReduceOp op) {
  const std::int64_t n = recv.numel();
  ZT_CHECK(send.numel() == n * world_, "reduce_scatter: send must be [world * n]");
  if (world_ == 1) {  // [Note: a world of one under MPI]
    if (send.data == recv.data && send.dtype == recv.dtype) return {};
    // On the worker where there is one, in submission order: behind a staged caller's gate
    // (hold_until), which its device-to-host copies open. Cast here, it read the staging first.
    return launch(
        [=]() -> CommWorker::Progress {
          ops::cast(kCommCtx, recv, send);
          return {true, true};
        },
        nullptr, describe("reduce_scatter", send));
  }
  count_volume(send.numel(), DType::kF32);  // reductions move fp32
  const float scale = op == ReduceOp::kAvg ? 1.0f / static_cast<float>(world_) : 1.0f;
  // fp32 staging: the input (when bf16), the all-to-all receive (deterministic) and the output.
  // Allocated here, on the submitting thread; the conversion of the input runs on the worker.
  struct Staging {
    Buffer in, out, chunks;
  };
  auto st = std::make_shared<Staging>();
  if (send.dtype != DType::kF32) {
    st->in = Buffer(tracker_, MemCategory::kCommBuffers, DType::kF32, send.numel(), Device::kCPU, false);
  }
  st->out = Buffer(tracker_, MemCategory::kCommBuffers, DType::kF32, n, Device::kCPU, false);
  if (options_.deterministic) {
    st->chunks = Buffer(tracker_, MemCategory::kCommBuffers, DType::kF32, n * world_, Device::kCPU, false);
  }
  const int count = to_int_count(n, "reduce_scatter");
  const int world = world_;
  MPI_Comm comm = comm_;
  Staging* s = st.get();
  return launch(
      single_request(
          [=](MPI_Request* r) {
            const float* send_f32 = nullptr;
            if (s->in.empty()) {
              send_f32 = send.as<float>();
            } else {
              ops::cast(kCommCtx, s->in.view(), send);
              send_f32 = s->in.as<float>();
            }
            if (!s->chunks.empty()) {
              mpi_check(MPI_Ialltoall(send_f32, count, MPI_FLOAT, s->chunks.data(), count, MPI_FLOAT, comm, r),
                        "MPI_Ialltoall");
            } else {
              mpi_check(MPI_Ireduce_scatter_block(send_f32, s->out.data(), count, MPI_FLOAT, MPI_SUM, comm, r),
                        "MPI_Ireduce_scatter_block");
            }
          },
          [=] {
            float* o = s->out.as<float>();
            if (!s->chunks.empty()) {
              ordered_sum(s->chunks.as<float>(), world, n, scale, o);
            } else if (scale != 1.0f) {
              for (std::int64_t i = 0; i < n; ++i) o[i] *= scale;
            }
            ops::cast(kCommCtx, recv, s->out.view());
          }),
      st, describe("reduce_scatter", send));
}

Work MpiCommunicator::all_reduce(TensorView buf, ReduceOp op) {
  const std::int64_t n = buf.numel();
  if (world_ == 1) return {};  // [Note: a world of one under MPI]
  const float scale = op == ReduceOp::kAvg ? 1.0f / static_cast<float>(world_) : 1.0f;
  count_volume(n, DType::kF32, 2);
  MPI_Comm comm = comm_;
  if (!options_.deterministic) {
    auto staged = std::make_shared<Buffer>(tracker_, MemCategory::kCommBuffers, DType::kF32, n, Device::kCPU, false);
    Buffer* s = staged.get();
    const int count = to_int_count(n, "all_reduce");
    return launch(single_request(
                      [=](MPI_Request* r) {
                        ops::cast(kCommCtx, s->view(), buf);
                        mpi_check(MPI_Iallreduce(MPI_IN_PLACE, s->data(), count, MPI_FLOAT, MPI_SUM, comm, r),
                                  "MPI_Iallreduce");
                      },
                      [=] {
                        float* f = s->as<float>();
                        if (scale != 1.0f) {
                          for (std::int64_t i = 0; i < n; ++i) f[i] *= scale;
                        }
                        ops::cast(kCommCtx, buf, s->view());
                      }),
                  staged, describe("all_reduce", buf));
  }
  // Deterministic: pad to a multiple of the world size, reduce-scatter by all-to-all and an ordered
  // sum (exactly what reduce_scatter does), then all-gather the reduced shards: two phases.
  const std::int64_t shard = (n + world_ - 1) / world_, padded = shard * world_;
  struct Staging {
    Buffer full, chunks, mine;
    MPI_Request request = MPI_REQUEST_NULL;
    int phase = 0;
  };
  auto st = std::make_shared<Staging>();
  st->full = Buffer(tracker_, MemCategory::kCommBuffers, DType::kF32, padded);  // zero padding
  st->chunks = Buffer(tracker_, MemCategory::kCommBuffers, DType::kF32, padded, Device::kCPU, false);
  st->mine = Buffer(tracker_, MemCategory::kCommBuffers, DType::kF32, shard, Device::kCPU, false);
  const int count = to_int_count(shard, "all_reduce");
  const int world = world_;
  Staging* s = st.get();
  CommWorker::Operation operation = [=]() -> CommWorker::Progress {
    if (s->phase == 0) {
      ops::cast(kCommCtx, s->full.view().slice(0, n), buf);
      mpi_check(MPI_Ialltoall(s->full.data(), count, MPI_FLOAT, s->chunks.data(), count, MPI_FLOAT, comm, &s->request),
                "MPI_Ialltoall");
      s->phase = 1;
    }
    if (s->phase == 1) {
      if (!test(s->request)) return {false, false};
      ordered_sum(s->chunks.as<float>(), world, shard, scale, s->mine.as<float>());
      mpi_check(MPI_Iallgather(s->mine.data(), count, MPI_FLOAT, s->full.data(), count, MPI_FLOAT, comm, &s->request),
                "MPI_Iallgather");
      s->phase = 2;
    }
    if (!test(s->request)) return {true, false};
    ops::cast(kCommCtx, buf, s->full.view().slice(0, n));
    return {true, true};
  };
  return launch(std::move(operation), st, describe("all_reduce", buf));
}

Work MpiCommunicator::broadcast(TensorView buf, int root) {
  ZT_CHECK(root >= 0 && root < world_, "broadcast root {} outside the world of {}", root, world_);
  const int bytes = to_int_count(static_cast<std::int64_t>(buf.size_bytes()), "broadcast");
  MPI_Comm comm = comm_;
  return launch(
      single_request(
          [=](MPI_Request* r) { mpi_check(MPI_Ibcast(buf.data, bytes, MPI_BYTE, root, comm, r), "MPI_Ibcast"); },
          nullptr),
      nullptr, describe("broadcast", buf));
}

void MpiCommunicator::barrier() {
  MPI_Comm comm = comm_;
  launch(single_request([=](MPI_Request* r) { mpi_check(MPI_Ibarrier(comm, r), "MPI_Ibarrier"); }, nullptr), nullptr,
         "barrier")
      .wait();
}

}  // namespace zt
