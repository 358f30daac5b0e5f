// What the unit layouts and the in-flight bound buy, in the prediction `zerotrain memory` prints
// (predict_run_memory; measured = predicted is tests/sharding/zero_memory_test.py's): issue 21's
// targets. GPT-2 1.5B on 64 ranks below DeepSpeed's estimator at stages 2 and 3, each stage no
// larger than the one before from N = 4, the 8-layer test model at 4 ranks saving 3.5x of stage
// 0's model states at stage 3, and GPT-2 124M's activations falling by the logits.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/app/config/run_config.h"
#include "engine/app/trainer/run_memory.h"
#include "models/gpt/activations.h"
#include "models/gpt/gpt_family.h"

namespace zt {
namespace {

using C = MemCategory;

std::int64_t model_states(const StageMemory& m) {
  return m[C::kParameters] + m[C::kGradients] + m[C::kMasterWeights] + m[C::kOptimizerStates];
}

RunConfig config_of(const std::string& json, const std::vector<std::string>& sets) {
  const auto path = std::filesystem::temp_directory_path() / "zt_unit_layout_memory_test.json";
  std::ofstream(path) << json;
  RunConfig c = load_run_config(path.string(), sets);
  std::filesystem::remove(path);
  return c;
}

// configs/gpt2_350m.json scaled to GPT-2 1.5B (48 layers, 1600 wide).
const char* kGpt2Xl = R"({"device": "cuda",
  "model": {"n_layer": 48, "n_head": 25, "n_embd": 1600, "block_size": 1024, "vocab_size": 50257},
  "train": {"micro_batch": 8, "seq_len": 1024},
  "precision": {"param_dtype": "bf16", "matmul": "bf16", "activations": "bf16"}})";

TEST(UnitLayoutMemory, Gpt2XlOn64RanksIsBelowDeepSpeedsEstimator) {
  // DeepSpeed's estimator for this model: stage 2 2 Psi + 18 Psi / N, stage 3 4 x the largest
  // layer (the 80.5 M-element embedding) + 18 Psi / N.
  const RunConfig defaults = config_of(kGpt2Xl, {});
  EXPECT_GT(model_states(predict_run_memory(defaults, 3, 64)), 900'000'000);  // 0.964 GB whole units
  const RunConfig c = config_of(kGpt2Xl, {"train.head_chunks=16", "train.block_units=2",
                                          "zero.max_inflight_reduction_mb=32", "zero.prefetch_units=0"});
  const std::int64_t s2 = model_states(predict_run_memory(c, 2, 64)), s3 = model_states(predict_run_memory(c, 3, 64));
  EXPECT_LT(s2, 3'553'000'000) << s2;
  EXPECT_LE(s3, 500'000'000) << s3;
  for (int n : {4, 8, 64}) {
    for (int stage = 1; stage <= 3; ++stage) {
      EXPECT_LE(model_states(predict_run_memory(c, stage, n)), model_states(predict_run_memory(c, stage - 1, n)))
          << "N=" << n << " stage " << stage;
    }
  }
}

TEST(UnitLayoutMemory, EightLayerTestModelOnFourRanksSavesThreeAndAHalfTimes) {
  const std::string tiny8 = R"({"model": {"n_layer": 8, "n_head": 4, "n_embd": 128, "block_size": 64,
    "vocab_size": 64}, "train": {"micro_batch": 16}, "precision": {"param_dtype": "bf16"}})";
  const RunConfig whole = config_of(tiny8, {});
  const double before = static_cast<double>(model_states(predict_run_memory(whole, 0, 4))) /
                        static_cast<double>(model_states(predict_run_memory(whole, 3, 4)));
  EXPECT_LT(before, 3.5);  // whole blocks: about 3.04x
  const RunConfig split = config_of(tiny8, {"train.block_units=2", "zero.max_inflight_reduction_mb=0.1"});
  const double after = static_cast<double>(model_states(predict_run_memory(split, 0, 4))) /
                       static_cast<double>(model_states(predict_run_memory(split, 3, 4)));
  EXPECT_GE(after, 3.5) << after;
}

TEST(UnitLayoutMemory, Gpt2SmallActivationsFallByTheLogits) {
  const char* gpt2 = R"({"device": "cuda",
    "model": {"n_layer": 12, "n_head": 12, "n_embd": 768, "block_size": 1024, "vocab_size": 50257},
    "train": {"micro_batch": 16, "seq_len": 1024},
    "precision": {"param_dtype": "bf16", "matmul": "bf16", "activations": "bf16"}})";
  const RunConfig whole = config_of(gpt2, {}), chunked = config_of(gpt2, {"train.head_chunks=8"});
  const gpt::ActivationDims dw =
      gpt::activation_dims(gpt::gpt_config(whole.model), 16, 1024, Device::kCUDA, DType::kBF16, 1);
  const gpt::ActivationDims dc =
      gpt::activation_dims(gpt::gpt_config(chunked.model), 16, 1024, Device::kCUDA, DType::kBF16, 8);
  const std::int64_t saved =
      predict_run_memory(whole, 3, 64)[C::kActivations] - predict_run_memory(chunked, 3, 64)[C::kActivations];
  // The peak is at the end of the forward, head included: the whole head's logits less one chunk's
  // and the chunked head's few extra rows of statistics and its dlnf part.
  EXPECT_EQ(saved, gpt::head_activation_bytes(dw) - gpt::head_activation_bytes(dc));
  EXPECT_GT(saved, 1'400'000'000);  // 1.65 GB of logits, less one 206 MB chunk
}

}  // namespace
}  // namespace zt
