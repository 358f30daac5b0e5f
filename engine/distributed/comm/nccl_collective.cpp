// NcclCommunicator::Collective (nccl_internals.h): one collective's staging in, the NCCL call the
// communicator makes between input() and finish(), and its results' way back.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/base/device/cuda_check.h"
#include "engine/distributed/comm/nccl_internals.h"
#include "engine/distributed/comm/nccl_launch_order.h"
#include "kernels/compute_backend.h"
#include "kernels/op_profiler.h"
#include "kernels/ops.h"

namespace zt {

namespace {

// A collective's staging buffers, returned to the caching allocator (whose reuse is ordered on the
// compute stream) only once the compute stream was made to wait for the collective: after the
// Work's wait, or, for a Work dropped unwaited on an error path, here. Also without staging: the
// caller's own buffers (an in-place gather's) go back to the allocator on the compute stream too.
struct Staging {
  Staging(std::vector<Buffer> b, std::shared_ptr<cuda::CudaEvent> d, cudaStream_t c)
      : buffers(std::move(b)), done(std::move(d)), compute(c) {}
  ~Staging() {
    if (!compute_waits) (void)cudaStreamWaitEvent(compute, done->get(), 0);  // no throw here
  }
  // The compute stream waits for the collective (its results, and the staging's reuse, come after).
  void order_compute() {
    done->wait_on(compute);
    compute_waits = true;
  }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  std::vector<Buffer> buffers;
  std::shared_ptr<cuda::CudaEvent> done;
  cudaStream_t compute;
  bool compute_waits = false;
};

}  // namespace

NcclCommunicator::Collective::Collective(NcclCommunicator& owner) : owner_(owner), impl_(*owner.impl_) {
  cuda::CudaEvent ready;
  ready.record(impl_.compute_stream());
  ready.wait_on(impl_.comm_stream.get());
  launch_order().follow(&impl_, impl_.comm_stream.get());
  // log.profile_ops: the collective's span on the communication stream, its staging included.
  if (owner_.profiler_ != nullptr && owner_.profiler_->in_step()) {
    profiled_ = owner_.profiler_->comm_start(impl_.comm_stream.get());
  }
}

// A collective abandoned before finish() (its NCCL call or settling threw) returns its staging to
// the allocator, whose reuse is ordered on the compute stream, only behind the uploads and casts it
// queued into them on the communication stream (finish() hands them to a Staging instead). No throw
// here: an error unwinds through it.
NcclCommunicator::Collective::~Collective() {
  if (staging_.empty()) return;
  cudaEvent_t queued = nullptr;
  if (cudaEventCreateWithFlags(&queued, cudaEventDisableTiming) != cudaSuccess) return;
  if (cudaEventRecord(queued, stream()) == cudaSuccess) (void)cudaStreamWaitEvent(impl_.compute_stream(), queued, 0);
  cudaEventDestroy(queued);
}

TensorView NcclCommunicator::Collective::input(TensorView v, DType want) {
  if (v.device != Device::kCUDA) {
    TensorView dev = stage(v.dtype, v.numel());
    ops::copy(impl_.comm_ctx, dev, v);
    v = dev;
  }
  if (v.dtype != want) {
    TensorView converted = stage(want, v.numel());
    ops::cast(impl_.comm_ctx, converted, v);
    v = converted;
  }
  return v;
}

TensorView NcclCommunicator::Collective::output(TensorView dst, DType want) {
  if (dst.device == Device::kCUDA && dst.dtype == want) return dst;
  TensorView staged = stage(want, dst.numel());
  result_into(dst, staged);
  return staged;
}

TensorView NcclCommunicator::Collective::in_place(TensorView buf, DType want) {
  const TensorView work = input(buf, want);
  if (work.data != buf.data) result_into(buf, work);
  return work;
}

Work NcclCommunicator::Collective::finish(std::string description) {
  std::vector<std::pair<TensorView, TensorView>> host_copies;  // (host dst, device src)
  for (auto& [dst, src] : results_) {
    TensorView s = src;
    if (s.dtype != dst.dtype) {
      TensorView converted = dst.device == Device::kCUDA ? dst : stage(dst.dtype, dst.numel());
      ops::cast(impl_.comm_ctx, converted, s);
      s = converted;
    }
    if (dst.device == Device::kCUDA) {
      ops::copy(impl_.comm_ctx, dst, s);  // nothing when the cast already wrote dst
    } else {
      host_copies.emplace_back(dst, s);
    }
  }
  if (profiled_) owner_.profiler_->comm_stop(*profiled_, stream());
  auto done = std::make_shared<cuda::CudaEvent>();
  done->record(stream());
  launch_order().queued(&impl_, done);
  const std::string context = *owner_.context_ptr();
  const double timeout_s = owner_.options().timeout_s;  // set_options may change it after set-up
  // An error on the event (the context broken by a fault in any kernel) is a failure, not a completion.
  impl_.watchdog->watch(
      description, context,
      [done] {
        const cudaError_t state = cudaEventQuery(done->get());
        if (state == cudaErrorNotReady) return false;
        if (state != cudaSuccess) {
          // The context's sticky error: a fault in any kernel queued before the event, most
          // often a computation's, not the collective's own.
          throw std::runtime_error(
              fmt::format("CUDA error on its completion event: {} ({}; raised by any kernel queued before it, "
                          "not necessarily the collective)",
                          cudaGetErrorString(state), cudaGetErrorName(state)));
        }
        return true;
      },
      timeout_s);
  const cudaStream_t compute = impl_.compute_stream();
  auto staging = std::make_shared<Staging>(std::move(staging_), done, compute);
  staging_.clear();  // the Staging's now (moved from: no longer the destructor's)
  std::function<bool()> advance;
  if (host_copies.empty()) {
    // Device results: the compute stream waits for them; the host goes on at once. The staging
    // is freed after that wait is queued, so its reuse on the compute stream comes after it.
    advance = [staging] {
      staging->order_compute();
      return true;
    };
  } else {
    // Host results: poll the event (Work::wait's deadline applies), then copy back.
    advance = [done, staging, host_copies] {
      const cudaError_t state = cudaEventQuery(done->get());
      if (state == cudaErrorNotReady) return false;
      ZT_CUDA_CHECK(state);
      for (const auto& [dst, src] : host_copies) {
        ZT_CUDA_CHECK(cudaMemcpy(dst.data, src.data, dst.size_bytes(), cudaMemcpyDeviceToHost));
      }
      staging->order_compute();
      return true;
    };
  }
  Impl* impl = &impl_;
  const int rank = owner_.rank_;
  return Work(std::move(advance), std::move(description), timeout_s, owner_.context_ptr(),
              [impl, rank](const std::string& message) { impl->fail(rank, message); });
}

// Not zero-filled: a fill would be queued on the compute stream (the allocator's), after the
// fence the comm stream waits on, and so could land after the comm stream's copy or cast into
// the buffer. Every staging buffer is written whole (copy, cast or NCCL) before it is read.
TensorView NcclCommunicator::Collective::stage(DType dtype, std::int64_t n) {
  staging_.push_back(ops::allocate(impl_.ctx, impl_.tracker, MemCategory::kCommBuffers, dtype, n, /*zero_fill=*/false));
  return staging_.back().view();
}

}  // namespace zt
