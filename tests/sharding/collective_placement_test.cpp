// The parameter store's collectives keep the Communicator contract on every rank of a world: a
// rank's n-element piece (an all-gather's send, a reduce-scatter's recv) that overlaps the
// world * n buffer must be exactly its slot, buffer + rank * n, which NCCL calls in place; any
// other overlap is undefined there (the CPU backends stage, so the tests of real ranks cannot see
// it). A unit smaller than (N - 1) * ceil(n / N) leaves its last ranks only padding, and their slot
// is r * s, not the unit's end. A checking communicator stands in for N ranks, one at a time.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/distributed/comm/communicator.h"
#include "engine/distributed/sharding/shard_layout.h"
#include "engine/distributed/sharding/zero_param_store.h"

namespace zt {
namespace {

class PlacementCheckingCommunicator final : public Communicator {
 public:
  PlacementCheckingCommunicator(int rank, int world) : Communicator(CommOptions{}), rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string backend_name() const override { return "placement-check"; }
  Work all_gather(TensorView send, TensorView recv) override {
    check("all_gather", send, recv);
    return Work();
  }
  Work reduce_scatter(TensorView send, TensorView recv, ReduceOp) override {
    check("reduce_scatter", recv, send);
    ++reduce_scatters;
    return Work();
  }
  Work all_reduce(TensorView, ReduceOp) override { return Work(); }
  Work broadcast(TensorView, int) override { return Work(); }
  void barrier() override {}

  int reduce_scatters = 0;
  int in_place = 0;

 private:
  void check(const char* op, const TensorView& piece, const TensorView& whole) {
    ASSERT_EQ(whole.numel(), piece.numel() * world_) << op;
    const char* p = static_cast<const char*>(piece.data);
    const char* w = static_cast<const char*>(whole.data);
    const bool disjoint = p + piece.size_bytes() <= w || w + whole.size_bytes() <= p;
    const bool slot = p == w + static_cast<std::ptrdiff_t>(rank_) * static_cast<std::ptrdiff_t>(piece.size_bytes());
    EXPECT_TRUE(disjoint || slot) << op << " on rank " << rank_ << " of " << world_ << ": the piece starts "
                                  << (p - w) / static_cast<std::ptrdiff_t>(dtype_size_bytes(piece.dtype))
                                  << " elements into the buffer, its slot is at " << rank_ * piece.numel();
    if (slot) ++in_place;
  }
  int rank_, world_;
};

// Units of 5, 9 and 2 elements on 4 ranks: shards 2, 3, 1; rank 3 holds only padding of the first
// (its slot 6 lies past the unit's 5 elements), rank 3 of the last likewise.
ParamTable small_units() {
  ParamTable t;
  const std::int64_t sizes[] = {5, 9, 2};
  for (int u = 0; u < 3; ++u) {
    const std::string index = std::to_string(u);
    t.add_unit(std::string("u").append(index));
    t.add_param(std::string("p").append(index), {sizes[u]}, {sizes[u]}, true);
  }
  return t;
}

TEST(ShardLayout, APaddingOnlyRankKeepsItsSlotButHoldsNothing) {
  const ParamTable t = small_units();
  const UnitShard s = ShardLayout(t, 4, 3).unit(0);
  EXPECT_EQ(s.shard, 2);
  EXPECT_EQ(s.offset, 6);
  EXPECT_EQ(s.begin, 5);
  EXPECT_EQ(s.live(), 0);
  for (int rank = 0; rank < 3; ++rank) {
    const UnitShard r = ShardLayout(t, 4, rank).unit(1);
    EXPECT_EQ(r.offset, r.begin) << "a rank with real elements starts its slot with them";
    EXPECT_EQ(r.live(), 3);
  }
}

// One step of every unit through the store: forward acquires and releases, backward contributes
// gradients, then the parameters are published.
void one_step(ZeroParamStore& store, const ParamTable& table) {
  const int units = static_cast<int>(table.units().size());
  PassSchedule forward, backward;
  for (int u = 0; u < units; ++u) forward.insert(forward.end(), {{UnitOp::kAcquire, u}, {UnitOp::kRelease, u}});
  for (int u = units - 1; u >= 0; --u) {
    backward.insert(backward.end(),
                    {{UnitOp::kAcquire, u}, {UnitOp::kAccumulate, u}, {UnitOp::kGradsReady, u}, {UnitOp::kRelease, u}});
  }
  store.begin_step();
  store.set_micro_batch(0, 1);
  store.begin_pass(Pass::kForward, forward, &backward);
  for (int u = 0; u < units; ++u) {
    store.acquire_params(u, Pass::kForward);
    store.release_params(u, Pass::kForward);
  }
  store.end_pass(Pass::kForward);
  store.begin_pass(Pass::kBackward, backward, nullptr);
  for (int u = units - 1; u >= 0; --u) {
    store.acquire_params(u, Pass::kBackward);
    std::vector<float> g(static_cast<std::size_t>(table.units()[static_cast<std::size_t>(u)].numel), 1.0f);
    const Shape shape{static_cast<std::int64_t>(g.size())};
    store.accumulate_grads(u, TensorView{g.data(), DType::kF32, Device::kCPU, shape});
    store.grads_ready(u);
    store.release_params(u, Pass::kBackward);
  }
  store.end_pass(Pass::kBackward);
  store.publish_updated_params();
}

TEST(ZeroParamStore, EveryRanksCollectivesUseItsSlotOrDisjointBuffers) {
  const ParamTable table = small_units();
  const ExecContext ctx{Device::kCPU, 1, nullptr};
  for (int stage = 1; stage <= 3; ++stage) {
    for (int rank = 0; rank < 4; ++rank) {
      SCOPED_TRACE(::testing::Message() << "stage " << stage << " rank " << rank);
      MemoryTracker tracker;
      PlacementCheckingCommunicator comm(rank, 4);
      ZeroOptions zero;
      zero.stage = stage;
      ZeroParamStore store(table, DType::kF32, zero, comm, tracker, ctx);
      one_step(store, table);
      EXPECT_EQ(comm.reduce_scatters, 3) << "one reduce-scatter a unit";
      // Stage 1 reduces in place and publishes in place; stage 2 publishes in place.
      if (stage < 3) {
        EXPECT_GT(comm.in_place, 0);
      }
    }
  }
}

// Collectives that finish only when advanced, as a worker thread's or a device's do: counted as
// started and finished, so a test sees any left running when the store that owns their buffers goes.
class DeferredCommunicator final : public Communicator {
 public:
  DeferredCommunicator() : Communicator(CommOptions{}) {}
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  std::string backend_name() const override { return "deferred"; }
  Work all_gather(TensorView, TensorView) override { return deferred("all_gather"); }
  Work reduce_scatter(TensorView, TensorView, ReduceOp) override { return deferred("reduce_scatter"); }
  Work all_reduce(TensorView, ReduceOp) override { return deferred("all_reduce"); }
  Work broadcast(TensorView, int) override { return deferred("broadcast"); }
  void barrier() override {}

  int started = 0;
  int finished = 0;

 private:
  Work deferred(const char* op) {
    ++started;
    return Work([this, done = false]() mutable { return done || (done = true, ++finished, true); }, op, 60.0, nullptr);
  }
};

// Stage `stage` with units that publish after the step (stage 3: its persistent units).
ZeroOptions publishing_units(int stage) {
  ZeroOptions zero;
  zero.stage = stage;
  zero.persistence_threshold = stage == 3 ? 4 : 0;
  return zero;
}

// A run's last step publishes its updated units without waiting (each is waited at the unit's next
// acquire); a run that ends there (stopped by a signal, no save) destroyed the store with them in
// flight, their writes landing in freed buffers. The store waits for them as it goes.
TEST(ZeroParamStore, CollectivesInFlightAreWaitedForBeforeTheBuffersGo) {
  const ParamTable table = small_units();
  const ExecContext ctx{Device::kCPU, 1, nullptr};
  for (int stage = 1; stage <= 3; ++stage) {
    SCOPED_TRACE(::testing::Message() << "stage " << stage);
    MemoryTracker tracker;
    DeferredCommunicator comm;
    {
      ZeroParamStore store(table, DType::kF32, publishing_units(stage), comm, tracker, ctx);
      one_step(store, table);
      EXPECT_LT(comm.finished, comm.started) << "the publishes are in flight after the step";
    }
    EXPECT_EQ(comm.finished, comm.started);
    EXPECT_EQ(tracker.snapshot().current(MemCategory::kParameters), 0) << "a store that ends well frees its buffers";
  }
}

// A run failing on one rank (an exception unwinding it) cannot wait for its collectives in flight
// (a peer may never join them), and the backend goes on writing into their buffers until the
// communicator's teardown ends them: the store then keeps its buffers (and the collectives' Works,
// their staging) to the end of the process, still charged to the tracker, instead of freeing memory
// a late write would land in.
TEST(ZeroParamStore, AFailingRunKeepsTheBuffersOfCollectivesInFlight) {
  const ParamTable table = small_units();
  const ExecContext ctx{Device::kCPU, 1, nullptr};
  for (int stage = 1; stage <= 3; ++stage) {
    SCOPED_TRACE(::testing::Message() << "stage " << stage);
    MemoryTracker tracker;
    DeferredCommunicator comm;
    std::int64_t params_bytes = 0;
    try {
      ZeroParamStore store(table, DType::kF32, publishing_units(stage), comm, tracker, ctx);
      one_step(store, table);
      params_bytes = tracker.snapshot().current(MemCategory::kParameters);
      throw std::runtime_error("a failure on this rank");
    } catch (const std::runtime_error&) {}
    EXPECT_LT(comm.finished, comm.started) << "not waited: a peer may never join them";
    EXPECT_GT(params_bytes, 0);
    EXPECT_EQ(tracker.snapshot().current(MemCategory::kParameters), params_bytes)
        << "the parameters a publish writes are kept";
    EXPECT_GT(tracker.snapshot().current(MemCategory::kGradients), 0);
  }
}

}  // namespace
}  // namespace zt
