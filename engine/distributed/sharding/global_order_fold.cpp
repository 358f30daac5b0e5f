// The fold of deterministic mode's reduction and its exact norm (see the header's note).
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

void fold_parts(const ExecContext& ctx, TensorView target, TensorView pending, FoldExchange& exchange, int ranks) {
  const std::int64_t shard = target.numel();
  const TensorView parts = exchange.received.empty() ? pending.slice(0, shard) : exchange.received.view();
  for (int r = 0; r < ranks; ++r) {  // rank order: the order of the micro-batches
    const TensorView part = parts.slice(r * shard, shard);
    if (exchange.widened.empty()) {
      ops::accumulate_into(ctx, target, part);
    } else {
      ops::cast(ctx, exchange.widened.view(), part);
      ops::accumulate_into(ctx, target, exchange.widened.view());
    }
  }
}

void gather_folded_units(Communicator& comm, const std::vector<TensorView>& own, const std::vector<TensorView>& whole) {
  if (comm.world_size() == 1) return;
  std::vector<Work> gathers;
  for (std::size_t u = 0; u < own.size(); ++u) gathers.push_back(comm.all_gather(own[u], whole[u]));
  for (Work& w : gathers) w.wait();
}

double exact_global_sum_of_squares(Communicator& comm, const ExecContext& ctx, const std::vector<TensorView>& parts) {
  constexpr int kWords = exact_sum::kDigits + 1;  // the digits, then the non-finite count
  const exact_sum::SquareSum mine = ops::exact_sum_of_squares(ctx, parts);
  std::uint64_t own[kWords];
  for (int k = 0; k < exact_sum::kDigits; ++k) own[k] = mine.digit[k];
  own[exact_sum::kDigits] = mine.nonfinite;
  const int ranks = comm.world_size();
  std::vector<std::uint64_t> all(static_cast<std::size_t>(kWords * ranks));
  comm.all_gather(TensorView{own, DType::kI32, Device::kCPU, Shape{2 * kWords}},  // 64-bit words as raw bytes
                  TensorView{all.data(), DType::kI32, Device::kCPU, Shape{2 * kWords * ranks}})
      .wait();
  exact_sum::SquareSum total;
  for (int r = 0; r < ranks; ++r) {  // integers: the order changes nothing
    exact_sum::SquareSum theirs;
    for (int k = 0; k < exact_sum::kDigits; ++k) theirs.digit[k] = all[static_cast<std::size_t>(r * kWords + k)];
    theirs.nonfinite = all[static_cast<std::size_t>(r * kWords + exact_sum::kDigits)];
    exact_sum::add(total, theirs);
  }
  return exact_sum::to_double(total);
}

}  // namespace zt
