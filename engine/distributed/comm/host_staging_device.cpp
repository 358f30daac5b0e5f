// HostStagingDevice: a queue of copies that fences and compute_follows_copies run in order.
#include "engine/distributed/comm/host_staging_device.h"

#include <atomic>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <utility>

#include "engine/base/core/check.h"

namespace zt {

// The "copy stream": copies in the order queued, run up to a point by whoever needs them done (a
// fence polled on the communication thread, or the main thread). Guarded: both threads run it.
struct HostStagingDevice::CopyQueue {
  std::mutex mutex;
  std::deque<std::pair<TensorView, TensorView>> pending;  // (dst, src)
  std::int64_t queued = 0, done = 0;

  // The point after every copy queued so far.
  std::int64_t end() {
    const std::lock_guard<std::mutex> lock(mutex);
    return queued;
  }

  void run_until(std::int64_t point) {
    const std::lock_guard<std::mutex> lock(mutex);
    for (; done < point; ++done) {
      const auto [dst, src] = pending.front();
      pending.pop_front();
      if (dst.data != src.data) std::memcpy(dst.data, src.data, src.size_bytes());
    }
  }
};

namespace {

class DelayedFence final : public StagingFence {
 public:
  DelayedFence(std::function<void()> run, int polls) : run_(std::move(run)), left_(polls) {}
  bool reached() override {
    if (left_.fetch_sub(1, std::memory_order_acq_rel) > 0) return false;
    run_();  // the copies before the fence complete now (at the latest)
    return true;
  }

 private:
  std::function<void()> run_;
  std::atomic<int> left_;
};

}  // namespace

HostStagingDevice::HostStagingDevice(int fence_delay_polls, Device stands_for)
    : delay_polls_(fence_delay_polls), device_(stands_for), queue_(std::make_shared<CopyQueue>()) {}

Buffer HostStagingDevice::allocate_host(MemoryTracker& tracker, DType dtype, std::int64_t numel) {
  return Buffer(tracker, MemCategory::kCommBuffers, dtype, numel, Device::kCPU, /*zero_fill=*/false);
}

void HostStagingDevice::copy(TensorView dst, TensorView src) {
  ZT_CHECK(dst.dtype == src.dtype && dst.numel() == src.numel(), "staging copy of {} {} elements into {} {}",
           src.numel(), dtype_name(src.dtype), dst.numel(), dtype_name(dst.dtype));
  const std::lock_guard<std::mutex> lock(queue_->mutex);
  queue_->pending.emplace_back(dst, src);
  ++queue_->queued;
}

std::shared_ptr<StagingFence> HostStagingDevice::fence() {
  const std::int64_t point = queue_->end();
  std::shared_ptr<CopyQueue> queue = queue_;
  return std::make_shared<DelayedFence>([queue, point] { queue->run_until(point); }, delay_polls_);
}

void HostStagingDevice::compute_follows_copies() { queue_->run_until(queue_->end()); }

std::int64_t HostStagingDevice::copies() const { return queue_->end(); }

}  // namespace zt
