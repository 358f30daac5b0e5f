// The Llama decoder through a ParamStore (models/llama/llama_model), on the CPU: the store follows
// its declared schedules (it refuses any other call), every gradient of the mean cross-entropy
// matches central differences (tied and untied heads), every ZeRO stage's store gives stage 0's
// gradients bit for bit on one rank, activation checkpointing, the head in chunks and layers in two
// units behave as the whole, and the memory a step measures is the footprint's prediction.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>

#include "engine/distributed/comm/local_communicator.h"
#include "engine/distributed/optim/sharded_adamw.h"
#include "engine/distributed/sharding/zero_param_store.h"
#include "kernels/cpu/cast.h"
#include "models/llama/llama_footprint.h"
#include "models/llama/llama_model.h"
#include "tests/models/position_losses.h"

namespace zt::llama {
namespace {

struct Fixture {
  MemoryTracker tracker;
  ExecContext ctx{Device::kCPU, 1, nullptr};
  LlamaConfig config;
  LlamaModel model;
  LocalCommunicator comm{tracker, {}};
  ZeroParamStore store;
  std::vector<std::int32_t> inputs, targets;

  Fixture(const LlamaConfig& c, int stage, int B = 2, int T = 6, CheckpointPolicy policy = {},
          DType params = DType::kF32, DType activations = DType::kF32, UnitLayout layout = {})
      : config(c),
        model(c, B, T, policy, tracker, ctx, activations, layout),
        store(model.table(), params, stage_options(stage), comm, tracker, ctx) {
    for (std::size_t u = 0; u < model.table().units().size(); ++u) {
      const std::int64_t n = model.table().units()[u].numel;
      std::vector<float> init(static_cast<std::size_t>(n));
      init_unit_params(model.table(), c, static_cast<int>(u), 9, init.data());
      // RMSNorm gains away from 1 and larger weights, so every gradient term matters.
      for (int index : model.table().units()[u].params) {
        const ParamSpec& p = model.table().param(index);
        for (std::int64_t i = 0; i < p.numel; ++i) {
          init[p.offset + i] = p.name.ends_with("norm.weight") ? 1.0f + 0.1f * std::sin(static_cast<float>(i))
                                                               : init[p.offset + i] * 10.0f;
        }
      }
      cpu::cast(ctx, store.working_shard(static_cast<int>(u)).slice(0, n),
                TensorView{init.data(), DType::kF32, Device::kCPU, Shape{n}});
    }
    std::mt19937 rng(4);
    std::uniform_int_distribution<int> tok(0, c.vocab_size - 1);
    inputs.resize(static_cast<std::size_t>(B * T));
    targets.resize(inputs.size());
    for (auto& x : inputs) x = tok(rng);
    for (auto& x : targets) x = tok(rng);
  }
  static ZeroOptions stage_options(int stage) {
    ZeroOptions z;
    z.stage = stage;
    return z;
  }
  float step() {
    store.begin_step();
    const float loss = model.forward(store, inputs.data(), targets.data());
    model.backward(store);
    return loss;
  }
  std::vector<float> grads() {  // every unit's gradient, widened to fp32
    std::vector<float> out;
    for (std::size_t u = 0; u < model.table().units().size(); ++u) {
      const std::int64_t n = model.table().units()[u].numel;
      out.resize(out.size() + static_cast<std::size_t>(n));
      cpu::cast(ctx, TensorView{out.data() + out.size() - n, DType::kF32, Device::kCPU, Shape{n}},
                store.grad_shard(static_cast<int>(u)).slice(0, n));
    }
    return out;
  }
  // Each tensor's gradient by name, its row parts (chunk units) put back together, widened to fp32.
  std::map<std::string, std::vector<float>> grads_by_name() {
    const std::vector<float> flat = grads();
    std::vector<std::int64_t> unit_start(model.table().units().size(), 0);
    for (std::size_t u = 1; u < unit_start.size(); ++u)
      unit_start[u] = unit_start[u - 1] + model.table().units()[u - 1].numel;
    std::map<std::string, std::vector<float>> out;
    for (const TensorParts& t : model.table().tensors()) {
      std::vector<float>& v = out[t.name];
      for (int index : t.parts) {
        const ParamSpec& p = model.table().param(index);
        const float* first = flat.data() + unit_start[static_cast<std::size_t>(p.unit)] + p.offset;
        v.insert(v.end(), first, first + p.numel);
      }
    }
    return out;
  }
};

LlamaConfig tiny(bool tied) {
  LlamaConfig c{
      /*n_layer=*/2,    /*n_head=*/4,      /*n_kv_head=*/2,      /*n_embd=*/16, /*intermediate_size=*/24,
      /*block_size=*/8, /*vocab_size=*/50, /*rope_theta=*/100.0f};
  c.tie_embeddings = tied;
  return c;
}

TEST(LlamaModel, GradientsMatchCentralDifferences) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied head" : "untied head");
    Fixture f(tiny(tied), 0);
    f.step();
    const std::vector<float> analytic = f.grads();
    const float h = 2e-3f;  // small against the curvature of the 10x weights, large against fp32's noise
    std::size_t flat = 0;
    for (std::size_t u = 0; u < f.model.table().units().size(); ++u) {
      float* w = f.store.working_shard(static_cast<int>(u)).as<float>();
      const std::int64_t n = f.model.table().units()[u].numel;
      for (std::int64_t i = 0; i < n; i += 5) {
        const float keep = w[i];
        w[i] = keep + h;
        const double up = f.model.forward(f.store, f.inputs.data(), f.targets.data());
        w[i] = keep - h;
        const double down = f.model.forward(f.store, f.inputs.data(), f.targets.data());
        w[i] = keep;
        const double numeric = (up - down) / (2.0 * h);
        EXPECT_NEAR(analytic[flat + i], numeric, 1e-3 + 2e-2 * std::abs(numeric)) << "unit " << u << " element " << i;
      }
      flat += static_cast<std::size_t>(n);
    }
  }
}

TEST(LlamaModel, EveryStageGivesStageZerosGradientsOnOneRank) {
  for (bool tied : {false, true}) {
    Fixture ref(tiny(tied), 0);
    const float loss = ref.step();
    const std::vector<float> expected = ref.grads();
    for (int stage = 1; stage <= 3; ++stage) {
      Fixture f(tiny(tied), stage);
      EXPECT_EQ(f.step(), loss) << "stage " << stage;
      EXPECT_EQ(f.grads(), expected) << "stage " << stage << (tied ? " tied" : " untied");
    }
  }
}

// The head in vocabulary chunks (3 chunks of 64 of the 192 padded columns, each a unit of its own):
// the whole head's loss and gradients up to rounding (the softmax's sums formed per chunk), on
// every ZeRO stage the same bits on one rank, tied and untied.
TEST(LlamaModel, ChunkedHeadMatchesTheWholeHead) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied head" : "untied head");
    LlamaConfig c = tiny(tied);
    c.vocab_size = 150;
    Fixture whole(c, 0);
    const float loss = whole.step();
    const auto expected = whole.grads_by_name();
    Fixture chunked(c, 0, 2, 6, {}, DType::kF32, DType::kF32, UnitLayout{3, 1});
    ASSERT_EQ(chunked.model.table().units().size(), whole.model.table().units().size() + (tied ? 2 : 3));
    EXPECT_NEAR(chunked.step(), loss, 2e-6 * loss);
    const auto got = chunked.grads_by_name();
    ASSERT_EQ(got.size(), expected.size());
    for (const auto& [name, g] : expected) {
      const std::vector<float>& h = got.at(name);
      ASSERT_EQ(h.size(), g.size()) << name;
      double worst = 0.0, scale = 1e-30;
      for (std::size_t i = 0; i < g.size(); ++i) {
        worst = std::max(worst, std::abs(static_cast<double>(h[i]) - g[i]));
        scale = std::max(scale, std::abs(static_cast<double>(g[i])));
      }
      EXPECT_LT(worst / scale, 1e-5) << name;
    }
    const std::vector<float> stage0 = chunked.grads();
    for (int stage = 1; stage <= 3; ++stage) {
      Fixture f(c, stage, 2, 6, {}, DType::kF32, DType::kF32, UnitLayout{3, 1});
      f.step();
      EXPECT_EQ(f.grads(), stage0) << "stage " << stage;
    }
  }
}

// Each position's loss out of the forward, the whole head and in chunks, tied and untied.
TEST(LlamaModel, PositionLossesAreEachRowsCrossEntropy) {
  for (bool tied : {false, true}) {
    for (int chunks : {1, 3}) {
      SCOPED_TRACE(::testing::Message() << (tied ? "tied, " : "untied, ") << chunks << " chunks");
      LlamaConfig c = tiny(tied);
      c.vocab_size = 150;
      Fixture f(c, 0, 2, 6, {}, DType::kF32, DType::kF32, UnitLayout{chunks, 1});
      std::vector<float> logits(f.inputs.size() * static_cast<std::size_t>(c.vocab_size)), losses(f.inputs.size());
      const float loss = f.model.forward(f.store, f.inputs.data(), f.targets.data(),
                                         {.training = false, .logits_out = logits.data(), .losses_out = losses.data()});
      zt::testing::expect_position_losses(losses, logits, f.targets, c.vocab_size, loss);
    }
  }
}

CheckpointPolicy policy(const char* text) {
  CheckpointPolicy p;
  EXPECT_TRUE(CheckpointPolicy::parse(text, &p));
  return p;
}

// A checkpointed layer recomputes the very forward it dropped: the same loss and gradients, bit for
// bit, whichever layers are checkpointed.
TEST(LlamaModel, ActivationCheckpointingGivesTheSameBits) {
  LlamaConfig c = tiny(false);
  c.n_layer = 3;
  Fixture ref(c, 0);
  const float loss = ref.step();
  const std::vector<float> expected = ref.grads();
  for (const char* p : {"all", "every:2"}) {
    Fixture f(c, 0, 2, 6, policy(p));
    EXPECT_EQ(f.step(), loss) << p;
    EXPECT_EQ(f.grads(), expected) << p;
  }
}

// Layers in two units (train.block_units = 2): each layer's attention and MLP halves gathered,
// freed and reduced apart run the whole layer's kernels in the same order, so the loss and every
// gradient are the whole layers' bits, with the head whole or in chunks, tied or untied, whichever
// layers are checkpointed (the recompute holds both halves), on every ZeRO stage.
TEST(LlamaModel, SplitLayersGiveTheWholeLayersBits) {
  // bf16 parameters with fp32 activations: the kernels read fp32 copies of the units, two at most
  // (KernelParams), which a checkpointed split layer's recompute holds at once.
  for (DType params : {DType::kF32, DType::kBF16}) {
    for (bool tied : {false, true}) {
      for (int chunks : {1, 3}) {
        for (const char* p : {"none", "all", "every:2"}) {
          SCOPED_TRACE(fmt::format("{} parameters, {} head in {} chunk(s), checkpointing {}", dtype_name(params),
                                   tied ? "tied" : "untied", chunks, p));
          LlamaConfig c = tiny(tied);
          c.n_layer = 3;
          c.vocab_size = 150;
          Fixture whole(c, 0, 2, 6, policy(p), params, DType::kF32, UnitLayout{chunks, 1});
          const float loss = whole.step();
          const auto expected = whole.grads_by_name();
          for (int stage = 0; stage <= 3; ++stage) {
            Fixture split(c, stage, 2, 6, policy(p), params, DType::kF32, UnitLayout{chunks, 2});
            ASSERT_EQ(split.model.table().units().size(), whole.model.table().units().size() + 3);
            EXPECT_EQ(split.model.table().units()[static_cast<std::size_t>(mlp_unit(c, {chunks, 2}, 0))].name,
                      "layers.0.mlp");
            EXPECT_EQ(split.step(), loss) << "stage " << stage;
            EXPECT_EQ(split.grads_by_name(), expected) << "stage " << stage;
          }
        }
      }
    }
  }
}

// One step with AdamW on one rank, measured by the tracker, against the prediction from Llama's
// footprint and schedule: every category to the byte, for each pairing of parameter and
// activation dtypes (bf16 parameters with fp32 activations read fp32 copies), whole or split layers.
TEST(LlamaModel, MeasuredMemoryEqualsThePrediction) {
  const std::pair<DType, DType> dtypes[] = {{DType::kF32, DType::kF32},
                                            {DType::kBF16, DType::kF32},
                                            {DType::kBF16, DType::kBF16},
                                            {DType::kF32, DType::kBF16}};
  for (const auto& [params, activations] : dtypes) {
    for (const char* p : {"none", "all", "every:2"}) {
      for (const UnitLayout layout : {UnitLayout{1, 1}, UnitLayout{3, 1}, UnitLayout{1, 2}, UnitLayout{3, 2}}) {
        for (bool tied : {false, true}) {
          SCOPED_TRACE(
              fmt::format("{} head in {} chunk(s), {} unit(s) a layer, checkpointing {}, parameters {}, "
                          "activations {}",
                          tied ? "tied" : "untied", layout.head_chunks, layout.block_units, p, dtype_name(params),
                          dtype_name(activations)));
          LlamaConfig c = tiny(tied);
          c.n_layer = 3;
          c.vocab_size = 150;
          Fixture f(c, 0, 3, 7, policy(p), params, activations, layout);
          ShardedAdamW optimizer(f.store, AdamWHyper{}, f.tracker, f.ctx);
          f.step();
          optimizer.step(1e-3f);
          const MemorySnapshot measured = f.tracker.snapshot();
          const StageMemory predicted = predict_rank_memory(
              f.model.table(), params, predict_footprint(c, 3, 7, policy(p), params, activations, Device::kCPU, layout),
              step_schedule(c, layout, policy(p)), ZeroOptions{}, 1);
          for (int i = 0; i < kNumMemCategories; ++i) {
            EXPECT_EQ(measured.peak_bytes[i], predicted.bytes[i]) << mem_category_name(static_cast<MemCategory>(i));
          }
        }
      }
    }
  }
}

// bf16 activations (every activation and activation gradient rounded to bf16, the kernels
// computing in fp32) track the fp32 model: the loss within 1e-2 relative, the gradients within 5e-2
// normwise (bf16's unit roundoff is 2^-8 ~ 3.9e-3, compounded over two layers and the head).
TEST(LlamaModel, Bf16ActivationsTrackFp32) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied head" : "untied head");
    Fixture ref(tiny(tied), 0);
    const float loss = ref.step();
    const std::vector<float> expected = ref.grads();
    Fixture f(tiny(tied), 0, 2, 6, {}, DType::kF32, DType::kBF16);
    EXPECT_NEAR(f.step(), loss, 1e-2 * loss);
    const std::vector<float> got = f.grads();
    double worst = 0.0, scale = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      worst = std::max(worst, std::abs(static_cast<double>(got[i]) - expected[i]));
      scale = std::max(scale, std::abs(static_cast<double>(expected[i])));
    }
    EXPECT_LT(worst / scale, 5e-2);
    EXPECT_GT(worst, 0.0);  // bf16 really was used
  }
}

}  // namespace
}  // namespace zt::llama
