// MpiCommunicator: each collective is a small state machine over MPI requests, advanced by
// MPI_Test inside Work::wait. Deterministic mode replaces MPI's reductions (whose order MPI does
// not fix) by an all-to-all of chunks and a local sum over ranks 0..N-1.
#include "engine/comm/mpi_communicator.h"

#include <fmt/format.h>

#include <climits>
#include <cstdio>
#include <memory>

#include "engine/comm/reduce_buffers.h"
#include "engine/core/buffer.h"
#include "engine/core/check.h"

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
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    int provided = 0;
    mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    owns_mpi_ = true;
  }
  mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &world_);
  install_launcher_termination_handler();
}

MpiCommunicator::~MpiCommunicator() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  if (owns_mpi_) MPI_Finalize();
}

Work MpiCommunicator::make_work(std::function<bool()> advance, std::string description) {
  // On a timeout the other ranks may be gone or stuck: print this rank's error and abort the job
  // (unwinding to MPI_Finalize would wait for them forever).
  MPI_Comm comm = comm_;
  return Work(std::move(advance), fmt::format("rank {}: {}", rank_, description), options_.timeout_s, context_ptr(),
              [comm](const std::string& message) {
                std::fprintf(stderr, "zerotrain: error: %s\n", message.c_str());
                std::fflush(stderr);
                MPI_Abort(comm, 1);
              });
}

Work MpiCommunicator::all_gather(TensorView send, TensorView recv) {
  ZT_CHECK(send.dtype == recv.dtype && recv.numel() == send.numel() * world_, "all_gather: recv must be [world * n]");
  const int bytes = to_int_count(static_cast<std::int64_t>(send.size_bytes()), "all_gather");
  count_volume(recv.numel());
  auto request = std::make_shared<MPI_Request>(MPI_REQUEST_NULL);
  mpi_check(MPI_Iallgather(send.data, bytes, MPI_BYTE, recv.data, bytes, MPI_BYTE, comm_, request.get()),
            "MPI_Iallgather");
  return make_work([request] { return test(*request); }, describe("all_gather", send));
}

Work MpiCommunicator::reduce_scatter(TensorView send, TensorView recv, ReduceOp op) {
  const std::int64_t n = recv.numel();
  ZT_CHECK(send.numel() == n * world_, "reduce_scatter: send must be [world * n]");
  count_volume(send.numel());
  const float scale = op == ReduceOp::kAvg ? 1.0f / static_cast<float>(world_) : 1.0f;
  // fp32 staging: the input (when bf16), the all-to-all receive (deterministic) and the output.
  auto in = std::make_shared<Buffer>();
  const float* send_f32 = nullptr;
  if (send.dtype == DType::kF32) {
    send_f32 = send.as<float>();
  } else {
    *in = Buffer(tracker_, MemCategory::kCommBuffers, DType::kF32, send.numel(), Device::kCPU, false);
    cpu::cast(kCommCtx, in->view(), send);
    send_f32 = in->as<float>();
  }
  auto out = std::make_shared<Buffer>(tracker_, MemCategory::kCommBuffers, DType::kF32, n, Device::kCPU, false);
  auto request = std::make_shared<MPI_Request>(MPI_REQUEST_NULL);
  const int count = to_int_count(n, "reduce_scatter");
  std::shared_ptr<Buffer> chunks;
  if (options_.deterministic) {
    chunks = std::make_shared<Buffer>(tracker_, MemCategory::kCommBuffers, DType::kF32, n * world_, Device::kCPU,
                                      false);
    mpi_check(MPI_Ialltoall(send_f32, count, MPI_FLOAT, chunks->data(), count, MPI_FLOAT, comm_, request.get()),
              "MPI_Ialltoall");
  } else {
    mpi_check(MPI_Ireduce_scatter_block(send_f32, out->data(), count, MPI_FLOAT, MPI_SUM, comm_, request.get()),
              "MPI_Ireduce_scatter_block");
  }
  const int world = world_;
  return make_work(
      [=] {
        if (!test(*request)) return false;
        float* o = out->as<float>();
        if (chunks) {
          ordered_sum(chunks->as<float>(), world, n, scale, o);
        } else if (scale != 1.0f) {
          for (std::int64_t i = 0; i < n; ++i) o[i] *= scale;
        }
        cpu::cast(kCommCtx, recv, out->view());
        (void)in;  // the staged input lives until the operation completes
        return true;
      },
      describe("reduce_scatter", send));
}

Work MpiCommunicator::all_reduce(TensorView buf, ReduceOp op) {
  const std::int64_t n = buf.numel();
  const float scale = op == ReduceOp::kAvg ? 1.0f / static_cast<float>(world_) : 1.0f;
  count_volume(n, 2);
  if (!options_.deterministic) {
    auto staged = std::make_shared<Buffer>(tracker_, MemCategory::kCommBuffers, DType::kF32, n, Device::kCPU, false);
    cpu::cast(kCommCtx, staged->view(), buf);
    auto request = std::make_shared<MPI_Request>(MPI_REQUEST_NULL);
    mpi_check(MPI_Iallreduce(MPI_IN_PLACE, staged->data(), to_int_count(n, "all_reduce"), MPI_FLOAT, MPI_SUM, comm_,
                             request.get()),
              "MPI_Iallreduce");
    return make_work(
        [=] {
          if (!test(*request)) return false;
          float* s = staged->as<float>();
          if (scale != 1.0f) {
            for (std::int64_t i = 0; i < n; ++i) s[i] *= scale;
          }
          cpu::cast(kCommCtx, buf, staged->view());
          return true;
        },
        describe("all_reduce", buf));
  }
  // Deterministic: pad to a multiple of the world size, reduce-scatter by all-to-all and an ordered
  // sum (exactly what reduce_scatter does), then all-gather the reduced shards.
  const std::int64_t shard = (n + world_ - 1) / world_, padded = shard * world_;
  auto full = std::make_shared<Buffer>(tracker_, MemCategory::kCommBuffers, DType::kF32, padded);  // zero padding
  cpu::cast(kCommCtx, full->view().slice(0, n), buf);
  auto chunks = std::make_shared<Buffer>(tracker_, MemCategory::kCommBuffers, DType::kF32, padded, Device::kCPU, false);
  auto mine = std::make_shared<Buffer>(tracker_, MemCategory::kCommBuffers, DType::kF32, shard, Device::kCPU, false);
  auto request = std::make_shared<MPI_Request>(MPI_REQUEST_NULL);
  auto phase = std::make_shared<int>(0);
  const int count = to_int_count(shard, "all_reduce");
  mpi_check(MPI_Ialltoall(full->data(), count, MPI_FLOAT, chunks->data(), count, MPI_FLOAT, comm_, request.get()),
            "MPI_Ialltoall");
  const int world = world_;
  MPI_Comm comm = comm_;
  return make_work(
      [=] {
        if (!test(*request)) return false;
        if (*phase == 0) {
          ordered_sum(chunks->as<float>(), world, shard, scale, mine->as<float>());
          mpi_check(MPI_Iallgather(mine->data(), count, MPI_FLOAT, full->data(), count, MPI_FLOAT, comm, request.get()),
                    "MPI_Iallgather");
          *phase = 1;
          return false;
        }
        cpu::cast(kCommCtx, buf, full->view().slice(0, n));
        return true;
      },
      describe("all_reduce", buf));
}

Work MpiCommunicator::broadcast(TensorView buf, int root) {
  ZT_CHECK(root >= 0 && root < world_, "broadcast root {} outside the world of {}", root, world_);
  auto request = std::make_shared<MPI_Request>(MPI_REQUEST_NULL);
  mpi_check(MPI_Ibcast(buf.data, to_int_count(static_cast<std::int64_t>(buf.size_bytes()), "broadcast"), MPI_BYTE,
                       root, comm_, request.get()),
            "MPI_Ibcast");
  return make_work([request] { return test(*request); }, describe("broadcast", buf));
}

void MpiCommunicator::barrier() {
  auto request = std::make_shared<MPI_Request>(MPI_REQUEST_NULL);
  mpi_check(MPI_Ibarrier(comm_, request.get()), "MPI_Ibarrier");
  make_work([request] { return test(*request); }, "barrier").wait();
}

}  // namespace zt
