// ZeroParamStore on one rank: the stage-3 state machine (prefetch, keep for backward, reshard),
// the schedule contract (GptModel's real calls equal its declared schedules; a call out of order
// is refused), the persistence threshold, every option giving the stage-0 gradients, the
// gradients added in place into the store's zero storage (the same bits as through the scratch),
// and stages 2-3 writing a step's first reduction into the gradient shard.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "engine/base/core/check.h"
#include "engine/distributed/comm/local_communicator.h"
#include "engine/distributed/sharding/zero_param_store.h"
#include "kernels/cpu/cast.h"
#include "models/gpt/gpt_model.h"
#include "models/gpt/gpt_params.h"
#include "models/gpt/gpt_schedule.h"

namespace zt {
namespace {

const gpt::GptConfig kStoreTiny{/*n_layer=*/3, /*n_head=*/2, /*n_embd=*/16, /*block_size=*/8, /*vocab_size=*/40};

// Forwards to a ZeroParamStore and records every call, to compare with the declared schedules.
// With offer_in_place false it hides the store's in-place gradients: the model then adds every
// contribution through its fp32 scratch.
class RecordingStore final : public ParamStore {
 public:
  explicit RecordingStore(ZeroParamStore& inner, bool offer_in_place = true)
      : inner_(inner), offer_in_place_(offer_in_place) {}
  const ParamTable& table() const override { return inner_.table(); }
  DType param_dtype() const override { return inner_.param_dtype(); }
  TensorView acquire_params(int u, Pass p) override {
    calls.push_back({UnitOp::kAcquire, u});
    return inner_.acquire_params(u, p);
  }
  void release_params(int u, Pass p) override {
    calls.push_back({UnitOp::kRelease, u});
    inner_.release_params(u, p);
  }
  void accumulate_grads(int u, TensorView g) override {
    calls.push_back({UnitOp::kAccumulate, u});
    inner_.accumulate_grads(u, g);
  }
  TensorView in_place_grads(int u) override {
    TensorView v = offer_in_place_ ? inner_.in_place_grads(u) : TensorView{};
    if (v.data != nullptr) in_place_units.push_back(u);
    return v;
  }
  void grads_ready(int u) override {
    calls.push_back({UnitOp::kGradsReady, u});
    inner_.grads_ready(u);
  }
  void begin_pass(Pass p, const PassSchedule& s, const PassSchedule* backward) override {
    calls.clear();
    inner_.begin_pass(p, s, backward);
  }
  void end_pass(Pass p) override {
    passes.push_back(calls);
    inner_.end_pass(p);
  }
  PassSchedule calls;
  std::vector<PassSchedule> passes;
  std::vector<int> in_place_units;  // units offered in place, in the order asked

 private:
  ZeroParamStore& inner_;
  bool offer_in_place_;
};

struct Fixture {
  MemoryTracker tracker;
  ExecContext ctx{Device::kCPU, 1, nullptr};
  LocalCommunicator comm{tracker, {}};
  gpt::GptModel model;
  ZeroParamStore store;
  std::vector<std::int32_t> inputs, targets;

  Fixture(const ZeroOptions& zero, const char* checkpointing = "none", int B = 2, int T = 8)
      : model(kStoreTiny, B, T, policy(checkpointing), tracker, ctx),
        store(model.table(), DType::kF32, zero, comm, tracker, ctx),
        inputs(static_cast<std::size_t>(B * T)),
        targets(inputs.size()) {
    for (std::size_t u = 0; u < model.table().units().size(); ++u) {
      const std::int64_t n = model.table().units()[u].numel;
      std::vector<float> init(static_cast<std::size_t>(n));
      gpt::init_unit_params(model.table(), kStoreTiny, static_cast<int>(u), 11, init.data());
      cpu::cast(ctx, store.working_shard(static_cast<int>(u)).slice(0, n),
                TensorView{init.data(), DType::kF32, Device::kCPU, Shape{n}});
    }
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> tok(0, kStoreTiny.vocab_size - 1);
    for (auto& x : inputs) x = tok(rng);
    for (auto& x : targets) x = tok(rng);
  }
  static gpt::CheckpointPolicy policy(const char* text) {
    gpt::CheckpointPolicy p;
    EXPECT_TRUE(gpt::CheckpointPolicy::parse(text, &p));
    return p;
  }
  std::vector<float> grads() {
    std::vector<float> out;
    for (std::size_t u = 0; u < model.table().units().size(); ++u) {
      const TensorView g = store.grad_shard(static_cast<int>(u));
      const std::int64_t n = model.table().units()[u].numel;
      for (std::int64_t i = 0; i < n; ++i) out.push_back(g.as<float>()[i]);
    }
    return out;
  }
};

ZeroOptions stage(int s) {
  ZeroOptions z;
  z.stage = s;
  return z;
}

TEST(ZeroParamStore, GptModelMakesExactlyTheCallsItsSchedulesDeclare) {
  for (const char* checkpointing : {"none", "all"}) {
    Fixture f(stage(3), checkpointing);
    RecordingStore recorder(f.store);
    f.store.begin_step();
    f.model.forward(recorder, f.inputs.data(), f.targets.data());
    f.model.backward(recorder);
    ASSERT_EQ(recorder.passes.size(), 2u);
    EXPECT_EQ(recorder.passes[0], gpt::forward_schedule(kStoreTiny)) << checkpointing;
    EXPECT_EQ(recorder.passes[1], gpt::backward_schedule(kStoreTiny)) << checkpointing;
  }
}

// The head in vocabulary chunks: wte's chunk units (vocab 200: Vp 256 in chunks of 128, so chunk 0
// in the embeddings unit and chunk 1 in unit L + 2) are acquired by the embedding beside the
// embeddings, by the head beside ln_f, and in backward from the last, each made ready twice.
TEST(ZeroParamStore, AChunkedHeadMakesTheCallsOfItsSchedule) {
  const gpt::GptConfig config{/*n_layer=*/2, /*n_head=*/2, /*n_embd=*/16, /*block_size=*/8, /*vocab_size=*/200};
  MemoryTracker tracker;
  const ExecContext ctx{Device::kCPU, 1, nullptr};
  LocalCommunicator comm{tracker, {}};
  gpt::GptModel model(config, 2, 8, {}, tracker, ctx, 0.0f, 0, DType::kF32, UnitLayout{.head_chunks = 2});
  ZeroParamStore store(model.table(), DType::kF32, stage(3), comm, tracker, ctx);
  RecordingStore recorder(store);
  const std::vector<std::int32_t> tokens(16, 7);
  store.begin_step();
  model.forward(recorder, tokens.data(), tokens.data());
  model.backward(recorder);
  ASSERT_EQ(recorder.passes.size(), 2u);
  EXPECT_EQ(recorder.passes[0], gpt::forward_schedule(config, {.head_chunks = 2}));
  EXPECT_EQ(recorder.passes[1], gpt::backward_schedule(config, {.head_chunks = 2}));
  using enum UnitOp;
  const int emb = gpt::embedding_unit(), fin = gpt::final_unit(config), wte1 = gpt::wte_unit(config, 1);
  EXPECT_EQ(wte1, 4);
  const PassSchedule forward{{kAcquire, emb}, {kAcquire, wte1}, {kRelease, wte1}, {kRelease, emb}, {kAcquire, 1},
                             {kRelease, 1},   {kAcquire, 2},    {kRelease, 2},    {kAcquire, fin}, {kAcquire, emb},
                             {kRelease, emb}, {kAcquire, wte1}, {kRelease, wte1}, {kRelease, fin}};
  EXPECT_EQ(gpt::forward_schedule(config, {.head_chunks = 2}), forward);
  const PassSchedule backward_head{{kAcquire, wte1}, {kAccumulate, wte1}, {kGradsReady, wte1}, {kRelease, wte1},
                                   {kAcquire, emb},  {kAccumulate, emb},  {kGradsReady, emb},  {kRelease, emb}};
  const PassSchedule bwd = gpt::backward_schedule(config, {.head_chunks = 2});
  EXPECT_EQ(PassSchedule(bwd.begin(), bwd.begin() + 8), backward_head);
  const PassSchedule backward_tail{{kAccumulate, emb}, {kGradsReady, emb}, {kAccumulate, wte1}, {kGradsReady, wte1}};
  EXPECT_EQ(PassSchedule(bwd.end() - 4, bwd.end()), backward_tail);
}

// Blocks in two units: each block's attention and MLP units in turn, the MLP's first in backward,
// both first for a checkpointed block's recompute; the model makes exactly these calls.
TEST(ZeroParamStore, SplitBlocksMakeTheCallsOfTheirSchedule) {
  for (const char* checkpointing : {"none", "all"}) {
    SCOPED_TRACE(checkpointing);
    MemoryTracker tracker;
    const ExecContext ctx{Device::kCPU, 1, nullptr};
    LocalCommunicator comm{tracker, {}};
    const UnitLayout layout{.head_chunks = 1, .block_units = 2};
    const gpt::CheckpointPolicy policy = Fixture::policy(checkpointing);
    gpt::GptModel model(kStoreTiny, 2, 8, policy, tracker, ctx, 0.0f, 0, DType::kF32, layout);
    ZeroParamStore store(model.table(), DType::kF32, stage(3), comm, tracker, ctx);
    RecordingStore recorder(store);
    const std::vector<std::int32_t> tokens(16, 7);
    store.begin_step();
    model.forward(recorder, tokens.data(), tokens.data());
    model.backward(recorder);
    ASSERT_EQ(recorder.passes.size(), 2u);
    EXPECT_EQ(recorder.passes[0], gpt::forward_schedule(kStoreTiny, layout));
    EXPECT_EQ(recorder.passes[1], gpt::backward_schedule(kStoreTiny, layout, policy));
    using enum UnitOp;
    const int attn = gpt::block_unit(2), mlp = gpt::mlp_unit(kStoreTiny, layout, 2);
    const PassSchedule bwd = gpt::backward_schedule(kStoreTiny, layout, policy);
    const PassSchedule last_block =
        policy.is_checkpointed(2)
            ? PassSchedule{{kAcquire, attn}, {kAcquire, mlp},     {kAccumulate, mlp},  {kGradsReady, mlp},
                           {kRelease, mlp},  {kAccumulate, attn}, {kGradsReady, attn}, {kRelease, attn}}
            : PassSchedule{{kAcquire, mlp},  {kAccumulate, mlp},  {kGradsReady, mlp},  {kRelease, mlp},
                           {kAcquire, attn}, {kAccumulate, attn}, {kGradsReady, attn}, {kRelease, attn}};
    EXPECT_EQ(PassSchedule(bwd.begin() + 7, bwd.begin() + 15), last_block);
  }
}

TEST(ZeroParamStore, StageThreePrefetchesKeepsTheHeadForBackwardAndReshardsEverything) {
  Fixture f(stage(3));
  const PassSchedule fwd = gpt::forward_schedule(kStoreTiny), bwd = gpt::backward_schedule(kStoreTiny);
  const int emb = gpt::embedding_unit(), b0 = gpt::block_unit(0), fin = gpt::final_unit(kStoreTiny);
  f.store.begin_pass(Pass::kForward, fwd, &bwd);
  f.store.acquire_params(emb, Pass::kForward);
  EXPECT_EQ(f.store.unit_state(emb), UnitState::kGathered);
  EXPECT_EQ(f.store.unit_state(b0), UnitState::kGathering);  // prefetched while emb computes
  EXPECT_EQ(f.store.unit_state(gpt::block_unit(1)), UnitState::kSharded);
  f.store.release_params(emb, Pass::kForward);
  EXPECT_EQ(f.store.unit_state(emb), UnitState::kSharded);
  for (int l = 0; l < kStoreTiny.n_layer; ++l) {
    f.store.acquire_params(gpt::block_unit(l), Pass::kForward);
    f.store.release_params(gpt::block_unit(l), Pass::kForward);
    EXPECT_EQ(f.store.unit_state(gpt::block_unit(l)), UnitState::kSharded);
  }
  EXPECT_EQ(f.store.unit_state(fin), UnitState::kGathering);
  f.store.acquire_params(fin, Pass::kForward);
  f.store.acquire_params(emb, Pass::kForward);
  f.store.release_params(emb, Pass::kForward);
  f.store.release_params(fin, Pass::kForward);
  f.store.end_pass(Pass::kForward);
  // The head's units stay gathered: backward begins with them.
  EXPECT_EQ(f.store.unit_state(emb), UnitState::kGathered);
  EXPECT_EQ(f.store.unit_state(fin), UnitState::kGathered);
  // A forward that is not followed by backward (evaluation) reshards them first and keeps none.
  f.store.begin_pass(Pass::kForward, fwd, nullptr);
  EXPECT_EQ(f.store.unit_state(emb), UnitState::kSharded);
  for (const UnitEvent& e : fwd) {
    if (e.op == UnitOp::kAcquire) f.store.acquire_params(e.unit, Pass::kForward);
    if (e.op == UnitOp::kRelease) f.store.release_params(e.unit, Pass::kForward);
  }
  f.store.end_pass(Pass::kForward);
  for (int u = 0; u < static_cast<int>(f.model.table().units().size()); ++u) {
    EXPECT_EQ(f.store.unit_state(u), UnitState::kSharded) << u;
  }
}

TEST(ZeroParamStore, ACallOutOfScheduleIsRefused) {
  Fixture f(stage(3));
  const PassSchedule fwd = gpt::forward_schedule(kStoreTiny), bwd = gpt::backward_schedule(kStoreTiny);
  f.store.begin_pass(Pass::kForward, fwd, &bwd);
  try {
    f.store.acquire_params(gpt::block_unit(0), Pass::kForward);  // the schedule starts with the embeddings
    FAIL() << "an acquire out of order was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("the schedule says acquire_params(unit 0)"), std::string::npos) << e.what();
  }
}

TEST(ZeroParamStore, ReshardAfterForwardOffKeepsEveryUnitUntilItsBackward) {
  ZeroOptions z = stage(3);
  z.reshard_after_forward = false;
  Fixture f(z);
  f.store.begin_step();
  f.model.forward(f.store, f.inputs.data(), f.targets.data());
  for (int u = 0; u < static_cast<int>(f.model.table().units().size()); ++u) {
    EXPECT_EQ(f.store.unit_state(u), UnitState::kGathered) << u;
  }
  f.model.backward(f.store);
  for (int u = 0; u < static_cast<int>(f.model.table().units().size()); ++u) {
    EXPECT_EQ(f.store.unit_state(u), UnitState::kSharded) << u;
  }
}

TEST(ZeroParamStore, UnitsBelowThePersistenceThresholdStayWhole) {
  ZeroOptions z = stage(3);
  z.persistence_threshold = 1000;  // the final LayerNorm (2 C = 32 elements) stays whole
  Fixture f(z);
  EXPECT_FALSE(f.store.params_sharded(gpt::final_unit(kStoreTiny)));
  EXPECT_TRUE(f.store.params_sharded(gpt::embedding_unit()));  // (64 padded vocab + 8 positions) x 16
  EXPECT_TRUE(f.store.params_sharded(gpt::block_unit(0)));
  EXPECT_EQ(f.store.unit_state(gpt::final_unit(kStoreTiny)), UnitState::kGathered);
}

// On one rank every stage and option computes the same gradients as stage 0, bit for bit.
TEST(ZeroParamStore, EveryStageAndOptionGivesStageZerosGradients) {
  Fixture ref(stage(0));
  ref.store.begin_step();
  ref.model.forward(ref.store, ref.inputs.data(), ref.targets.data());
  ref.model.backward(ref.store);
  const std::vector<float> expected = ref.grads();
  std::vector<ZeroOptions> options;
  for (int s = 1; s <= 3; ++s) options.push_back(stage(s));
  ZeroOptions z = stage(3);
  z.overlap_comm = false;
  options.push_back(z);
  z = stage(3);
  z.prefetch_units = 3;
  z.max_inflight_reductions = 1;
  options.push_back(z);
  z = stage(3);
  z.reshard_after_forward = false;
  z.persistence_threshold = 1000;
  options.push_back(z);
  for (const ZeroOptions& o : options) {
    Fixture f(o);
    f.store.begin_step();
    f.model.forward(f.store, f.inputs.data(), f.targets.data());
    f.model.backward(f.store);
    EXPECT_EQ(f.grads(), expected) << "stage " << o.stage << " overlap " << o.overlap_comm << " prefetch "
                                   << o.prefetch_units;
  }
}

// The store offers its gradient storage while it holds zero: every unit's first contribution of a
// step goes there in place (the tied embedding's second goes through the scratch), nothing in a
// later micro-batch, everything again after begin_step; and the gradients are bitwise those of
// the scratch path, after one micro-batch and after two. A gradient that pends for a reduction of
// its own (stages 2-3 with the collectives of one rank kept, zero.solo_path false) is offered its
// new pending buffer every micro-batch, with the same bits.
TEST(ZeroParamStore, InPlaceGradientsWhileTheStorageIsZeroGiveTheScratchPathsBits) {
  for (auto [s, pending] : {std::pair{0, false}, {2, false}, {2, true}, {3, true}}) {
    ZeroOptions options = stage(s);
    options.solo_path = !pending;
    Fixture in_place(options), scratch(options);
    RecordingStore offered(in_place.store), hidden(scratch.store, /*offer_in_place=*/false);
    const int units = static_cast<int>(in_place.model.table().units().size());
    in_place.store.begin_step();
    scratch.store.begin_step();
    for (int micro = 0; micro < 2; ++micro) {
      for (auto [f, r] : {std::pair<Fixture*, RecordingStore*>{&in_place, &offered}, {&scratch, &hidden}}) {
        f->store.set_micro_batch(micro, 2);
        f->model.forward(*r, f->inputs.data(), f->targets.data());
        f->model.backward(*r);
      }
      // Micro-batch 0: each unit once (the embeddings for the head's contribution); 1: none, or,
      // pending, each unit again.
      EXPECT_EQ(offered.in_place_units.size(), static_cast<std::size_t>(pending ? (micro + 1) * units : units))
          << "stage " << s << " micro " << micro;
      EXPECT_TRUE(hidden.in_place_units.empty());
      EXPECT_EQ(in_place.grads(), scratch.grads()) << "stage " << s << " micro-batch " << micro;
      if (pending) continue;  // asking would lend a new pending buffer
      for (int u = 0; u < units; ++u) EXPECT_EQ(in_place.store.in_place_grads(u).data, nullptr) << "unit " << u;
    }
    if (pending) continue;
    in_place.store.begin_step();
    for (int u = 0; u < units; ++u) EXPECT_NE(in_place.store.in_place_grads(u).data, nullptr) << "unit " << u;
  }
}

// With resharding after forward off, a unit its backward never acquires (an untied Llama's token
// table: the embedding's scatter-add reads no weights) is resharded at its forward release, not kept
// gathered through a backward that never releases it; the units the backward reads are kept.
TEST(ZeroParamStore, ReshardAfterForwardOffKeepsOnlyWhatTheBackwardReads) {
  ParamTable table;
  for (int u = 0; u < 2; ++u) {
    table.add_unit("u" + std::to_string(u));
    table.add_param("p" + std::to_string(u), {6}, {6}, true);
  }
  using enum UnitOp;
  const PassSchedule forward = {{kAcquire, 0}, {kRelease, 0}, {kAcquire, 1}, {kRelease, 1}};
  const PassSchedule backward = {{kAcquire, 1}, {kAccumulate, 1}, {kGradsReady, 1},
                                 {kRelease, 1}, {kAccumulate, 0}, {kGradsReady, 0}};  // u0 read by none
  MemoryTracker tracker;
  ExecContext ctx{Device::kCPU, 1, nullptr};
  LocalCommunicator comm{tracker, {}};
  ZeroOptions options = stage(3);
  options.reshard_after_forward = false;
  options.solo_path = false;  // the gathers of one rank, as on several
  ZeroParamStore store(table, DType::kF32, options, comm, tracker, ctx);
  std::vector<float> g(6, 1.0f);
  const TensorView grad{g.data(), DType::kF32, Device::kCPU, Shape{6}};
  for (int step = 0; step < 2; ++step) {
    store.begin_step();
    store.set_micro_batch(0, 1);
    store.begin_pass(Pass::kForward, forward, &backward);
    for (int u = 0; u < 2; ++u) {
      store.acquire_params(u, Pass::kForward);
      store.release_params(u, Pass::kForward);
    }
    store.end_pass(Pass::kForward);
    EXPECT_EQ(store.unit_state(0), UnitState::kSharded);
    EXPECT_EQ(store.unit_state(1), UnitState::kGathered);
    store.begin_pass(Pass::kBackward, backward, nullptr);
    store.acquire_params(1, Pass::kBackward);
    store.accumulate_grads(1, grad);
    store.grads_ready(1);
    store.release_params(1, Pass::kBackward);
    store.accumulate_grads(0, grad);
    store.grads_ready(0);
    store.end_pass(Pass::kBackward);
    EXPECT_EQ(store.unit_state(0), UnitState::kSharded);
    EXPECT_EQ(store.unit_state(1), UnitState::kSharded);
  }
}

// Stages 2-3 (StagePolicy::first_reduction_into_shard): begin_step leaves the gradient shards as
// they are, the step's first reduction of a unit writes its shard and later ones add to it, and a
// shard no reduction wrote is zeroed at the end of the step's last backward. Whatever a shard held
// before (NaN here) is never read: a step's gradients are its own contributions only, with one
// micro-batch or two, and a unit without a contribution ends the step at zero.
TEST(ZeroParamStore, TheStepsFirstReductionWritesTheGradientShard) {
  ParamTable table;
  for (int u = 0; u < 2; ++u) {
    table.add_unit("u" + std::to_string(u));
    table.add_param("p" + std::to_string(u), {6 - u}, {6 - u}, true);
  }
  using enum UnitOp;
  const PassSchedule forward = {{kAcquire, 0}, {kRelease, 0}, {kAcquire, 1}, {kRelease, 1}};
  const PassSchedule backward = {{kAcquire, 1},    {kRelease, 1},    {kAcquire, 0},
                                 {kAccumulate, 0}, {kGradsReady, 0}, {kRelease, 0}};  // u1: no gradient
  for (int s : {2, 3}) {
    MemoryTracker tracker;
    ExecContext ctx{Device::kCPU, 1, nullptr};
    LocalCommunicator comm{tracker, {}};
    ZeroOptions options = stage(s);
    options.solo_path = false;  // the reductions of one rank, as on several
    ZeroParamStore store(table, DType::kF32, options, comm, tracker, ctx);
    for (int micro_batches : {1, 2, 1}) {
      SCOPED_TRACE(::testing::Message() << "stage " << s << ", " << micro_batches << " micro-batch(es)");
      store.begin_step();
      for (int u = 0; u < 2; ++u) {
        const TensorView g = store.grad_shard(u);
        for (std::int64_t i = 0; i < g.numel(); ++i) g.as<float>()[i] = NAN;
      }
      std::vector<float> sum(6, 0.0f);
      for (int m = 0; m < micro_batches; ++m) {
        store.set_micro_batch(m, micro_batches);
        store.begin_pass(Pass::kForward, forward, &backward);
        for (int u = 0; u < 2; ++u) {
          store.acquire_params(u, Pass::kForward);
          store.release_params(u, Pass::kForward);
        }
        store.end_pass(Pass::kForward);
        std::vector<float> g(6);
        for (int i = 0; i < 6; ++i) g[i] = 0.25f * static_cast<float>(i + 1) * static_cast<float>(m + 1);
        for (int i = 0; i < 6; ++i) sum[i] += g[i];
        store.begin_pass(Pass::kBackward, backward, nullptr);
        store.acquire_params(1, Pass::kBackward);
        store.release_params(1, Pass::kBackward);
        store.acquire_params(0, Pass::kBackward);
        store.accumulate_grads(0, TensorView{g.data(), DType::kF32, Device::kCPU, Shape{6}});
        store.grads_ready(0);
        store.release_params(0, Pass::kBackward);
        store.end_pass(Pass::kBackward);
      }
      const TensorView g0 = store.grad_shard(0), g1 = store.grad_shard(1);
      EXPECT_EQ(std::vector<float>(g0.as<float>(), g0.as<float>() + 6), sum);
      EXPECT_EQ(std::vector<float>(g1.as<float>(), g1.as<float>() + 5), std::vector<float>(5, 0.0f));
    }
  }
}

}  // namespace
}  // namespace zt
