// The exchange and fold of deterministic mode's reduction (see the header's note).
#include "engine/distributed/sharding/global_order_fold.h"

#include "engine/base/core/check.h"
#include "kernels/ops.h"

namespace zt {

FoldExchange start_fold_exchange(Communicator& comm, const ExecContext& ctx, MemoryTracker& tracker, TensorView pending,
                                 std::int64_t shard) {
  const int ranks = comm.world_size();
  ZT_CHECK(pending.numel() == shard * ranks, "fold exchange: the pending buffer is {} elements, not {} x {}",
           pending.numel(), ranks, shard);
  FoldExchange x;
  if (pending.dtype != DType::kF32) {
    x.widened = ops::allocate(ctx, tracker, MemCategory::kCommBuffers, DType::kF32, shard, false);
  }
  if (ranks > 1) {
    x.received = ops::allocate(ctx, tracker, MemCategory::kCommBuffers, pending.dtype, pending.numel(), false);
    x.work = comm.all_to_all(pending, x.received.view());
  }
  return x;
}

void fold_parts(const ExecContext& ctx, TensorView target, TensorView pending, const Buffer& received,
                const Buffer& widened) {
  const std::int64_t shard = target.numel();
  const TensorView parts = received.empty() ? pending.slice(0, shard) : received.view();
  for (std::int64_t at = 0; at < parts.numel(); at += shard) {  // rank order: the order of the micro-batches
    const TensorView part = parts.slice(at, shard);
    if (widened.empty()) {
      ops::accumulate_into(ctx, target, part);
    } else {
      ops::cast(ctx, widened.view(), part);
      ops::accumulate_into(ctx, target, widened.view());
    }
  }
}

void gather_folded_units(Communicator& comm, const std::vector<TensorView>& own, const std::vector<TensorView>& whole) {
  if (comm.world_size() == 1) return;
  std::vector<Work> gathers;
  for (std::size_t u = 0; u < own.size(); ++u) gathers.push_back(comm.all_gather(own[u], whole[u]));
  for (Work& w : gathers) w.wait();
}

}  // namespace zt
