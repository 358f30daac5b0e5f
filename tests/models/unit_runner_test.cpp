// UnitRunner (models/unit_runner.h) against a store and a family that only record: the store calls
// it makes are exactly the schedule block_schedule predicts, for whole and split blocks, with and
// without checkpointing; and between them it runs the family's math in the order the models ran
// it by hand before the runner (activations allocated, each half with the units it reads held, one
// gradient destination per unit handed to the store, activations freed), written out here step by
// step.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "models/block_schedule.h"
#include "models/unit_runner.h"

namespace zt {
namespace {

constexpr int kUnits = 8;
constexpr std::int64_t kUnitNumel = 4;

// Records each call into a shared trace; parameters and gradient destinations are views into
// per-unit buffers, so a view tells which unit it is.
struct Trace {
  std::vector<std::string> lines;
  PassSchedule store_calls;
  std::vector<std::vector<float>> params = std::vector<std::vector<float>>(kUnits, std::vector<float>(kUnitNumel));
  std::vector<std::vector<float>> grads = std::vector<std::vector<float>>(kUnits, std::vector<float>(kUnitNumel));

  // "p1" / "g1" for unit 1's parameters / gradient destination, "-" for an empty view.
  std::string name(const TensorView& v) const {
    if (v.data == nullptr) return "-";
    for (int u = 0; u < kUnits; ++u) {
      if (v.data == params[static_cast<std::size_t>(u)].data()) return "p" + std::to_string(u);
      if (v.data == grads[static_cast<std::size_t>(u)].data()) return "g" + std::to_string(u);
    }
    return "?";
  }
  std::string name(const BlockUnits& u) const { return "[" + name(u.attn) + " " + name(u.mlp) + "]"; }
};

class RecordingStore final : public ParamStore {
 public:
  explicit RecordingStore(Trace& trace) : trace_(trace) {}
  const ParamTable& table() const override { return table_; }
  DType param_dtype() const override { return DType::kF32; }
  TensorView acquire_params(int u, Pass) override {
    record(UnitOp::kAcquire, u, "acquire");
    return TensorView{trace_.params[static_cast<std::size_t>(u)].data(), DType::kF32, Device::kCPU, Shape{kUnitNumel}};
  }
  void release_params(int u, Pass) override { record(UnitOp::kRelease, u, "release"); }
  void accumulate_grads(int u, TensorView g) override {
    record(UnitOp::kAccumulate, u, "accumulate " + trace_.name(g));
  }
  void grads_ready(int u) override { record(UnitOp::kGradsReady, u, "grads_ready"); }
  void begin_pass(Pass, const PassSchedule&, const PassSchedule*) override {}
  void end_pass(Pass) override {}

 private:
  void record(UnitOp op, int unit, const std::string& what) {
    trace_.store_calls.push_back({op, unit});
    trace_.lines.push_back(what + " " + std::to_string(unit));
  }
  Trace& trace_;
  ParamTable table_;
};

class RecordingMath final : public BlockMath {
 public:
  explicit RecordingMath(Trace& trace) : trace_(trace) {}
  void allocate_block_activations(int block) override { line("allocate", block); }
  void free_block_activations(int block) override { line("free", block); }
  void forward_part(int block, BlockPart part, const BlockUnits& params) override {
    line(std::string("forward ") + part_name(part) + " " + trace_.name(params), block);
  }
  void recompute_block(int block, const BlockUnits& params) override {
    line("recompute " + trace_.name(params), block);
  }
  void backward_part(int block, BlockPart part, const BlockUnits& params, const BlockUnits& grads) override {
    line(std::string("backward ") + part_name(part) + " " + trace_.name(params) + " " + trace_.name(grads), block);
  }
  TensorView grad_destination(ParamStore&, int unit) override {
    trace_.lines.push_back("destination " + std::to_string(unit));
    return TensorView{trace_.grads[static_cast<std::size_t>(unit)].data(), DType::kF32, Device::kCPU,
                      Shape{kUnitNumel}};
  }

 private:
  static const char* part_name(BlockPart part) { return part == BlockPart::kAttention ? "attn" : "mlp"; }
  void line(const std::string& what, int block) { trace_.lines.push_back(what + " @" + std::to_string(block)); }
  Trace& trace_;
};

// Block 0 of a runner over one block in `units`, checkpointed or not: the forward's or the
// backward's trace.
Trace run_block(BlockUnitIds units, bool checkpointed, Pass pass) {
  Trace trace;
  RecordingStore store(trace);
  RecordingMath math(trace);
  MemoryTracker tracker;
  ParamTable table;
  KernelParams params(table, DType::kF32, tracker, ExecContext{});
  CheckpointPolicy policy;
  if (checkpointed) policy.kind = CheckpointPolicy::Kind::kAll;
  UnitRunner runner({units}, policy, params, math);
  if (pass == Pass::kForward) {
    runner.forward(store, 0);
  } else {
    runner.backward(store, 0);
  }
  return trace;
}

const BlockUnitIds kWhole{3, -1}, kSplit{3, 6};

TEST(UnitRunner, MakesExactlyTheStoreCallsTheBlockScheduleDeclares) {
  for (const BlockUnitIds& units : {kWhole, kSplit}) {
    for (bool checkpointed : {false, true}) {
      SCOPED_TRACE(::testing::Message() << (units.whole() ? "whole" : "split") << ", checkpointed " << checkpointed);
      PassSchedule forward, backward;
      add_block_forward(forward, units);
      add_block_backward(backward, units, checkpointed);
      EXPECT_EQ(run_block(units, checkpointed, Pass::kForward).store_calls, forward);
      EXPECT_EQ(run_block(units, checkpointed, Pass::kBackward).store_calls, backward);
    }
  }
}

using Lines = std::vector<std::string>;

TEST(UnitRunner, RunsAWholeBlockInItsOneUnit) {
  EXPECT_EQ(run_block(kWhole, false, Pass::kForward).lines,
            (Lines{"acquire 3", "allocate @0", "forward attn [p3 p3] @0", "forward mlp [p3 p3] @0", "release 3"}));
  EXPECT_EQ(run_block(kWhole, true, Pass::kForward).lines, (Lines{"acquire 3", "allocate @0", "forward attn [p3 p3] @0",
                                                                  "forward mlp [p3 p3] @0", "release 3", "free @0"}));
  // Both halves add into the one destination, taken after the recompute.
  EXPECT_EQ(run_block(kWhole, false, Pass::kBackward).lines,
            (Lines{"acquire 3", "destination 3", "backward mlp [p3 p3] [g3 g3] @0", "backward attn [p3 p3] [g3 g3] @0",
                   "free @0", "accumulate g3 3", "grads_ready 3", "release 3"}));
  EXPECT_EQ(
      run_block(kWhole, true, Pass::kBackward).lines,
      (Lines{"acquire 3", "allocate @0", "recompute [p3 p3] @0", "destination 3", "backward mlp [p3 p3] [g3 g3] @0",
             "backward attn [p3 p3] [g3 g3] @0", "free @0", "accumulate g3 3", "grads_ready 3", "release 3"}));
}

TEST(UnitRunner, RunsASplitBlockAHalfAtATime) {
  EXPECT_EQ(run_block(kSplit, false, Pass::kForward).lines,
            (Lines{"allocate @0", "acquire 3", "forward attn [p3 -] @0", "release 3", "acquire 6",
                   "forward mlp [- p6] @0", "release 6"}));
  EXPECT_EQ(run_block(kSplit, true, Pass::kForward).lines,
            (Lines{"allocate @0", "acquire 3", "forward attn [p3 -] @0", "release 3", "acquire 6",
                   "forward mlp [- p6] @0", "release 6", "free @0"}));
  // The MLP unit's gradient is final before the attention unit is acquired...
  EXPECT_EQ(run_block(kSplit, false, Pass::kBackward).lines,
            (Lines{"acquire 6", "destination 6", "backward mlp [- p6] [- g6] @0", "accumulate g6 6", "grads_ready 6",
                   "release 6", "acquire 3", "destination 3", "backward attn [p3 -] [g3 -] @0", "free @0",
                   "accumulate g3 3", "grads_ready 3", "release 3"}));
  // ...unless the recompute needs both: the attention unit first, held through the MLP half.
  EXPECT_EQ(run_block(kSplit, true, Pass::kBackward).lines,
            (Lines{"acquire 3", "acquire 6", "allocate @0", "recompute [p3 p6] @0", "destination 6",
                   "backward mlp [p3 p6] [- g6] @0", "accumulate g6 6", "grads_ready 6", "release 6", "destination 3",
                   "backward attn [p3 -] [g3 -] @0", "free @0", "accumulate g3 3", "grads_ready 3", "release 3"}));
}

}  // namespace
}  // namespace zt
