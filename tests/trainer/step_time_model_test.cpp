// The planner's step-time model scales a profile's ops by the work of their class, as the model's
// family counts it: a GPT-2 profile ranks a Llama's choices by the Llama's own products (its
// grouped keys and values, its SwiGLU width), and a Llama profile is read with its family's keys.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/app/config/run_config.h"
#include "engine/app/plan/step_time_model.h"
#include "engine/base/core/check.h"
#include "models/model_family.h"

namespace zt {
namespace {

const nlohmann::json kPlannedGpt = {
    {"n_layer", 2}, {"n_head", 4}, {"n_embd", 64}, {"block_size", 16}, {"vocab_size", 64}};

nlohmann::json planned_llama(int n_kv_head, int intermediate_size) {
  return {{"arch", "llama"},
          {"n_layer", 2},
          {"n_head", 4},
          {"n_embd", 64},
          {"block_size", 16},
          {"vocab_size", 64},
          {"n_kv_head", n_kv_head},
          {"intermediate_size", intermediate_size},
          {"tie_embeddings", true}};
}

// One op's profile at micro-batch 4 x 16 tokens on one rank, written as docs/results' profiles are.
plan::OpProfile one_op_profile(const nlohmann::json& model, const std::string& op, double ms) {
  const nlohmann::json doc = {
      {"config", {{"model", model}, {"train", {{"micro_batch", 4}, {"seq_len", 16}}}}},
      {"op_profile", {{"device", "cpu (1 threads)"}, {"ops", {{{"op", op}, {"ms_per_step", ms}}}}}}};
  const std::string path =
      (std::filesystem::temp_directory_path() / ("zt_step_time_" + std::to_string(::getpid()) + "_" + op + ".json"))
          .string();
  struct RemovedOnReturnOrThrow {  // the tests that expect a refusal leave no file behind either
    std::string path;
    ~RemovedOnReturnOrThrow() { std::remove(path.c_str()); }
  } file{path};
  std::ofstream(path) << doc.dump();
  return plan::load_op_profile(path);
}

double estimated_compute_ms(const plan::OpProfile& profile, const nlohmann::json& model) {
  const nlohmann::json doc = {{"model", model}, {"train", {{"micro_batch", 4}, {"seq_len", 16}}}};
  const RunConfig config = parse_run_config(doc, "plan.json");
  return plan::estimate_step_time(profile, config, /*world_size=*/1, plan::Links{}).compute_s * 1000.0;
}

// A Llama block's products: q and o 64 x 64, k and v 64 x (n_kv_head x 16), gate, up and down
// 64 x hidden; against a GPT block's 12 x 64 x 64; each with the head's 64 x 64.
TEST(StepTimeModel, MatrixProductsScaleByTheFamilysWeights) {
  const double head = 64.0 * 64.0;
  const double gpt = 2 * 12.0 * 64 * 64 + head;
  const plan::OpProfile profile = one_op_profile(kPlannedGpt, "matmul_forward", 100.0);
  EXPECT_DOUBLE_EQ(estimated_compute_ms(profile, kPlannedGpt), 100.0);
  for (const int kv_heads : {1, 2, 4}) {
    for (const int hidden : {128, 256, 512}) {
      const double llama = 2 * (2.0 * 64 * 64 + 2.0 * 64 * (kv_heads * 16) + 3.0 * 64 * hidden) + head;
      EXPECT_NEAR(estimated_compute_ms(profile, planned_llama(kv_heads, hidden)), 100.0 * llama / gpt, 1e-9)
          << kv_heads << " key/value heads, hidden " << hidden;
    }
  }
}

// GELU's and SwiGLU's time grows with the MLP's width (GPT-2's 4 n_embd, the Llama's
// intermediate_size), the other elementwise ops' with n_embd.
TEST(StepTimeModel, MlpActivationsScaleByTheMlpWidth) {
  for (const std::string op : {"gelu_forward", "swiglu_backward"}) {
    const plan::OpProfile profile = one_op_profile(kPlannedGpt, op, 10.0);
    EXPECT_NEAR(estimated_compute_ms(profile, planned_llama(2, 512)), 20.0, 1e-9) << op;
    EXPECT_NEAR(estimated_compute_ms(profile, planned_llama(2, 128)), 5.0, 1e-9) << op;
  }
  const plan::OpProfile norm = one_op_profile(kPlannedGpt, "layernorm_forward", 10.0);
  EXPECT_NEAR(estimated_compute_ms(norm, planned_llama(2, 512)), 10.0, 1e-9);
}

// A Llama's profile is read with its family's keys: planning the profiled model itself gives the
// profile's time, and another SwiGLU width scales from the profiled one (not from a default).
TEST(StepTimeModel, LlamaProfilesKeepTheirOwnKeys) {
  const plan::OpProfile profile = one_op_profile(planned_llama(1, 384), "swiglu_forward", 12.0);
  EXPECT_EQ(profile.model.arch, "llama");
  EXPECT_DOUBLE_EQ(estimated_compute_ms(profile, planned_llama(1, 384)), 12.0);
  EXPECT_NEAR(estimated_compute_ms(profile, planned_llama(1, 128)), 4.0, 1e-9);
  const plan::OpProfile products = one_op_profile(planned_llama(1, 384), "matmul_backward", 50.0);
  EXPECT_DOUBLE_EQ(estimated_compute_ms(products, planned_llama(1, 384)), 50.0);
}

// The optimizer steps every parameter, not only those of the matrix products: an untied Llama's
// second token table is as much more work as it is more parameters (it counted the tied model's).
TEST(StepTimeModel, TheOptimizerScalesByEveryParameter) {
  nlohmann::json tied = planned_llama(2, 128), untied = tied;
  untied["tie_embeddings"] = false;
  auto numel = [](const nlohmann::json& model) {
    const RunConfig c = parse_run_config({{"model", model}}, "numel.json");
    return static_cast<double>(build_param_table(c.model_spec()).total_numel());
  };
  const plan::OpProfile profile = one_op_profile(tied, "adamw_update", 12.0);
  EXPECT_DOUBLE_EQ(estimated_compute_ms(profile, tied), 12.0);
  EXPECT_GT(numel(untied), numel(tied));
  EXPECT_NEAR(estimated_compute_ms(profile, untied), 12.0 * numel(untied) / numel(tied), 1e-9);
}

// Stage 3's gathers that no prefetch issued ahead are waited for at their acquire: prefetching
// (the default) hides them behind compute, so it is never estimated slower than none, and on a slow
// link faster. Stage 3's first unit of each pass is waited for all the same, so stage 1, with no
// gather at its acquires, is faster than stage 3 on such a link (a tie had made the planner take
// stage 3 with no prefetch for a few bytes less).
TEST(StepTimeModel, GathersNoPrefetchIssuedAreWaitedFor) {
  const plan::OpProfile profile = one_op_profile(kPlannedGpt, "matmul_forward", 100.0);
  auto step_s = [&](int stage, int prefetch, double bytes_per_s) {
    nlohmann::json zero = {{"stage", stage}};
    if (stage == 3) zero["prefetch_units"] = prefetch;
    const RunConfig config = parse_run_config(
        {{"model", kPlannedGpt}, {"train", {{"micro_batch", 4}, {"seq_len", 16}}}, {"zero", zero}}, "plan.json", 2);
    plan::Links links;
    links.bytes_per_s = bytes_per_s;
    return plan::estimate_step_time(profile, config, /*world_size=*/2, links);
  };
  for (const double bytes_per_s : {1e4, 1e6, 1e10}) {
    const plan::StepTime none = step_s(3, 0, bytes_per_s), one = step_s(3, 1, bytes_per_s),
                         two = step_s(3, 2, bytes_per_s), stage1 = step_s(1, 0, bytes_per_s);
    EXPECT_DOUBLE_EQ(none.comm_s, one.comm_s) << bytes_per_s;  // the same gathers, issued earlier
    EXPECT_GE(none.step_s, one.step_s) << bytes_per_s;
    EXPECT_DOUBLE_EQ(one.step_s, two.step_s) << bytes_per_s;
    EXPECT_GT(one.step_s, stage1.step_s) << bytes_per_s;
  }
  // Where communication takes about half the compute (10 MB/s here), no prefetch waits for every
  // gather (0.142 s against 0.101); where it outlasts compute (10 kB/s), either waits for all of it.
  const plan::StepTime none = step_s(3, 0, 1e7), one = step_s(3, 1, 1e7);
  EXPECT_LT(none.comm_s, none.compute_s);
  EXPECT_GT(none.step_s, one.step_s * 1.3);
  EXPECT_DOUBLE_EQ(step_s(3, 0, 1e4).step_s, step_s(3, 0, 1e4).comm_s);
}

// A profile whose model section a config would refuse names the file and the key.
TEST(StepTimeModel, ABadProfileModelIsRefusedByName) {
  nlohmann::json bad = planned_llama(3, 128);  // 4 heads are not a multiple of 3 key/value heads
  try {
    one_op_profile(bad, "matmul_forward", 1.0);
    FAIL() << "a profile with 3 key/value heads of 4 was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("n_kv_head"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("zt_step_time_"), std::string::npos) << e.what();
  }
}

// A profile's other fields as a run writes them, else refused naming the field: a negative time
// ranked a negative step first, a time of 1e308 summed to inf, micro_batch 0 made a step of hours,
// a device of 99999999999 threads overflowed atoi, a string for a number gave the library's words.
TEST(StepTimeModel, ProfileFieldsOutOfRangeOrOfAnotherTypeAreRefusedByName) {
  const nlohmann::json model = planned_llama(2, 128);
  const nlohmann::json good = {
      {"config", {{"model", model}, {"train", {{"micro_batch", 4}, {"seq_len", 16}}}}},
      {"op_profile", {{"device", "cpu (1 threads)"}, {"ops", {{{"op", "matmul_forward"}, {"ms_per_step", 1.0}}}}}}};
  const std::string path =
      (std::filesystem::temp_directory_path() / ("zt_step_time_fields_" + std::to_string(::getpid()) + ".json"))
          .string();
  struct RemovedAtTheEnd {
    std::string path;
    ~RemovedAtTheEnd() { std::remove(path.c_str()); }
  } file{path};
  std::ofstream(path) << good.dump();
  EXPECT_NO_THROW(plan::load_op_profile(path));
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, const char*>> cases = {
      {[](auto& d) { d["op_profile"]["ops"][0]["ms_per_step"] = -100.0; }, "milliseconds in [0, 1e9]"},
      {[](auto& d) { d["op_profile"]["ops"][0]["ms_per_step"] = 1e308; }, "milliseconds in [0, 1e9]"},
      {[](auto& d) { d["op_profile"]["ops"][0]["ms_per_step"] = "1"; }, "milliseconds in [0, 1e9]"},
      {[](auto& d) { d["op_profile"]["ops"] = 3; }, "op_profile.ops is 3, not a list"},
      {[](auto& d) { d["config"]["train"]["micro_batch"] = 0; }, "train.micro_batch is 0, not an integer"},
      {[](auto& d) { d["config"]["train"]["micro_batch"] = 1.5; }, "train.micro_batch is 1.5, not an integer"},
      {[](auto& d) { d["config"]["train"] = nullptr; }, "train is null, not an object"},
      {[](auto& d) { d["config"]["zero"] = "x"; }, "zero is \"x\", not an object"},
      {[](auto& d) { d["op_profile"]["device"] = "cpu (99999999999 threads)"; }, "names 99999999999 threads"},
      {[](auto& d) { d["op_profile"]["device"] = nullptr; }, "op_profile.device is null, not a string"},
      {[](auto& d) { d["op_profile"] = nlohmann::json::array(); }, "op_profile is [], not an object"},
  };
  for (const auto& [edit, message] : cases) {
    nlohmann::json doc = good;
    edit(doc);
    std::ofstream(path) << doc.dump();
    try {
      plan::load_op_profile(path);
      ADD_FAILURE() << "read: " << doc.dump();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("json.exception"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace zt
