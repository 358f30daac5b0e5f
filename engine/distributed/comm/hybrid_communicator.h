// Hybrid sharding's communicator (zero.shard_group_size = g, DeepSpeed's MiCS / hpZ, FSDP's HSDP):
// the world's N ranks as N/g groups of g consecutive ranks (a node each), every group a full copy
// of the model sharded g ways. Seen through this interface the world is one group: rank() is the
// rank within the group and world_size() is g, so a parameter store built on it shards g ways and
// gathers parameters inside the group only; the reductions reach every rank of the world in two
// hops, inside the group and then across the groups, between the ranks that hold the same shard:
//   all_gather      inside the group;
//   reduce_scatter  inside the group, then the reduced shard all-reduced across the groups (moved
//                   as bf16 or int8 under zero.cross_group_grad_dtype: ZeRO++'s qgZ);
//   all_reduce      inside the group, then across the groups;
//   broadcast       inside the group (every group holds the same values).
// With deterministic reductions each hop sums in its fixed rank order, so the bits are the same
// every run and at every ZeRO stage, and within fp32 rounding of the one-hop sum (g = N) (a bf16
// gradient then rounds once from either sum: the two may round to other bf16 values).
#pragma once

#include <memory>

#include "engine/distributed/comm/communicator.h"
#include "engine/distributed/comm/quantized_collectives.h"

namespace zt {

class HybridCommunicator final : public Communicator {
 public:
  // Splits `world` (collective over it) into groups of `group_size` consecutive ranks and the
  // replica sets across them; group_size must divide the world's size. `world` must outlive this.
  // (A group of one is a world of one, on which a ZeroParamStore's solo path calls no collective,
  // so never reaches the other groups: store_comm_choice gives the store groups of 2 or more.)
  // `across` (zero.cross_group_grad_dtype): how the second hop moves its values; bf16 or int8 go
  // through all_reduce_encoded, staged in comm buffers of `tracker` on ctx's device.
  HybridCommunicator(Communicator& world, int group_size, WireDType across = WireDType::kExact,
                     MemoryTracker* tracker = nullptr, const ExecContext& ctx = {});
  // The same over a world this one owns (on CUDA: the world's NCCL communicator, split by
  // ncclCommSplit, which must outlive its splits).
  HybridCommunicator(std::unique_ptr<Communicator> world, int group_size, WireDType across, MemoryTracker* tracker,
                     const ExecContext& ctx);
  ~HybridCommunicator() override;

  int rank() const override { return group_->rank(); }
  int world_size() const override { return group_->world_size(); }
  std::string backend_name() const override;
  Work all_gather(TensorView send, TensorView recv) override;
  Work reduce_scatter(TensorView send, TensorView recv, ReduceOp op) override;
  Work all_reduce(TensorView buf, ReduceOp op) override;
  Work broadcast(TensorView buf, int root) override;
  Work all_to_all(TensorView send, TensorView recv) override;
  void barrier() override;
  void abort_after_timeout(const std::string& message) override { group_->abort_after_timeout(message); }
  // Both hops take the context and the profiler, and their sums are this one's volume.
  void set_context(std::string context) override;
  void set_options(const CommOptions& options) override;
  void set_profiler(OpProfiler* profiler) override;
  std::int64_t elements_sent() const override;
  std::int64_t bytes_sent() const override;

  // The two hops, for what is counted apart: elements sent inside this rank's group and across the
  // groups (Communicator::elements_sent of each), and the group's index.
  Communicator& group() { return *group_; }
  const Communicator& group() const { return *group_; }
  const Communicator& replicas() const { return *replicas_; }
  int group_index() const { return group_index_; }

 private:
  // `inside` (a collective in the group leaving `result`), then `result` all-reduced across the
  // groups: the second hop starts at once where both hops order on the device (NCCL, the exact
  // wire), else when a wait or test finds the first done ([Note: the second hop, queued at once on
  // the device]).
  Work then_across(Work inside, TensorView result, ReduceOp op, const char* what);
  bool starts_across_at_once() const;

  std::unique_ptr<Communicator> owned_world_;  // first: destroyed after its splits
  std::unique_ptr<Communicator> group_;        // the g ranks of this group
  std::unique_ptr<Communicator> replicas_;     // the N/g ranks holding this rank's shard, one per group
  int group_index_ = 0;
  WireDType across_ = WireDType::kExact;
  MemoryTracker* tracker_ = nullptr;
  ExecContext ctx_;
};

}  // namespace zt
