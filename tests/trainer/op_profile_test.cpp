// log.profile_ops through the real Trainer on one process: op_profile.json appears in the run
// directory with every op of the model, the parameter store and the optimizer counted as often as
// the model's structure says (the warm-up step excluded), times that fit inside the step, and with
// the key off no file at all.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "engine/app/config/run_config.h"
#include "engine/app/trainer/trainer.h"
#include "engine/distributed/comm/local_communicator.h"

namespace zt {
namespace {

namespace fs = std::filesystem;

constexpr int kLayers = 2, kAccum = 2, kSteps = 3;

RunConfig tiny_config(bool profile, int max_steps) {
  nlohmann::json doc = {
      {"model", {{"n_layer", kLayers}, {"n_head", 2}, {"n_embd", 16}, {"block_size", 16}, {"vocab_size", 64}}},
      {"data", {{"embedded_chars", 20000}}},
      {"train",
       {{"micro_batch", 2}, {"grad_accum", kAccum}, {"max_steps", max_steps}, {"eval_batches", 1}, {"num_threads", 2}}},
      {"log", {{"sample_tokens", 0}, {"progress", "plain"}, {"profile_ops", profile}}}};
  return parse_run_config(doc, "op_profile_test.json");
}

// Trains `config` in a fresh run directory; returns the directory.
fs::path train(const RunConfig& config, const std::string& tag) {
  std::string tmpl = (fs::temp_directory_path() / ("zt_op_profile_" + tag + "_XXXXXX")).string();
  const fs::path dir = mkdtemp(tmpl.data());
  MemoryTracker tracker;
  LocalCommunicator comm(tracker, CommOptions{});
  Trainer trainer(config, dir.string(), comm, tracker);
  const TrainSummary summary = trainer.run();
  EXPECT_EQ(summary.steps_done, config.train.max_steps);
  return dir;
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(OpProfile, CountsFollowTheModelAndTimesFitInTheStep) {
  const fs::path dir = train(tiny_config(true, kSteps), "on");
  ASSERT_TRUE(fs::exists(dir / "op_profile.json"));
  const nlohmann::json j = read_json(dir / "op_profile.json");
  // The first step of the run warms up and is dropped: steps 2 and 3 are profiled.
  const int profiled = kSteps - 1;
  EXPECT_EQ(j["profiled_steps"], profiled);
  EXPECT_EQ(j["warmup_steps_excluded"], 1);
  EXPECT_EQ(j["first_profiled_step"], 2);
  EXPECT_EQ(j["micro_batches_per_step"], kAccum);

  std::map<std::string, std::int64_t> calls;
  double ops_ms = 0.0;
  for (const nlohmann::json& op : j["ops"]) {
    calls[op["op"].get<std::string>()] = op["calls"].get<std::int64_t>();
    EXPECT_GE(op["total_ms"].get<double>(), 0.0) << op.dump();
    ops_ms += op["total_ms"].get<double>();
  }
  // Per micro-batch (no activation checkpointing, no dropout, CPU attention), from models/gpt:
  // each block runs 4 linear layers (qkv, attention projection, MLP up, MLP down), 1 LayerNorm,
  // 1 residual add fused with the second LayerNorm and 1 plain residual add, 1 attention and 1
  // GELU; the head adds 1 LayerNorm (ln_f) and 1 matmul (logits against the tied wte); the
  // embedding runs once, and the softmax cross-entropy once with its backward (the training
  // step's fused loss). Backward mirrors the rest, with 2 LayerNorm backwards a block. Per step: one multi-tensor AdamW
  // call and one sum of squares per unit for the gradient norm (units: the embeddings, each block, the final
  // LayerNorm).
  const std::int64_t per_step = static_cast<std::int64_t>(kAccum) * profiled;
  EXPECT_EQ(calls["matmul_forward"], (4 * kLayers + 1) * per_step);
  EXPECT_EQ(calls["matmul_backward"], (4 * kLayers + 1) * per_step);
  EXPECT_EQ(calls["layernorm_forward"], (kLayers + 1) * per_step);
  EXPECT_EQ(calls["layernorm_residual_forward"], kLayers * per_step);
  EXPECT_EQ(calls["layernorm_backward"], (2 * kLayers + 1) * per_step);
  EXPECT_EQ(calls["attention_forward"], kLayers * per_step);
  EXPECT_EQ(calls["attention_backward"], kLayers * per_step);
  EXPECT_EQ(calls["gelu_forward"], kLayers * per_step);
  EXPECT_EQ(calls["gelu_backward"], kLayers * per_step);
  EXPECT_EQ(calls["residual_forward"], kLayers * per_step);
  EXPECT_EQ(calls["embedding_forward"], per_step);
  EXPECT_EQ(calls["embedding_backward"], per_step);
  EXPECT_EQ(calls["softmax_cross_entropy_fused"], per_step);
  EXPECT_EQ(calls.count("softmax_cross_entropy_forward") + calls.count("softmax_cross_entropy_backward"), 0u)
      << "a training step takes the loss and its gradient in one op";
  EXPECT_EQ(calls["adamw_update_slices"], profiled);
  EXPECT_EQ(calls["sum_of_squares_each"], profiled) << "one call for every unit's gradient";
  EXPECT_EQ(calls.count("dropout_forward"), 0u) << "dropout 0 runs no dropout op";

  // CPU ops run one after another inside the step, so their sum cannot exceed it.
  const double step_ms = j["step_ms_total"].get<double>();
  EXPECT_GT(step_ms, 0.0);
  EXPECT_LE(ops_ms, step_ms);
  EXPECT_NEAR(j["ops_ms_total"].get<double>(), ops_ms, 1e-9 * step_ms + 1e-12);
  EXPECT_NEAR(j["outside_ops_ms_total"].get<double>(), step_ms - ops_ms, 1e-9 * step_ms + 1e-12);
  EXPECT_GE(j["outside_ops_share"].get<double>(), 0.0);
  EXPECT_EQ(j["device"], "cpu (2 threads)");
  fs::remove_all(dir);
}

TEST(OpProfile, KeyOffWritesNoProfile) {
  const fs::path dir = train(tiny_config(false, 2), "off");
  EXPECT_TRUE(fs::exists(dir / "metrics.jsonl"));
  EXPECT_FALSE(fs::exists(dir / "op_profile.json"));
  fs::remove_all(dir);
}

TEST(OpProfile, ARunOfOneStepHasOnlyTheWarmUpAndSaysSo) {
  const fs::path dir = train(tiny_config(true, 1), "one");
  const nlohmann::json j = read_json(dir / "op_profile.json");
  EXPECT_EQ(j["profiled_steps"], 0);
  EXPECT_TRUE(j["ops"].empty());
  EXPECT_EQ(j["step_ms_per_step"].get<double>(), 0.0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace zt
