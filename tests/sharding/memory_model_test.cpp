// The ZeRO memory prediction: the paper's Figure 1, shard sizes and padding worked by hand, the
// stages' ordering, and the single-rank stage-0 figures against what the engine really allocates.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "engine/cli/commands/commands.h"
#include "engine/core/check.h"
#include "engine/comm/local_communicator.h"
#include "engine/optim/sharded_adamw.h"
#include "engine/sharding/memory_model.h"
#include "engine/sharding/zero_param_store.h"
#include "models/gpt/gpt_model.h"

namespace zt {
namespace {

using C = MemCategory;

const gpt::GptConfig kTiny{/*n_layer=*/2, /*n_head=*/2, /*n_embd=*/32, /*block_size=*/16, /*vocab_size=*/65};
const gpt::GptConfig kGpt2Small{12, 12, 768, 1024, 50257};
const gpt::GptConfig kGpt2Medium{24, 16, 1024, 1024, 50257};

TEST(PaperModelStates, Figure1SevenPointFiveBillionOn64Ranks) {
  const double expected[] = {120e9, 31.40625e9, 16.640625e9, 1.875e9};
  for (int stage = 0; stage < 4; ++stage) {
    EXPECT_EQ(predict_model_states(7'500'000'000, stage, 64).total(), expected[stage]) << "stage " << stage;
  }
  const ModelStateBytes s2 = predict_model_states(7'500'000'000, 2, 64);
  EXPECT_EQ(s2.parameters, 15e9);
  EXPECT_EQ(s2.gradients, 15e9 / 64);
  EXPECT_EQ(s2.optimizer_states, 90e9 / 64);
}

TEST(ShardSizes, CeilShardsPadTheLastRanks) {
  const ShardSizes a = shard_sizes(10, 3);  // ranks hold 4, 4, 2
  EXPECT_EQ(a.shard_numel, 4);
  EXPECT_EQ(a.padded_numel, 12);
  EXPECT_EQ(a.last_rank_padding, 2);
  const ShardSizes b = shard_sizes(5, 4);  // ranks hold 2, 2, 1, 0: the last shard is all padding
  EXPECT_EQ(b.shard_numel, 2);
  EXPECT_EQ(b.padded_numel, 8);
  EXPECT_EQ(b.last_rank_padding, 2);
  const ShardSizes c = shard_sizes(12, 3);
  EXPECT_EQ(c.shard_numel, 4);
  EXPECT_EQ(c.last_rank_padding, 0);
  const ShardSizes d = shard_sizes(7, 1);
  EXPECT_EQ(d.shard_numel, 7);
  EXPECT_EQ(d.padded_numel, 7);
  EXPECT_EQ(d.last_rank_padding, 0);
}

// Units of 10, 7 and 3 elements on 3 ranks: shards 4, 3, 1 (sum 8), rank 2 holds 2, 1, 1 of
// them (padding 2, 2, 0); the largest unit pads to 12.
ParamTable hand_table() {
  ParamTable t;
  const std::int64_t sizes[] = {10, 7, 3};
  for (int u = 0; u < 3; ++u) {
    t.add_unit("u" + std::to_string(u));
    t.add_param("p" + std::to_string(u), {sizes[u]}, {sizes[u]}, true);
  }
  return t;
}

struct Expected {
  std::int64_t params, grads, master, optimizer, comm, padding;
};

void expect_prediction(const StageMemory& m, const Expected& e, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(m[C::kParameters], e.params);
  EXPECT_EQ(m[C::kGradients], e.grads);
  EXPECT_EQ(m[C::kMasterWeights], e.master);
  EXPECT_EQ(m[C::kOptimizerStates], e.optimizer);
  EXPECT_EQ(m[C::kCommBuffers], e.comm);
  EXPECT_EQ(m[C::kActivations], 1000);
  EXPECT_EQ(m[C::kWorkspace], 500);
  EXPECT_EQ(m.padding_bytes, e.padding);
}

TEST(RankMemory, ThreeRanksThatDivideNoUnitWorkedByHand) {
  const ParamTable t = hand_table();
  const ModelFootprint fp{1000, 500};
  // Shards 4, 3, 1 (sum 8), padded units 12, 9, 3 (sum 24: 4 padding elements), last-rank shard
  // padding 2 + 2 + 0 = 4. Stages 1-2 keep whole units padded (W * 24), stage 1 its gradients too.
  // Stages 2-3 gradients: shards (W * 8) + pending embeddings-like first unit (12) + largest other (9).
  // Stage 3 parameters: shards (W * 8) + max(largest padded unit 12, first + last unit 12 + 3 = 15).
  // f32 (W = 4): reduce-scatter staging = fp32 output shard 4 * 4 = 16; stages 2-3 add the store's
  // fp32 reduced shard (16). Padding: m, v shard padding 8 * 4 = 32; padded units 4 * 4 per buffer;
  // gradient and parameter shards 4 * 4 each.
  const Expected f32[] = {{80, 80, 0, 160, 40, 0},
                          {96, 96, 0, 64, 16, 32 + 16 + 16},
                          {96, 32 + 4 * 21, 0, 64, 32, 32 + 16 + 16},
                          {32 + 4 * 15, 32 + 4 * 21, 0, 64, 32, 32 + 16 + 16}};
  // bf16 (W = 2, master 4 B per shard element): staging adds the fp32 copy of the bf16 input
  // (4 * 12): 16 + 48 = 64; stages 2-3 80. Padding: (4 + 8) * 4 = 48, then 2 * 4 per buffer.
  const Expected bf16[] = {{40, 40, 80, 160, 40, 0},
                           {48, 48, 32, 64, 64, 48 + 8 + 8},
                           {48, 16 + 2 * 21, 32, 64, 80, 48 + 8 + 8},
                           {16 + 2 * 15, 16 + 2 * 21, 32, 64, 80, 48 + 8 + 8}};
  for (int stage = 0; stage < 4; ++stage) {
    expect_prediction(predict_rank_memory(t, DType::kF32, fp, stage, 3), f32[stage], "f32 stage " + std::to_string(stage));
    expect_prediction(predict_rank_memory(t, DType::kBF16, fp, stage, 3), bf16[stage],
                      "bf16 stage " + std::to_string(stage));
  }
  // Deterministic reductions stage more: stage 0's all-reduce holds the padded unit twice plus a
  // shard (4 * (2 * 12 + 4)); a reduce-scatter adds the all-to-all chunks (4 * 12).
  ShardingOptions det;
  det.deterministic = true;
  EXPECT_EQ(predict_rank_memory(t, DType::kF32, fp, 0, 3, det)[C::kCommBuffers], 4 * (2 * 12 + 4));
  EXPECT_EQ(predict_rank_memory(t, DType::kF32, fp, 2, 3, det)[C::kCommBuffers], 32 + 48);
}

TEST(RankMemory, OneRankStagesDifferOnlyByTheirFullUnitBuffers) {
  const ParamTable t = gpt::build_param_table(kTiny);
  const std::int64_t first = t.units().front().numel, last = t.units().back().numel, block = 12704;  // 12 C^2 + 13 C
  ASSERT_GE(block, first);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const std::int64_t W = static_cast<std::int64_t>(dtype_size_bytes(dtype));
    const ModelFootprint fp = predict_gpt_footprint(kTiny, 4, 16, {}, dtype);
    StageMemory s[4];
    for (int stage = 0; stage < 4; ++stage) {
      s[stage] = predict_rank_memory(t, dtype, fp, stage, 1);
      EXPECT_EQ(s[stage].padding_bytes, 0);
      EXPECT_EQ(s[stage][C::kActivations], fp.activation_bytes);
      EXPECT_EQ(s[stage][C::kWorkspace], fp.workspace_bytes);
    }
    EXPECT_EQ(s[0].model_state_bytes(), (2 * W + (dtype == DType::kBF16 ? 12 : 8)) * t.total_numel());
    EXPECT_EQ(s[1].model_state_bytes(), s[0].model_state_bytes());
    // Pending gradients: the tied embeddings' and one block's; gathered: the largest unit, or the
    // head's final LayerNorm with the embeddings.
    EXPECT_EQ(s[2].model_state_bytes(), s[0].model_state_bytes() + W * (first + block));
    EXPECT_EQ(s[3].model_state_bytes(), s[2].model_state_bytes() + W * std::max(block, first + last));
    EXPECT_EQ(s[0][C::kCommBuffers], 0);  // one rank averages nothing
  }
}

// From 3 ranks on. At 2 ranks stage 2 can exceed stage 1 slightly for GPT-2: the tied embedding's
// full pending gradient (38.6M elements, alive through backward) plus one block's and the
// reduce-scatter staging outweigh the half of the gradients that sharding saves.
TEST(RankMemory, EachStageNeedsNoMoreThanTheLastForGpt2OnThreeOrMoreRanks) {
  for (const gpt::GptConfig& model : {kGpt2Small, kGpt2Medium}) {
    const ParamTable t = gpt::build_param_table(model);
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      const ModelFootprint fp = predict_gpt_footprint(model, 8, 1024, {}, dtype);
      for (int ranks : {3, 4, 7, 8, 64, 1000}) {
        std::int64_t previous = predict_rank_memory(t, dtype, fp, 0, ranks).total_bytes();
        for (int stage = 1; stage < 4; ++stage) {
          const std::int64_t total = predict_rank_memory(t, dtype, fp, stage, ranks).total_bytes();
          EXPECT_LE(total, previous) << "n_layer " << model.n_layer << " stage " << stage << " ranks " << ranks;
          previous = total;
        }
      }
    }
  }
}

// One optimizer step on one rank, measured by the tracker, against the stage-0 prediction at N=1.
void expect_measured_equals_predicted(DType dtype, const char* checkpointing) {
  SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " activation_checkpointing=" << checkpointing);
  gpt::CheckpointPolicy policy;
  ASSERT_TRUE(gpt::CheckpointPolicy::parse(checkpointing, &policy));
  const int B = 4, T = 16;
  MemoryTracker tracker;
  const ExecContext ctx{Device::kCPU, 2, nullptr};
  gpt::GptModel model(kTiny, B, T, policy, tracker, ctx);
  LocalCommunicator comm(tracker, {});
  ZeroParamStore store(model.table(), dtype, /*stage=*/0, comm, tracker, ctx);
  ShardedAdamW optimizer(store, cpu::AdamWHyper{}, tracker, ctx);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> token(0, kTiny.vocab_size - 1);
  std::vector<std::int32_t> inputs(B * T), targets(B * T);
  for (auto& x : inputs) x = token(rng);
  for (auto& x : targets) x = token(rng);
  store.begin_step();
  model.forward(store, inputs.data(), targets.data());
  model.backward(store);
  optimizer.step(1e-3f);
  const MemorySnapshot measured = tracker.snapshot();

  const StageMemory predicted = predict_rank_memory(
      model.table(), dtype, predict_gpt_footprint(kTiny, B, T, policy, dtype), /*stage=*/0, /*world_size=*/1);
  for (int i = 0; i < kNumMemCategories; ++i) {
    EXPECT_EQ(measured.peak_bytes[i], predicted.bytes[i]) << mem_category_name(static_cast<MemCategory>(i));
  }
  EXPECT_LE(measured.total_peak_bytes, predicted.total_bytes());
}

TEST(RankMemory, OneRankStageZeroEqualsWhatTheEngineAllocates) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (const char* checkpointing : {"none", "all"}) expect_measured_equals_predicted(dtype, checkpointing);
  }
}

TEST(MemoryCommand, PaperTablePrintsFigure1) {
  ::testing::internal::CaptureStdout();
  const int rc = cli::memory_main({"--params", "7.5e9", "--ranks", "64"});
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  for (const char* total : {"120.000", "31.406", "16.641", "1.875"}) EXPECT_NE(out.find(total), std::string::npos) << out;
}

TEST(MemoryCommand, JsonForAParamCountAndAConfig) {
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(cli::memory_main({"--params", "1e6", "--ranks", "4", "--k", "16", "--json"}), 0);
  const nlohmann::json paper = nlohmann::json::parse(::testing::internal::GetCapturedStdout());
  EXPECT_EQ(paper["stages"][3]["total_bytes"].get<double>(), 20e6 / 4);

  const auto path = std::filesystem::temp_directory_path() / "zt_memory_command_test.json";
  std::ofstream(path) << R"({"model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 16, "vocab_size": 65},
                             "train": {"micro_batch": 4}, "precision": {"param_dtype": "bf16"}})";
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(cli::memory_main({"--config", path.string(), "--ranks", "3", "--set", "train.micro_batch=2", "--json"}), 0);
  const nlohmann::json doc = nlohmann::json::parse(::testing::internal::GetCapturedStdout());
  RunConfig cfg = load_run_config(path.string(), {"train.micro_batch=2"});
  const StageMemory s2 = predict_rank_memory(cfg, 2, 3);
  EXPECT_EQ(doc["stages"][2]["bytes"]["gradients"].get<std::int64_t>(), s2[C::kGradients]);
  EXPECT_EQ(doc["stages"][2]["total"].get<std::int64_t>(), s2.total_bytes());
  EXPECT_EQ(doc["stages"][2]["padding"].get<std::int64_t>(), s2.padding_bytes);

  ::testing::internal::CaptureStdout();
  EXPECT_EQ(cli::memory_main({"--config", path.string(), "--ranks", "3"}), 0);
  EXPECT_NE(::testing::internal::GetCapturedStdout().find("stage 3"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(MemoryCommand, BadInputIsAnInputError) {
  const std::vector<std::vector<std::string>> bad = {
      {"--ranks", "4"},                                          // neither --config nor --params
      {"--params", "1e6", "--config", "x.json", "--ranks", "4"},  // both
      {"--params", "1.5", "--ranks", "4"},                       // not whole
      {"--params", "-3", "--ranks", "4"},
      {"--params", "lots", "--ranks", "4"},
      {"--params", "1e6", "--ranks", "0"},
      {"--params", "1e6"},                                       // --ranks missing
      {"--params", "1e6", "--ranks", "4", "--set", "train.micro_batch=2"},
      {"--config", "/nonexistent/zt.json", "--ranks", "4"},
  };
  for (const auto& args : bad) EXPECT_THROW(cli::memory_main(args), InputError) << ::testing::PrintToString(args);
}

}  // namespace
}  // namespace zt
