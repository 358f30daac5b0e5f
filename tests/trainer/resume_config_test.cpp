// What a resume reads of the config: the keys whose change is a change of trajectory, as the LR
// schedule reads them (engine/app/trainer/resume.h), and where a resumed or finished run takes its
// model keys when train.init_from's folder is gone (run_config.h's SavedModelKeys).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "engine/app/config/run_config.h"
#include "engine/app/trainer/data_changes.h"
#include "engine/app/trainer/resume_changes.h"
#include "engine/app/trainer/run_identity.h"
#include "engine/base/core/check.h"
#include "kernels/compute_backend.h"
#include "tests/core/config_test_util.h"

namespace zt {
namespace {

RunConfig with_optim(const nlohmann::json& optim, int max_steps) {
  nlohmann::json doc = base();
  doc["optim"] = optim;
  doc["train"] = {{"max_steps", max_steps}};
  return parse_run_config(doc, "test.json");
}

std::vector<std::string> changes(const nlohmann::json& saved_optim, int saved_steps, const nlohmann::json& now_optim,
                                 int now_steps) {
  return trajectory_changes(with_optim(saved_optim, saved_steps).to_json(), 1, /*saved_step=*/2,
                            with_optim(now_optim, now_steps));
}

// Training a constant-LR run for longer (decay_steps follows max_steps) or changing its unread floor
// is no change; the same under a decaying schedule is.
TEST(ResumeTrajectory, KeysCountWhereTheScheduleReadsThem) {
  const nlohmann::json constant = {{"decay", "constant"}};
  EXPECT_TRUE(changes(constant, 4, constant, 8).empty());
  EXPECT_TRUE(changes(constant, 4, {{"decay", "constant"}, {"min_lr", 1e-5}}, 4).empty());
  const std::vector<std::string> cosine = changes({{"decay", "cosine"}}, 4, {{"decay", "cosine"}}, 8);
  ASSERT_EQ(cosine.size(), 1u);
  EXPECT_EQ(cosine[0],
            "optim.decay_steps: 4 -> 8 (its default, from train.max_steps; set optim.decay_steps = 4 to keep the saved "
            "schedule)");
  EXPECT_EQ(changes({{"decay", "cosine"}}, 4, {{"decay", "cosine"}, {"decay_steps", 8}}, 4)[0],
            "optim.decay_steps: 4 -> 8");  // set, not derived
  EXPECT_EQ(changes({{"decay", "linear"}}, 4, {{"decay", "linear"}, {"min_lr", 1e-5}}, 4).size(), 1u);
  // A schedule that changes from constant reads both.
  const std::vector<std::string> to_cosine = changes(constant, 4, {{"decay", "cosine"}}, 8);
  EXPECT_EQ(to_cosine.size(), 2u);  // decay and decay_steps
  const std::vector<std::string> wsd =
      changes({{"decay", "wsd"}}, 4, {{"decay", "wsd"}, {"cooldown_fraction", 0.5}}, 4);
  ASSERT_EQ(wsd.size(), 1u);
  EXPECT_TRUE(wsd[0].starts_with("optim.cooldown_fraction: 0.2")) << wsd[0];
  // The warmup is read by every schedule.
  EXPECT_EQ(changes(constant, 4, {{"decay", "constant"}, {"warmup_steps", 2}}, 4).size(), 1u);
  // A switch to a constant rate is the decay's change alone: its floor and length are not read (the
  // floor was listed without the hint that the derived line gave, which a constant rate no longer prints).
  const std::vector<std::string> to_constant =
      changes({{"decay", "cosine"}, {"min_lr", 1e-4}}, 4, {{"decay", "constant"}}, 8);
  ASSERT_EQ(to_constant.size(), 1u);
  EXPECT_TRUE(to_constant[0].starts_with("optim.decay: \"cosine\" -> \"constant\"")) << to_constant[0];
}

// Each key the trajectory follows, changed alone at a resume, is named (a key left off the list
// let a resume with another value continue in silence).
TEST(ResumeTrajectory, EachTrajectoryKeyChangedAloneIsNamed) {
  const std::vector<std::tuple<const char*, const char*, nlohmann::json>> keys = {
      {"train", "seed", 7},         {"train", "seq_len", 8},     {"model", "dropout", 0.1},
      {"optim", "lr", 2e-3},        {"optim", "min_lr", 1e-5},   {"optim", "warmup_steps", 2},
      {"optim", "decay", "linear"}, {"optim", "decay_steps", 3}, {"optim", "beta1", 0.8},
      {"optim", "beta2", 0.99},     {"optim", "eps", 1e-6},      {"optim", "weight_decay", 0.01},
      {"optim", "grad_clip", 0.5}};
  const RunConfig saved = parse_run_config(base(), "test.json");
  for (const auto& [section, key, value] : keys) {
    nlohmann::json doc = base();
    doc[section][key] = value;
    const std::vector<std::string> said =
        trajectory_changes(saved.to_json(), 1, /*saved_step=*/2, parse_run_config(doc, "test.json"));
    const std::string name = fmt::format("{}.{}: ", section, key);
    EXPECT_TRUE(std::any_of(said.begin(), said.end(), [&](const std::string& s) { return s.starts_with(name); }))
        << name << " changed to " << value.dump() << ": " << ::testing::PrintToString(said);
  }
  nlohmann::json wsd = base();
  wsd["optim"] = {{"decay", "wsd"}};
  nlohmann::json cooler = wsd;
  cooler["optim"]["cooldown_fraction"] = 0.5;
  const std::vector<std::string> said =
      trajectory_changes(parse_run_config(wsd, "test.json").to_json(), 1, 2, parse_run_config(cooler, "test.json"));
  ASSERT_EQ(said.size(), 1u);
  EXPECT_TRUE(said[0].starts_with("optim.cooldown_fraction: ")) << said[0];
}

// The default floor is the single-precision lr / 10 (1e-3 gives 0.000100000005): stating 1e-4 is
// another schedule, and the refusal says which to write either way.
TEST(ResumeTrajectory, TheDefaultFloorIsNamedWhenAResumeStatesAnother) {
  const nlohmann::json cosine = {{"decay", "cosine"}, {"decay_steps", 4}};
  const RunConfig defaults = with_optim(cosine, 4);
  EXPECT_EQ(defaults.optim.min_lr, static_cast<float>(1e-3f / 10.0));
  EXPECT_NE(
      std::find(defaults.derived.begin(), defaults.derived.end(), "optim.min_lr = 0.000100000005 (optim.lr / 10)"),
      defaults.derived.end());
  nlohmann::json stated = cosine;
  stated["min_lr"] = 1e-4;
  std::vector<std::string> c = changes(cosine, 4, stated, 4);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0],
            "optim.min_lr: 0.000100000005 -> 0.0001 (the saved run's is its default, optim.lr / 10 in single "
            "precision: leave optim.min_lr unset to keep it)");
  c = changes(stated, 4, cosine, 4);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0],
            "optim.min_lr: 0.0001 -> 0.000100000005 (its default, optim.lr / 10; set optim.min_lr = 0.0001 to keep the "
            "saved schedule)");
  EXPECT_TRUE(changes(cosine, 4, cosine, 4).empty());
  // With optim.lr changed too, leaving min_lr unset would give the new lr's tenth: no such advice.
  nlohmann::json faster = stated;
  faster["lr"] = 2e-3;
  c = changes(cosine, 4, faster, 4);
  EXPECT_NE(std::find(c.begin(), c.end(), "optim.min_lr: 0.000100000005 -> 0.0001"), c.end())
      << (c.empty() ? "" : c.back());
}

// A checkpoint of step 0 (max_steps = 0 with checkpoint.at_end: the weights as set up) has read no
// schedule, data or seed: a fine-tune's real recipe may start from it. Past step 0 a change is one.
TEST(ResumeTrajectory, AStepZeroCheckpointTakesAnySchedule) {
  const RunConfig saved = with_optim({{"decay", "cosine"}}, 0);
  const RunConfig now = with_optim({{"decay", "cosine"}, {"lr", 1e-2}, {"warmup_steps", 3}}, 20);
  EXPECT_TRUE(trajectory_changes(saved.to_json(), 1, 0, now).empty());
  // lr, min_lr (a tenth of it), warmup_steps, decay_steps
  EXPECT_EQ(trajectory_changes(saved.to_json(), 1, 1, now).size(), 4u);
  // Nor the seed, the sequence length or the global batch: no step has read data or drawn dropout.
  nlohmann::json other = base();
  other["train"] = {{"max_steps", 20}, {"seed", 7}, {"seq_len", 8}, {"micro_batch", 2}};
  EXPECT_TRUE(trajectory_changes(saved.to_json(), 1, 0, parse_run_config(other, "t.json")).empty());
  // seed, seq_len, decay_steps (from max_steps), the global batch
  EXPECT_EQ(trajectory_changes(saved.to_json(), 1, 1, parse_run_config(other, "t.json")).size(), 4u);
}

// The working parameters' and the activations' dtypes change what every step computes: a change of
// trajectory, as do the collectives' lossy formats. A checkpoint saved before the key was recorded
// has nothing to compare; the products'
// precision and the attention kernels (rounding within the same formats) are not compared.
TEST(ResumeTrajectory, TheNumberFormatsAreTrajectoryKeys) {
  nlohmann::json doc = base();
  doc["train"] = {{"max_steps", 8}};
  const nlohmann::json saved = parse_run_config(doc, "t.json").to_json();
  nlohmann::json bf16 = doc;
  bf16["precision"] = {{"param_dtype", "bf16"}, {"activations", "bf16"}};
  const std::vector<std::string> c = trajectory_changes(saved, 1, 4, parse_run_config(bf16, "t.json"));
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0], "precision.param_dtype: \"f32\" -> \"bf16\"");
  EXPECT_EQ(c[1], "precision.activations: \"fp32\" -> \"bf16\"");
  EXPECT_TRUE(trajectory_changes(saved, 1, 0, parse_run_config(bf16, "t.json")).empty()) << "step 0 takes any";
  nlohmann::json older = saved;
  older["precision"].erase("activations");
  EXPECT_EQ(trajectory_changes(older, 1, 4, parse_run_config(bf16, "t.json")).size(), 1u);
  // int8 gathers: every rank computes with the decoded values (a resume switching them on changed
  // the losses, unsaid); the gradient shard's and the cross-group reduction's formats alike, where
  // they act (2 ranks at stage 3 with bf16 parameters).
  nlohmann::json exact2 = doc;
  exact2["precision"] = {{"param_dtype", "bf16"}};
  exact2["zero"] = {{"stage", 3}};
  const nlohmann::json saved2 = parse_run_config(exact2, "t.json", 2).to_json();
  nlohmann::json int8 = exact2;
  int8["zero"] = {{"stage", 3}, {"gather_dtype", "int8"}, {"grad_shard_dtype", "fp32"}};
  const std::vector<std::string> z = trajectory_changes(saved2, 2, 4, parse_run_config(int8, "t.json", 2));
  EXPECT_NE(std::find(z.begin(), z.end(), "zero.gather_dtype: \"param\" -> \"int8\""), z.end()) << z.size();
  EXPECT_NE(std::find(z.begin(), z.end(), "zero.grad_shard_dtype: \"working\" -> \"fp32\""), z.end());
  // A checkpoint from before a key was recorded says nothing of it (its value then is not known).
  nlohmann::json unrecorded = saved2;
  unrecorded["zero"].erase("gather_dtype");
  const std::vector<std::string> u = trajectory_changes(unrecorded, 2, 4, parse_run_config(int8, "t.json", 2));
  EXPECT_EQ(std::count_if(u.begin(), u.end(), [](const std::string& s) { return s.starts_with("zero.gather_dtype"); }),
            0);
  // Where they act on nothing they change no bit, as the run's derived notes say: no change (a
  // trial's resumes were refused for them). One rank on the solo path has no gather to quantize;
  // fp32 gradient shards of fp32 parameters are their working dtype.
  nlohmann::json moot = doc;
  moot["zero"] = {{"stage", 3}, {"gather_dtype", "int8"}, {"grad_shard_dtype", "fp32"}};
  EXPECT_TRUE(trajectory_changes(saved, 1, 4, parse_run_config(moot, "t.json")).empty());
  // ... but a key that stops acting is a change: int8 gathers saved on 2 ranks, resumed on one
  // rank's solo path, compute with exact weights.
  const nlohmann::json saved_int8 = parse_run_config(int8, "t.json", 2).to_json();
  nlohmann::json one = int8;
  one["train"]["grad_accum"] = 2;  // the same global batch on 1 rank
  const std::vector<std::string> stops = trajectory_changes(saved_int8, 2, 4, parse_run_config(one, "t.json"));
  EXPECT_NE(std::find(stops.begin(), stops.end(),
                      "zero.gather_dtype: \"int8\" -> \"param\" (set to \"int8\", which acts on nothing in this "
                      "run: see its derived values)"),
            stops.end())
      << (stops.empty() ? "" : stops[0]);
  nlohmann::json tf32 = doc;
  tf32["device"] = "cuda";  // and the device: the same formats, rounded otherwise
  tf32["precision"] = {{"matmul", "tf32"}};
  EXPECT_TRUE(trajectory_changes(saved, 1, 4, parse_run_config(tf32, "t.json")).empty());
}

// A deterministic run's bits are the same at any rank count but where int8 gathers act or hybrid
// sharding groups the ranks (their blocks and hops follow the shards): a resume on another rank
// count says so (a review's resume from 1 rank to 2 with int8 gathers lost its bits unsaid).
TEST(ResumeTrajectory, DeterministicBitsOnAnotherRankCountAreSaidWhereInt8GathersAct) {
  nlohmann::json doc = base();
  doc["train"] = {{"max_steps", 8}, {"deterministic", true}, {"micro_batch", 2}, {"global_batch_tokens", 128}};
  doc["zero"] = {{"stage", 2}, {"gather_dtype", "int8"}, {"solo_path", false}};
  const nlohmann::json saved = parse_run_config(doc, "t.json").to_json();
  const std::vector<std::string> int8 = deterministic_bit_changes(saved, 1, parse_run_config(doc, "t.json", 2), "", "");
  ASSERT_EQ(int8.size(), 1u);
  EXPECT_NE(int8[0].find("ranks: 1 -> 2 (int8 gathers"), std::string::npos) << int8[0];
  nlohmann::json exact = doc;
  exact["zero"] = {{"stage", 2}};
  const nlohmann::json saved_exact = parse_run_config(exact, "t.json").to_json();
  EXPECT_TRUE(deterministic_bit_changes(saved_exact, 1, parse_run_config(exact, "t.json", 2), "", "").empty())
      << "exact gathers: the same bits at any rank count";
  EXPECT_TRUE(deterministic_bit_changes(saved, 1, parse_run_config(doc, "t.json"), "", "").empty())
      << "the same rank count";
}

// Each change says its own reason: the micro-batch's is the fold's, the mode's the reduction order
// (one shared reason, "bits follow the micro-batch", was given for all of them).
TEST(ResumeTrajectory, DeterministicBitChangesSayTheirOwnReasons) {
  nlohmann::json doc = base();
  doc["train"] = {{"max_steps", 8}, {"deterministic", true}, {"micro_batch", 2}, {"global_batch_tokens", 128}};
  const nlohmann::json saved = parse_run_config(doc, "t.json").to_json();
  nlohmann::json smaller = doc;
  smaller["train"]["micro_batch"] = 1;
  const std::vector<std::string> micro =
      deterministic_bit_changes(saved, 1, parse_run_config(smaller, "t.json"), "", "");
  ASSERT_EQ(micro.size(), 1u);
  EXPECT_EQ(micro[0],
            "train.micro_batch: 2 -> 1 (the fold adds each micro-batch's gradients: its bits follow the "
            "micro-batch)");
  nlohmann::json off = doc;
  off["train"]["deterministic"] = false;
  const std::vector<std::string> mode = deterministic_bit_changes(saved, 1, parse_run_config(off, "t.json"), "", "");
  ASSERT_EQ(mode.size(), 1u);
  EXPECT_EQ(mode[0], "train.deterministic: true -> false (the modes reduce the gradients in different orders)");
}

// Deterministic mode's bits follow the CPU's BLAS kernels too (OpenBLAS picks them by the CPU or
// OPENBLAS_CORETYPE): a checkpoint saved on others is said (a user trial resumed a SkylakeX
// checkpoint under OPENBLAS_CORETYPE=Haswell: other bits from the next step, nothing said);
// the same kernels, or a checkpoint recording none, say nothing.
TEST(ResumeTrajectory, DeterministicBitsOnOtherBlasKernelsAreSaid) {
  nlohmann::json doc = base();
  doc["train"] = {{"max_steps", 8}, {"deterministic", true}, {"micro_batch", 2}, {"global_batch_tokens", 128}};
  const RunConfig now = parse_run_config(doc, "t.json");
  const nlohmann::json saved = now.to_json();
  const std::string here = run_kernels(now);
  EXPECT_EQ(here, cpu_blas_description().kernels());
  const std::vector<std::string> other = deterministic_bit_changes(saved, 1, now, "Sandybridge (OpenBLAS 0.0)", here);
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0], "the BLAS kernels: Sandybridge (OpenBLAS 0.0) -> " + here +
                          " (each rounds a product's last bits its own way)");
  EXPECT_TRUE(deterministic_bit_changes(saved, 1, now, here, here).empty());
  EXPECT_TRUE(deterministic_bit_changes(saved, 1, now, "", here).empty()) << "a checkpoint recording no kernels";
  nlohmann::json off = doc;
  off["train"]["deterministic"] = false;
  const RunConfig default_mode = parse_run_config(off, "t.json");
  EXPECT_TRUE(
      deterministic_bit_changes(default_mode.to_json(), 1, default_mode, "Sandybridge (OpenBLAS 0.0)", here).empty())
      << "outside deterministic mode no bits are promised across kernels";
}

// On CUDA the bits follow the GPU and its libraries (cuBLASLt's heuristic picks each product's
// algorithm by them): a checkpoint of another GPU model is said, as is one of another device
// (nothing recorded the GPU, and a resume on another model said nothing).
TEST(ResumeTrajectory, DeterministicBitsOnAnotherGpuOrDeviceAreSaid) {
  nlohmann::json doc = base();
  doc["train"] = {{"max_steps", 8}, {"deterministic", true}, {"micro_batch", 2}, {"global_batch_tokens", 128}};
  nlohmann::json on_gpu = doc;
  on_gpu["device"] = "cuda";
  const RunConfig now = parse_run_config(on_gpu, "t.json");
  EXPECT_STREQ(run_kernels_key(now.device), "cuda_kernels");
  EXPECT_STREQ(run_kernels_key(Device::kCPU), "cpu_kernels");
  const std::string a100 = "NVIDIA A100-SXM4-80GB (sm_80), CUDA runtime 12040, cuBLASLt 120403, cuDNN 90100";
  const std::string h100 = "NVIDIA H100 80GB HBM3 (sm_90), CUDA runtime 12040, cuBLASLt 120403, cuDNN 90100";
  const std::vector<std::string> other = deterministic_bit_changes(now.to_json(), 1, now, a100, h100);
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0], "the GPU and its libraries: " + a100 + " -> " + h100 +
                          " (cuBLASLt's heuristic picks each product's algorithm by them, and cuDNN its attention's "
                          "kernels)");
  EXPECT_TRUE(deterministic_bit_changes(now.to_json(), 1, now, h100, h100).empty());
  // A CPU run's checkpoint resumed on a GPU: the device says it, whatever either recorded (the
  // saved string is the other device's key's, and a config from before device was recorded reads
  // as the CPU's).
  const nlohmann::json on_cpu = parse_run_config(doc, "t.json").to_json();
  for (const std::string& saved_kernels : {std::string(), cpu_blas_description().kernels()}) {
    const std::vector<std::string> moved = deterministic_bit_changes(on_cpu, 1, now, saved_kernels, h100);
    ASSERT_EQ(moved.size(), 1u);
    EXPECT_EQ(moved[0], "device: cpu -> cuda (other kernels round the products' last bits their own way)");
  }
  nlohmann::json unrecorded = on_cpu;
  unrecorded.erase("device");
  EXPECT_EQ(deterministic_bit_changes(unrecorded, 1, now, "", h100).size(), 1u);
}

// Another multiple-choice file (or one added, or dropped) is an evaluation change: said, its
// accuracies on either side not comparable; the same path, or a checkpoint from before the key was
// recorded, says nothing.
TEST(ResumeEvaluation, AnotherChoiceFileIsSaid) {
  nlohmann::json doc = base();
  doc["train"] = {{"max_steps", 8}};
  doc["data"] = {{"choice_file", "a.bin"}};
  const nlohmann::json saved = parse_run_config(doc, "t.json").to_json();
  EXPECT_EQ(choice_file_change(saved, parse_run_config(doc, "t.json")), "");
  nlohmann::json other = doc;
  other["data"] = {{"choice_file", "b.bin"}};
  EXPECT_EQ(choice_file_change(saved, parse_run_config(other, "t.json")),
            "data.choice_file: \"a.bin\" -> \"b.bin\" (multiple-choice accuracies on either side are not comparable)");
  other["data"] = nlohmann::json::object();
  EXPECT_NE(choice_file_change(saved, parse_run_config(other, "t.json")).find("\"a.bin\" -> none"), std::string::npos);
  nlohmann::json older = saved;
  older["data"].erase("choice_file");
  EXPECT_EQ(choice_file_change(older, parse_run_config(other, "t.json")), "");
  EXPECT_EQ(choice_file_change(older, parse_run_config(doc, "t.json")), "") << "not recorded: nothing to compare";
}

// A resume on another rank count names the setting that keeps the saved global batch (16
// sequences a step: micro_batch 4 x grad_accum 2 x 2 ranks), or says that none can.
TEST(ResumeTrajectory, AnotherRankCountIsToldHowToKeepTheGlobalBatch) {
  nlohmann::json doc = base();
  doc["train"] = {{"max_steps", 8}, {"micro_batch", 4}, {"grad_accum", 2}};
  const nlohmann::json saved = parse_run_config(doc, "t.json", 2).to_json();
  const auto change_at = [&](int ranks) {
    const std::vector<std::string> c = trajectory_changes(saved, 2, 4, parse_run_config(doc, "t.json", ranks));
    EXPECT_EQ(c.size(), 1u) << ranks << " ranks";
    return c.empty() ? std::string() : c[0];
  };
  EXPECT_EQ(change_at(4),
            "global batch (micro_batch x grad_accum x ranks): 4 x 2 x 2 = 16 -> 4 x 2 x 4 = 32 (--set "
            "train.global_batch_tokens=256 keeps it on 4 ranks: grad_accum 1 is derived)");
  EXPECT_EQ(change_at(1),
            "global batch (micro_batch x grad_accum x ranks): 4 x 2 x 2 = 16 -> 4 x 2 x 1 = 8 (--set "
            "train.global_batch_tokens=256 keeps it on 1 rank: grad_accum 4 is derived)");
  EXPECT_EQ(change_at(8),
            "global batch (micro_batch x grad_accum x ranks): 4 x 2 x 2 = 16 -> 4 x 2 x 8 = 64 (--set "
            "train.global_batch_tokens=256 --set train.micro_batch=2 keeps it on 8 ranks: grad_accum 1 is derived)");
  EXPECT_EQ(change_at(3),
            "global batch (micro_batch x grad_accum x ranks): 4 x 2 x 2 = 16 -> 4 x 2 x 3 = 24 (its 16 sequences a "
            "step do not split over 3 ranks: no micro-batch keeps it)");
  // A rank's share (24 sequences over 4 ranks: 6) that the run's micro-batch of 4 does not divide:
  // the largest that does, 3.
  nlohmann::json odd = doc;
  odd["train"]["grad_accum"] = 3;
  const std::vector<std::string> c =
      trajectory_changes(parse_run_config(odd, "t.json", 2).to_json(), 2, 4, parse_run_config(odd, "t.json", 4));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0],
            "global batch (micro_batch x grad_accum x ranks): 4 x 3 x 2 = 24 -> 4 x 3 x 4 = 48 (--set "
            "train.global_batch_tokens=384 --set train.micro_batch=3 keeps it on 4 ranks: grad_accum 2 is derived)");
  // grad_accum given on the command line would disagree with the global batch the hint sets beside
  // it (a trial followed the hint and was refused): the hint leaves it out.
  nlohmann::json file = doc;
  file["train"].erase("grad_accum");
  const std::string path = ::testing::TempDir() + "/resume_hint.json";
  {
    std::ofstream out(path);
    out << file.dump();
  }
  const std::vector<std::string> set_accum =
      trajectory_changes(saved, 2, 4, load_run_config(path, {"train.grad_accum=2"}, 4));
  ASSERT_EQ(set_accum.size(), 1u);
  EXPECT_NE(
      set_accum[0].find("(without your --set train.grad_accum=2, --set train.global_batch_tokens=256 keeps it on 4 "
                        "ranks: grad_accum 1 is derived)"),
      std::string::npos)
      << set_accum[0];
  EXPECT_EQ(load_run_config(path, {"train.global_batch_tokens=256"}, 4).train.grad_accum, 1);
  // What the hint says, set: no change.
  nlohmann::json kept = doc;
  kept["train"].erase("grad_accum");
  kept["train"]["global_batch_tokens"] = 256;
  kept["train"]["micro_batch"] = 2;
  EXPECT_TRUE(trajectory_changes(saved, 2, 4, parse_run_config(kept, "t.json", 8)).empty());
}

// A saved batch no config could give (a manifest resealed by hand): a change that says so, where
// micro_batch 0 divided by zero (SIGFPE) and a grad_accum of 2^63 overflowed.
TEST(ResumeTrajectory, ASavedBatchOutOfRangeIsAChangeNotACrash) {
  nlohmann::json doc = base();
  doc["train"] = {{"max_steps", 8}, {"micro_batch", 4}};
  const RunConfig now = parse_run_config(doc, "t.json", 2);
  for (const auto& [mb, ga] : {std::pair{nlohmann::json(0), nlohmann::json(1)},
                               {nlohmann::json(4), nlohmann::json(std::uint64_t{1} << 63)},
                               {nlohmann::json(-4), nlohmann::json(2)}}) {
    nlohmann::json saved = now.to_json();
    saved["train"]["micro_batch"] = mb;
    saved["train"]["grad_accum"] = ga;
    const std::vector<std::string> c = trajectory_changes(saved, 2, 4, now);
    ASSERT_EQ(c.size(), 1u) << mb << " x " << ga;
    EXPECT_NE(c[0].find("are not a batch (a damaged manifest)"), std::string::npos) << c[0];
  }
}

nlohmann::json data_file(const std::string& path, std::int64_t bytes, std::uint32_t fingerprint,
                         const char* split = nullptr) {
  nlohmann::json f = {{"path", path}, {"bytes", bytes}, {"fingerprint", fingerprint}};
  if (split != nullptr) f["split"] = split;
  return f;
}

// The training files decide the trajectory; other validation or vocabulary files are noted, not
// refused. A checkpoint from before splits were recorded compares every file as before.
TEST(ResumeData, OnlyTheTrainingFilesAreTheTrajectorys) {
  const nlohmann::json saved =
      nlohmann::json::array({data_file("d/tr_0.bin", 100, 1, "train"), data_file("d/tr_1.bin", 200, 2, "train"),
                             data_file("d/va.bin", 50, 3, "val"), data_file("d/vocab.json", 10, 4, "vocab")});
  nlohmann::json other_val = saved;
  other_val[2] = data_file("e/va_small.bin", 20, 5, "val");
  other_val.erase(3);
  EXPECT_TRUE(data_changes(saved, other_val).empty());
  const std::vector<std::string> noted = evaluation_data_changes(saved, other_val);
  ASSERT_EQ(noted.size(), 3u);
  EXPECT_EQ(noted[0], "data file e/va_small.bin: not read by the saved run -> 20 bytes, fingerprint 00000005");
  EXPECT_EQ(noted[1], "data file d/va.bin: 50 bytes, fingerprint 00000003 -> not read by this run");
  EXPECT_EQ(noted[2], "data file d/vocab.json: 10 bytes, fingerprint 00000004 -> not read by this run");
  EXPECT_TRUE(evaluation_data_changes(saved, saved).empty());
  // A shard moved from training to validation is a change of the training files.
  nlohmann::json moved = saved;
  moved[1]["split"] = "val";
  const std::vector<std::string> fewer = data_changes(saved, moved);
  ASSERT_EQ(fewer.size(), 1u);
  EXPECT_EQ(fewer[0], "data file d/tr_1.bin: 200 bytes, fingerprint 00000002 -> not read by this run");
  // Recorded without splits: every file is the trajectory's, nothing is only noted.
  nlohmann::json unsplit = saved;
  for (nlohmann::json& f : unsplit) f.erase("split");
  EXPECT_EQ(data_changes(unsplit, other_val).size(), 3u);
  EXPECT_TRUE(evaluation_data_changes(unsplit, other_val).empty());
  // ... but eval --val's check finds each validation file read now among them, by its path, else by
  // its name (an upgrade trial's changed val.bin was scored against an old checkpoint unsaid).
  const nlohmann::json val_now = nlohmann::json::array({data_file("d/va.bin", 50, 3, "val")});
  EXPECT_TRUE(validation_data_changes(unsplit, val_now).empty());
  nlohmann::json rewritten = val_now;
  rewritten[0]["fingerprint"] = 9;
  const std::vector<std::string> changed = validation_data_changes(unsplit, rewritten);
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0], "data file d/va.bin: 50 bytes, fingerprint 00000003 -> 50 bytes, fingerprint 00000009");
  nlohmann::json moved_data = rewritten;
  moved_data[0]["path"] = "e/va.bin";
  EXPECT_EQ(validation_data_changes(unsplit, moved_data).size(), 1u) << "paired by its name";
  moved_data[0]["fingerprint"] = 3;
  EXPECT_TRUE(validation_data_changes(unsplit, moved_data).empty()) << "the same contents elsewhere";
  // Moved, beside a training shard of the same name listed first: paired by contents, not refused.
  const nlohmann::json same_names =
      nlohmann::json::array({data_file("d/train/000000.bin", 100, 1), data_file("d/val/000000.bin", 50, 2)});
  const nlohmann::json moved_val = nlohmann::json::array({data_file("e/val/000000.bin", 50, 2, "val")});
  EXPECT_TRUE(validation_data_changes(same_names, moved_val).empty());
  nlohmann::json unknown = val_now;
  unknown[0]["path"] = "e/other.bin";
  ASSERT_EQ(validation_data_changes(unsplit, unknown).size(), 1u);
  EXPECT_NE(validation_data_changes(unsplit, unknown)[0].find("not read by the saved run"), std::string::npos);
}

// The tokenizer beside the first training shard, recorded as found (since 2026-12-07): an identity
// that recorded none found (an earlier build's) is not told of it as a vocabulary come; one that
// did is told of its change.
TEST(ResumeData, AFoundTokenizerCountsWhereTheSavedIdentityRecordsOne) {
  nlohmann::json found = data_file("s/tokenizer.json", 30, 7, "vocab");
  found["found"] = "beside the first training shard";
  const nlohmann::json older = nlohmann::json::array({data_file("s/t_1.bin", 100, 1, "train")});
  nlohmann::json now = older;
  now.push_back(found);
  EXPECT_TRUE(evaluation_data_changes(older, now).empty());
  EXPECT_FALSE(vocabulary_changed(older, now));
  nlohmann::json other = now;
  other[1]["fingerprint"] = 8;
  EXPECT_EQ(evaluation_data_changes(now, other).size(), 1u);
  EXPECT_TRUE(vocabulary_changed(now, other));
  // An identity from before splits were recorded: every file compared as the trajectory's, but the
  // found tokenizer (a resume of such a shard run was refused for it as a data file come).
  nlohmann::json unsplit = older;
  for (nlohmann::json& f : unsplit) f.erase("split");
  EXPECT_TRUE(data_changes(unsplit, now).empty());
  // A file gone since the save is said so (it read "-1 bytes, fingerprint 00000000").
  nlohmann::json gone = older;
  gone[0] = data_file("s/t_1.bin", -1, 0, "train");
  const std::vector<std::string> said = data_changes(older, gone);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("-> gone or unreadable"), std::string::npos) << said[0];
  // A named tokenizer new to the run is still told.
  nlohmann::json named = older;
  named.push_back(data_file("t/tokenizer.json", 30, 7, "vocab"));
  EXPECT_TRUE(vocabulary_changed(older, named));
}

// The data a checkpoint recorded against the run's: the same contents in the same order under other
// paths is no change; the same files in another order is one (other windows make each step).
TEST(ResumeData, TheSameFilesInAnotherOrderAreAChange) {
  const nlohmann::json a = data_file("d/a.bin", 100, 1), b = data_file("d/b.bin", 200, 2);
  const nlohmann::json saved = nlohmann::json::array({a, b});
  EXPECT_TRUE(data_changes(saved, saved).empty());
  const nlohmann::json moved = nlohmann::json::array({data_file("e/a.bin", 100, 1), data_file("e/b.bin", 200, 2)});
  EXPECT_TRUE(data_changes(saved, moved).empty());
  const std::vector<std::string> swapped = data_changes(saved, nlohmann::json::array({b, a}));
  ASSERT_EQ(swapped.size(), 1u);
  EXPECT_EQ(swapped[0], "the order of the data files: d/a.bin, d/b.bin -> d/b.bin, d/a.bin");
  // Moved with their contents swapped between the names: each named with the saved one (the two
  // lists read alike).
  const std::vector<std::string> renamed =
      data_changes(saved, nlohmann::json::array({data_file("e/a.bin", 200, 2), data_file("e/b.bin", 100, 1)}));
  ASSERT_EQ(renamed.size(), 1u);
  EXPECT_EQ(renamed[0],
            "the order of the data files: d/a.bin, d/b.bin -> e/a.bin (saved as d/b.bin), e/b.bin (saved as d/a.bin)");
  const std::vector<std::string> resized =
      data_changes(saved, nlohmann::json::array({a, data_file("d/b.bin", 300, 2)}));
  ASSERT_EQ(resized.size(), 1u);
  EXPECT_TRUE(resized[0].starts_with("data file d/b.bin: 200 bytes")) << resized[0];
  // Both read through another path (the data moved), one of them changed: that one change.
  const std::vector<std::string> moved_and_changed =
      data_changes(saved, nlohmann::json::array({data_file("/e/a.bin", 100, 1), data_file("/e/b.bin", 300, 2)}));
  ASSERT_EQ(moved_and_changed.size(), 1u);
  EXPECT_EQ(
      moved_and_changed[0],
      "data file /e/b.bin (saved as d/b.bin): 200 bytes, fingerprint 00000002 -> 300 bytes, fingerprint 00000002");
  // Two files of equal contents moved, one of them changed: paired by name, that one change.
  const nlohmann::json same = nlohmann::json::array({data_file("d/a.bin", 100, 1), data_file("d/b.bin", 100, 1)});
  const std::vector<std::string> twins =
      data_changes(same, nlohmann::json::array({data_file("/e/b.bin", 100, 1), data_file("/e/a.bin", 100, 7)}));
  ASSERT_EQ(twins.size(), 1u);
  EXPECT_TRUE(twins[0].starts_with("data file /e/a.bin (saved as d/a.bin)")) << twins[0];
  // A file another run reads instead: one not read before, one no longer read.
  EXPECT_EQ(data_changes(saved, nlohmann::json::array({a, data_file("d/c.bin", 300, 3)})).size(), 2u);
}

// A token file rewritten between its ends at the same size (another tokenisation of the middle):
// its sampled fingerprint differs, so a resume is refused naming it (its ends' alone did not). A
// checkpoint recorded before the sampled fingerprint compares the ends.
TEST(ResumeData, AFileRewrittenBetweenItsEndsIsAChange) {
  const std::string dir = ::testing::TempDir() + "/zt_identity_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string train = dir + "/train.bin", val = dir + "/val.bin";
  std::vector<char> bytes(1 << 20);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 7919) >> 3);
  std::ofstream(train, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::ofstream(val, std::ios::binary).write(bytes.data(), 1000);
  nlohmann::json doc = base();
  doc["data"] = {{"train_file", train}, {"val_file", val}};
  const RunConfig c = parse_run_config(doc, "t.json");
  const nlohmann::json saved = data_identity(c);
  ASSERT_TRUE(saved[0].contains("sampled_fingerprint"));
  EXPECT_FALSE(saved[1].contains("sampled_fingerprint")) << "a file of its ends alone";
  // 100 KB a third of the way in, far from both ends.
  for (std::size_t i = 350'000; i < 450'000; ++i) bytes[i] = static_cast<char>(bytes[i] ^ 0x5A);
  std::ofstream(train, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const nlohmann::json now = data_identity(c);
  EXPECT_EQ(now[0]["fingerprint"], saved[0]["fingerprint"]) << "the ends are as they were";
  const std::vector<std::string> changed = data_changes(saved, now);
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_TRUE(changed[0].starts_with("data file " + train + ": 1048576 bytes, fingerprint")) << changed[0];
  EXPECT_NE(changed[0].find(", sampled "), std::string::npos) << changed[0];
  nlohmann::json older = saved;
  for (nlohmann::json& f : older) f.erase("sampled_fingerprint");
  EXPECT_TRUE(data_changes(older, now).empty());
  std::filesystem::remove_all(dir);
}

// A data file replaced between the identity a run records and the data it opens (a program writing
// it as the run started): refused naming it, rather than checkpoints naming files the run did not
// train on; the same files pass.
TEST(ResumeData, AFileChangedAsTheRunStartsIsRefused) {
  const std::string dir = ::testing::TempDir() + "/zt_started_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string train = dir + "/train.bin", val = dir + "/val.bin";
  std::ofstream(train, std::ios::binary) << std::string(5000, 'a');
  std::ofstream(val, std::ios::binary) << std::string(1000, 'b');
  nlohmann::json doc = base();
  doc["data"] = {{"train_file", train}, {"val_file", val}};
  const RunConfig c = parse_run_config(doc, "t.json");
  const nlohmann::json recorded = data_identity(c);
  EXPECT_NO_THROW(check_data_unchanged(c, recorded));
  std::ofstream(val, std::ios::binary) << std::string(1200, 'c');
  const std::string msg = error_of([&] { check_data_unchanged(c, recorded); });
  EXPECT_TRUE(msg.starts_with("data file " + val + " changed as the run started (1000 bytes, fingerprint")) << msg;
  EXPECT_NE(msg.find("-> 1200 bytes"), std::string::npos) << msg;
  // A shard come under a data.train_files pattern: the files' list differs, named.
  std::ofstream(dir + "/shard_0.bin", std::ios::binary) << std::string(3000, 'd');
  doc["data"] = {{"train_files", {dir + "/shard_*.bin"}}, {"val_files", {val}}};
  const RunConfig sharded = parse_run_config(doc, "t.json");
  const nlohmann::json shards = data_identity(sharded);
  std::ofstream(dir + "/shard_1.bin", std::ios::binary) << std::string(3000, 'e');
  const std::string more = error_of([&] { check_data_unchanged(sharded, shards); });
  EXPECT_NE(more.find("the data files changed as the run started"), std::string::npos) << more;
  EXPECT_NE(more.find("shard_1.bin"), std::string::npos) << more;
  std::filesystem::remove_all(dir);
}

nlohmann::json fine_tune(const std::string& init_from) {
  nlohmann::json doc = base();
  doc["model"] = {{"n_layer", 3}};  // the config's own key beside those init_from gives
  doc["train"] = {{"init_from", init_from}};
  return doc;
}

// init_from's folder gone: with a source of the saved model keys they fill what the config leaves
// out (its own keys stay, for the resume to compare); without one, or where that source fails, the
// config is refused in one line naming the folder.
TEST(ResumeInitFrom, AGoneFolderTakesTheSavedModelKeys) {
  const std::string gone = ::testing::TempDir() + "/no_such_pretrained_folder";
  const nlohmann::json saved = base()["model"];
  int calls = 0;
  const RunConfig c = parse_run_config(fine_tune(gone), "test.json", 1, nullptr, [&](const RunConfig& partial) {
    ++calls;
    EXPECT_EQ(partial.log.run_dir, "runs/test");  // its log and checkpoint sections already read
    return saved;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(c.model.n_layer, 3);
  EXPECT_EQ(c.model.n_embd, 32);
  EXPECT_EQ(c.train.init_from, gone);
  expect_error(fine_tune(gone), {"no_such_pretrained_folder"});
  try {
    parse_run_config(fine_tune(gone), "test.json", 1, nullptr,
                     [](const RunConfig&) -> nlohmann::json { throw InputError("--resume latest: no checkpoint"); });
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("no_such_pretrained_folder\" does not exist"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--resume latest: no checkpoint"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace zt
