// A run config's prediction (predict_run_memory: on CUDA the cuBLASLt workspace and, with ranks, NCCL's
// staging) and `zerotrain memory`: the paper's table for a bare parameter count, the JSON for a
// parameter count and for a config (per stage, by device and activation dtype, equal to
// predict_run_memory), and bad input refused as an input error.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/app/cli/commands/commands.h"
#include "engine/app/config/run_config.h"
#include "engine/app/trainer/memory_check.h"
#include "engine/app/trainer/run_memory.h"
#include "engine/base/core/check.h"
#include "kernels/ops.h"
#include "models/gpt/gpt_footprint.h"
#include "models/gpt/gpt_params.h"
#include "models/gpt/gpt_schedule.h"

namespace zt {
namespace {

using C = MemCategory;

const gpt::GptConfig kCommandTiny{/*n_layer=*/2, /*n_head=*/2, /*n_embd=*/32, /*block_size=*/16, /*vocab_size=*/65};

// A run config of kCommandTiny at micro-batch 2 x 8 tokens on `device`.
RunConfig command_tiny_run(Device device) {
  RunConfig c;
  c.model = ModelConfig{"gpt2",
                        kCommandTiny.n_layer,
                        kCommandTiny.n_head,
                        kCommandTiny.n_embd,
                        kCommandTiny.block_size,
                        kCommandTiny.vocab_size};
  c.train.micro_batch = 2;
  c.train.seq_len = 8;
  c.device = device;
  return c;
}

// The config form picks the backend as the trainer does (NCCL on CUDA with more than one rank)
// and adds the CUDA context's cuBLASLt workspace and the kernels' scratch.
TEST(RankMemory, OnCudaTheConfigPredictionCountsNcclStagingAndTheCublasWorkspace) {
  RunConfig cpu = command_tiny_run(Device::kCPU);
  cpu.param_dtype = DType::kBF16;
  RunConfig cuda = cpu;
  cuda.device = Device::kCUDA;
  for (int stage = 0; stage < 4; ++stage) {
    SCOPED_TRACE(stage);
    const StageMemory on_cpu = predict_run_memory(cpu, stage, 1), on_cuda = predict_run_memory(cuda, stage, 1);
    // The cuBLASLt workspace and the largest kernel call's scratch (kernel_scratch_memory_test.cpp).
    EXPECT_GT(on_cuda.kernel_scratch_bytes, 0);
    EXPECT_EQ(on_cuda[C::kWorkspace] - on_cpu[C::kWorkspace], kCublasWorkspaceBytes + on_cuda.kernel_scratch_bytes);
    EXPECT_EQ(on_cuda[C::kCommBuffers], 0) << "one GPU calls no collective";
    const StageMemory on_4 = predict_run_memory(cuda, stage, 4);
    ShardingOptions nccl;
    nccl.backend = CollectiveBackend::kNccl;
    ZeroOptions zero;
    zero.stage = stage;
    const StepSchedule schedule{gpt::forward_schedule(kCommandTiny), gpt::backward_schedule(kCommandTiny)};
    const ModelFootprint fp = gpt::predict_footprint(kCommandTiny, 2, 8, {}, DType::kBF16, Device::kCUDA);
    EXPECT_EQ(on_4[C::kCommBuffers], predict_rank_memory(gpt::build_param_table(kCommandTiny), DType::kBF16, fp,
                                                         schedule, zero, 4, nccl)[C::kCommBuffers]);
    EXPECT_GT(on_4[C::kCommBuffers], 0) << "four GPUs stage bf16 gradients in fp32";
  }
}

// On CUDA without train.deterministic, a step's kernels time their choices in scratch the prediction
// does not count: the check and plan weigh the step with a bound of it (the largest output timed,
// within the 64 MiB limit, and a quarter more), and
// `memory` prints it; deterministic runs and the CPU time nothing.
TEST(RankMemory, OnCudaTheCheckWeighsTheFirstStepsTimedSearches) {
  RunConfig cuda = command_tiny_run(Device::kCUDA);
  cuda.log.sample_tokens = 0;
  const StageMemory step = predict_run_memory(cuda, 0, 1);
  // The widest output: micro_batch x seq_len rows of the MLP's 4 x 32 in fp32 (2,048 bytes) or the
  // largest unit's gradient in fp32 (a block's 12,704 elements), the larger; and a quarter more.
  // (The timed call's own scratch, a LayerNorm's partials beside a timed one, is in the step's
  // largest kernel call.)
  const std::int64_t widest =
      4 * std::max<std::int64_t>(2 * 8 * 4 * 32, build_param_table(cuda.model_spec()).max_unit_numel());
  const std::int64_t bound = widest + widest / 4;
  EXPECT_EQ(timed_search_scratch_bytes(cuda), bound);
  const std::optional<StageMemory> timed = predict_timed_step_memory(cuda, step);
  ASSERT_TRUE(timed.has_value());
  EXPECT_EQ(timed->total_bytes(), step.total_bytes() + bound);
  EXPECT_EQ(predicted_required_bytes(cuda, 1, std::nullopt), timed->total_bytes());
  // A large model's outputs are timed within the limit.
  RunConfig large = cuda;
  large.model.vocab_size = 50257;
  large.model.n_embd = 768;
  EXPECT_EQ(timed_search_scratch_bytes(large), kTimedScratchLimitBytes + kTimedScratchLimitBytes / 4);
  RunConfig deterministic = cuda, cpu = cuda;
  deterministic.train.deterministic = true;
  cpu.device = Device::kCPU;
  EXPECT_FALSE(predict_timed_step_memory(deterministic, predict_run_memory(deterministic, 0, 1)).has_value());
  EXPECT_FALSE(predict_timed_step_memory(cpu, predict_run_memory(cpu, 0, 1)).has_value());
  EXPECT_EQ(predicted_required_bytes(deterministic, 1, std::nullopt),
            predict_run_memory(deterministic, 0, 1).total_bytes());
}

TEST(MemoryCommand, PaperTablePrintsFigure1) {
  ::testing::internal::CaptureStdout();
  const int rc = cli::memory_main({"--params", "7.5e9", "--ranks", "64"});
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  for (const char* total : {"120.000", "31.406", "16.641", "1.875"})
    EXPECT_NE(out.find(total), std::string::npos) << out;
  EXPECT_NE(out.find("rounds these to 120, 31.4"), std::string::npos) << out;
  // Another model's table is not the figure's: its values are named as the paper's case.
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(cli::memory_main({"--params", "1000", "--ranks", "3", "--k", "0"}), 0);
  const std::string other = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(other.find("rounds these"), std::string::npos) << other;
  EXPECT_NE(other.find("gives 120, 31.4, 16.6 and 1.9 GB for Psi = 7.5e9"), std::string::npos) << other;
}

// The table's unit follows the count, so neither a thousand parameters (every cell 0.000 GB) nor
// 1e15 (numbers wider than their columns, run together) loses the figures.
TEST(MemoryCommand, PaperTableUnitsFollowTheCount) {
  for (const auto& [params, unit, stage0] :
       {std::tuple{"1000", "params kB", "16.000"}, std::tuple{"3e6", "params MB", "48.000"},
        std::tuple{"1e15", "params TB", "16000.000"}}) {
    ::testing::internal::CaptureStdout();
    EXPECT_EQ(cli::memory_main({"--params", params, "--ranks", "8"}), 0);
    const std::string out = ::testing::internal::GetCapturedStdout();
    EXPECT_NE(out.find(unit), std::string::npos) << out;
    EXPECT_NE(out.find(std::string(" ") + stage0 + " "), std::string::npos) << out;
  }
}

TEST(MemoryCommand, ParamCountIsAnyPlainDecimal) {
  // As plan's sizes and rates (cli::decimal_start): a leading '.' too.
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(cli::memory_main({"--params", ".5e9", "--ranks", "4", "--json"}), 0);
  const nlohmann::json paper = nlohmann::json::parse(::testing::internal::GetCapturedStdout());
  EXPECT_EQ(paper["params"], 500000000);
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
  const StageMemory s2 = predict_run_memory(cfg, 2, 3);
  EXPECT_EQ(doc["stages"][2]["bytes"]["gradients"].get<std::int64_t>(), s2[C::kGradients]);
  EXPECT_EQ(doc["stages"][2]["total"].get<std::int64_t>(), s2.total_bytes());
  EXPECT_EQ(doc["stages"][2]["padding"].get<std::int64_t>(), s2.padding_bytes);
  // The other gradient-shard dtype's cost, shown beside: fp32 shards at stages 2-3 in bf16.
  cfg.zero.fp32_grad_shards = true;
  EXPECT_EQ(doc["other_grad_shard_dtype"], "fp32");
  EXPECT_EQ(doc["stages"][2]["gradients_with_other_grad_shard_dtype"].get<std::int64_t>(),
            predict_run_memory(cfg, 2, 3)[C::kGradients]);
  EXPECT_GT(predict_run_memory(cfg, 2, 3)[C::kGradients], s2[C::kGradients]);
  EXPECT_EQ(doc["stages"][0]["gradients_with_other_grad_shard_dtype"].get<std::int64_t>(),
            doc["stages"][0]["bytes"]["gradients"].get<std::int64_t>());

  ::testing::internal::CaptureStdout();
  EXPECT_EQ(cli::memory_main({"--config", path.string(), "--ranks", "3"}), 0);
  EXPECT_NE(::testing::internal::GetCapturedStdout().find("stage 3"), std::string::npos);

  // The config's device stays: on CUDA the attention is flash where the kernels allow, and the
  // activations predicted are the ones that device allocates.
  EXPECT_EQ(doc["device"], "cpu");
  EXPECT_EQ(doc["attention"], "materialised (T x T probabilities kept)");
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(cli::memory_main({"--config", path.string(), "--ranks", "3", "--set", "device=cuda", "--json"}), 0);
  const nlohmann::json on_cuda = nlohmann::json::parse(::testing::internal::GetCapturedStdout());
  EXPECT_EQ(on_cuda["device"], "cuda");
  const bool flash = ops::flash_attention_available(Device::kCUDA, 4, 2, 16);
  const std::string attention = on_cuda["attention"].get<std::string>();
  EXPECT_EQ(attention.rfind("flash kernels on CUDA cores (no T x T probabilities kept; not cuDNN: ", 0) == 0, flash)
      << attention;  // fp32 activations: cuDNN's attention takes bf16
  EXPECT_EQ(attention.rfind("materialised (T x T probabilities kept", 0) == 0, !flash) << attention;
  EXPECT_EQ(on_cuda["stages"][0]["bytes"]["activations"].get<std::int64_t>(),
            predict_run_memory(load_run_config(path.string(), {"device=cuda"}), 0, 3)[C::kActivations]);

  // bf16 activations: named, and predicted smaller (the engine's measurement of them is checked in
  // tests/sharding/zero_memory_test.py and tests/models).
  EXPECT_EQ(doc["activations"], "fp32");
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(cli::memory_main({"--config", path.string(), "--ranks", "3", "--set", "train.micro_batch=2", "--set",
                              "precision.activations=bf16", "--json"}),
            0);
  const nlohmann::json half = nlohmann::json::parse(::testing::internal::GetCapturedStdout());
  EXPECT_EQ(half["activations"], "bf16");
  const std::int64_t act32 = doc["stages"][0]["bytes"]["activations"].get<std::int64_t>();
  const std::int64_t act16 = half["stages"][0]["bytes"]["activations"].get<std::int64_t>();
  EXPECT_LT(act16, act32 * 6 / 10);
  EXPECT_GT(act16, act32 / 2);  // row statistics and token ids stay 4 bytes
  std::filesystem::remove(path);
}

// --brief: the four model-state categories apart from the rest, the totals, and both against stage 0,
// each figure the prediction's own.
TEST(MemoryCommand, BriefTableSumsTheModelStatesAndComparesWithStageZero) {
  const auto path = std::filesystem::temp_directory_path() / "zt_memory_brief_test.json";
  std::ofstream(path) << R"({"model": {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 16, "vocab_size": 65},
                             "train": {"micro_batch": 1}, "precision": {"param_dtype": "bf16"}})";
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(cli::memory_main({"--config", path.string(), "--ranks", "4", "--brief"}), 0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  const RunConfig cfg = load_run_config(path.string(), {});
  std::vector<StageMemory> stages;
  for (int stage = 0; stage < 4; ++stage) stages.push_back(predict_run_memory(cfg, stage, 4));
  auto line_of = [&](const std::string& name) {
    const std::size_t at = out.find("\n" + name + " ");
    return at == std::string::npos ? std::string() : out.substr(at + 1, out.find('\n', at + 1) - at - 1);
  };
  const std::string states = line_of("model states"), total = line_of("total");
  for (const StageMemory& m : stages) {
    EXPECT_NE(states.find(format_bytes(m.model_state_bytes())), std::string::npos) << out;
    EXPECT_NE(total.find(format_bytes(m.total_bytes())), std::string::npos) << out;
  }
  // Each stage's column of the two shares, stage 0's 100%: the row's words after its name.
  auto columns_of = [&](const std::string& name) {
    std::istringstream words(line_of(name).substr(name.size()));
    return std::vector<std::string>(std::istream_iterator<std::string>(words), {});
  };
  auto percent = [](std::int64_t part, std::int64_t whole) {
    return fmt::format("{:.0f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
  };
  std::vector<std::string> states_share, total_share;
  for (const StageMemory& m : stages) {
    states_share.push_back(percent(m.model_state_bytes(), stages[0].model_state_bytes()));
    total_share.push_back(percent(m.total_bytes(), stages[0].total_bytes()));
  }
  EXPECT_EQ(columns_of("model states vs stage 0"), states_share) << out;
  EXPECT_EQ(columns_of("total vs stage 0"), total_share) << out;
  EXPECT_EQ(states_share[0], "100%");
  EXPECT_EQ(total_share[0], "100%");
  // 4 ranks: stage 3 keeps well under the whole model states
  EXPECT_LT(stages[3].model_state_bytes() * 10, stages[0].model_state_bytes() * 6);
  EXPECT_NE(out.find("0.1 M parameters, bf16 weights with fp32 master weights"), std::string::npos) << out;
  EXPECT_NE(out.find("attention: materialised"), std::string::npos) << out;
  EXPECT_EQ(out.find("padding"), std::string::npos) << "brief means brief: " << out;
  std::filesystem::remove(path);
}

TEST(MemoryCommand, BadInputIsAnInputError) {
  const std::vector<std::vector<std::string>> bad = {
      {"--ranks", "4"},                                           // neither --config nor --params
      {"--params", "1e6", "--config", "x.json", "--ranks", "4"},  // both
      {"--params", "1.5", "--ranks", "4"},                        // not whole
      {"--params", "-3", "--ranks", "4"},
      {"--params", "lots", "--ranks", "4"},
      {"--params", "0x10", "--ranks", "4"},  // strtod's hex
      {"--params", " 1e6", "--ranks", "4"},  // and leading blanks
      {"--params", "inf", "--ranks", "4"},
      {"--params", "1e6", "--ranks", "0"},
      {"--params", "1e6"},  // --ranks missing
      {"--params", "1e6", "--ranks", "4", "--set", "train.micro_batch=2"},
      {"--config", "/nonexistent/zt.json", "--ranks", "4"},
      {"--params", "1e6", "--ranks", "4", "--brief"},                          // --brief is for a config
      {"--config", "configs/tiny.json", "--ranks", "4", "--brief", "--json"},  // one or the other
  };
  for (const auto& args : bad) EXPECT_THROW(cli::memory_main(args), InputError) << ::testing::PrintToString(args);
}

}  // namespace
}  // namespace zt
