// LocalCommunicator: collectives over a world of one.
#include "engine/distributed/comm/local_communicator.h"

#include <cstring>

#include "engine/base/core/check.h"
#include "engine/distributed/comm/reduce_buffers.h"

namespace zt {

LocalCommunicator::LocalCommunicator(MemoryTracker& tracker, const CommOptions& options)
    : Communicator(options), tracker_(tracker) {}

std::unique_ptr<Communicator> LocalCommunicator::split(int, int) {
  return std::make_unique<LocalCommunicator>(tracker_, options_);
}

Work LocalCommunicator::all_gather(TensorView send, TensorView recv) {
  ZT_CHECK(send.dtype == recv.dtype && send.numel() == recv.numel(), "all_gather: recv must be [world * n]");
  if (send.data == recv.data) return {};
  ZT_CHECK(send.device == Device::kCPU && recv.device == Device::kCPU,
           "the local communicator copies host memory only (a world of one on the GPU calls no collective)");
  std::memcpy(recv.data, send.data, send.size_bytes());
  return {};
}

Work LocalCommunicator::reduce_scatter(TensorView send, TensorView recv, ReduceOp) {
  ZT_CHECK(send.numel() == recv.numel(), "reduce_scatter: send must be [world * n]");
  ZT_CHECK(send.device == Device::kCPU && recv.device == Device::kCPU,
           "the local communicator reduces host memory only (a world of one on the GPU calls no collective)");
  ops::cast(kCommCtx, recv, send);  // a sum or an average over one rank is the value itself
  return {};
}

Work LocalCommunicator::all_reduce(TensorView, ReduceOp) { return {}; }

Work LocalCommunicator::broadcast(TensorView, int root) {
  ZT_CHECK(root == 0, "broadcast root {} in a world of 1", root);
  return {};
}

}  // namespace zt
