// Where a config's values came from: an error names the --set that gave the value it is about,
// a check across keys names the file and each --set among its keys, and the defaults that depend on
// the launch (train.num_threads) or on other keys (optim.decay_steps) are printed as derived.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "engine/app/config/run_config.h"
#include "engine/app/trainer/start_checks.h"
#include "engine/app/trainer/store_comm.h"
#include "engine/base/core/check.h"
#include "tests/core/config_test_util.h"

namespace zt {
namespace {

// Each test's own file: ctest runs the tests of this binary as parallel processes, and a file
// shared by name was truncated by one while another read it.
std::string written_base() {
  const std::string path = ::testing::TempDir() + "/config_sources_" +
                           ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json";
  std::ofstream(path) << base().dump();
  return path;
}

// The InputError's message of load_run_config(path, overrides).
std::string load_error(const std::string& path, const std::vector<std::string>& overrides) {
  try {
    load_run_config(path, overrides);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

bool has_line(const RunConfig& c, const std::string& fragment) {
  return std::any_of(c.derived.begin(), c.derived.end(),
                     [&](const std::string& d) { return d.find(fragment) != std::string::npos; });
}

// A check across keys inside a section a --set gave whole names that --set (it named the file).
TEST(ConfigSources, ACheckAcrossKeysOfASectionSetWholeNamesTheSet) {
  const OverrideSources sources = {{"model.rope_scaling", "--set model.rope_scaling={...}"}};
  EXPECT_EQ(
      config_sources("l.json", &sources, {"model.rope_scaling.low_freq_factor", "model.rope_scaling.high_freq_factor"}),
      "l.json and --set model.rope_scaling={...}")
      << "named once, for both keys";
  EXPECT_EQ(config_sources("l.json", &sources, {"model.rope_scaling_x", "model.n_embd"}), "l.json");
}

TEST(ConfigSources, AnUnknownSectionFromASetNamesTheSet) {
  const std::string path = written_base();
  const std::string msg = load_error(path, {"trian.max_steps=3"});
  EXPECT_NE(msg.find("config error in --set trian.max_steps=3: unknown key 'trian'"), std::string::npos) << msg;
}

// A --set of a whole section after a --set of a key in it: the section's value stands, and its
// faults are that --set's, not the earlier one's it replaced.
TEST(ConfigSources, ALaterSetOfTheWholeSectionIsBlamedForItsKeys) {
  const std::string path = written_base();
  const std::string msg = load_error(path, {"train.seed=1", R"(train={"seed": -1})"});
  EXPECT_NE(msg.find(R"(config error in --set train={"seed": -1}: key 'train.seed')"), std::string::npos) << msg;
}

// A --set of a whole section sets the keys it names and keeps the others: the file's, and an
// earlier --set inside it (it replaced the section, dropping both without a word). A key below a
// value is refused naming that value's key.
TEST(ConfigSources, ASetOfAWholeSectionSetsItsKeysAndKeepsTheOthers) {
  nlohmann::json doc = base();
  doc["optim"] = {{"lr", 0.01}, {"warmup_steps", 4}, {"min_lr", 1e-4}};
  doc["train"] = {{"micro_batch", 2}};
  const std::string path = ::testing::TempDir() + "/config_sources_whole_section.json";
  std::ofstream(path) << doc.dump();
  const RunConfig c = load_run_config(path, {"train.max_steps=2", R"(optim={"lr": 0.005})", "train={}"});
  EXPECT_EQ(c.train.max_steps, 2);
  EXPECT_EQ(c.train.micro_batch, 2);
  EXPECT_FLOAT_EQ(c.optim.adamw.lr, 0.005f);
  EXPECT_EQ(c.optim.warmup_steps, 4);
  EXPECT_FLOAT_EQ(c.optim.min_lr, 1e-4f);
  const std::string msg = load_error(path, {"optim.lr.x=1"});
  EXPECT_NE(msg.find("--set 'optim.lr.x=1': 'optim.lr' is not a section"), std::string::npos) << msg;
}

TEST(ConfigSources, ChecksAcrossKeysNameTheFileAndEachSet) {
  const std::string path = written_base();
  std::string msg = load_error(path, {"model.n_head=3"});
  EXPECT_NE(msg.find("config error in " + path + " and --set model.n_head=3: model.n_embd = 32 is not divisible"),
            std::string::npos)
      << msg;
  msg = load_error(path, {"train.grad_accum=2", "train.global_batch_tokens=100"});
  EXPECT_NE(msg.find(path + " and --set train.global_batch_tokens=100, --set train.grad_accum=2: "), std::string::npos)
      << msg;
  msg = load_error(path, {"train.seq_len=17"});
  EXPECT_NE(msg.find(path + " and --set train.seq_len=17: train.seq_len = 17 exceeds"), std::string::npos) << msg;
  // Values all from the file: the file alone.
  nlohmann::json doc = base();
  doc["model"]["n_head"] = 3;
  const std::string odd = ::testing::TempDir() + "/config_sources_odd.json";
  std::ofstream(odd) << doc.dump();
  msg = load_error(odd, {});
  EXPECT_NE(msg.find("config error in " + odd + ": model.n_embd"), std::string::npos) << msg;
}

// Checks made after reading (the store's communicator, the checkpoint folder) name the --set too.
TEST(ConfigSources, ChecksAfterReadingNameTheSet) {
  const std::string path = written_base();
  auto message = [](auto&& check) {
    try {
      check();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const RunConfig hybrid = load_run_config(path, {"zero.shard_group_size=2"});
  std::string msg = message([&] { (void)store_comm_choice(hybrid, 3); });
  EXPECT_NE(msg.find("config error in " + path +
                     " and --set zero.shard_group_size=2: zero.shard_group_size = 2 "
                     "must divide the 3 rank(s) and be at least 2 (here 3; 0: the whole world)"),
            std::string::npos)
      << msg;
  const std::string plain_file = ::testing::TempDir() + "/config_sources_plain_file";
  std::ofstream(plain_file) << "x";
  const RunConfig folder = load_run_config(path, {"checkpoint.dir=" + plain_file + "/sub"});
  msg = message([&] { check_checkpoint_folder(folder, ::testing::TempDir()); });
  EXPECT_NE(msg.find("config error in " + path + " and --set checkpoint.dir=" + plain_file + "/sub: checkpoint.dir"),
            std::string::npos)
      << msg;
}

// every:K at or past the block count checkpoints block 0 alone, and says so.
TEST(ConfigSources, EveryKPastTheBlocksIsSaid) {
  const std::string path = written_base();
  const RunConfig far = load_run_config(path, {"train.activation_checkpointing=every:999"});
  EXPECT_TRUE(has_line(far, "train.activation_checkpointing = every:999: of the model's 2 blocks only block 0"));
  const RunConfig within = load_run_config(path, {"train.activation_checkpointing=every:1"});
  EXPECT_FALSE(has_line(within, "train.activation_checkpointing"));
}

// 0 threads: the node's cores shared among the ranks the launcher puts on it, at least one each,
// deterministic runs too (their products' bits do not depend on the thread count).
TEST(ConfigSources, DefaultThreadsShareTheNodesCoresAmongItsRanks) {
  const std::string path = written_base();
  const int cores = omp_get_num_procs();
  RunConfig alone = load_run_config(path, {});
  EXPECT_EQ(alone.train.num_threads, cores);
  // Said, as the count resolved: 0 would not be what config.json and the checkpoint hold.
  EXPECT_TRUE(has_line(alone, fmt::format("train.num_threads = {} (this node's cores)", cores)));
  ::setenv("LOCAL_WORLD_SIZE", "2", 1);  // torchrun's name: nothing else of a launch is set
  RunConfig two = load_run_config(path, {});
  RunConfig many = load_run_config(path, {"train.num_threads=5"});
  RunConfig deterministic = load_run_config(path, {"train.deterministic=true"});
  ::setenv("LOCAL_WORLD_SIZE", "1000", 1);
  RunConfig crowded = load_run_config(path, {});
  ::unsetenv("LOCAL_WORLD_SIZE");
  EXPECT_EQ(two.train.num_threads, std::max(1, cores / 2));
  EXPECT_TRUE(has_line(two, "shared by its 2 ranks"));
  EXPECT_EQ(many.train.num_threads, 5);  // given: kept
  EXPECT_EQ(crowded.train.num_threads, 1);
  EXPECT_EQ(deterministic.train.num_threads, std::max(1, cores / 2));
}

// Threads given past the node's cores (its ranks' threads together) are warned about, naming the
// count that fits, unless OMP_WAIT_POLICY=passive makes the waiting threads sleep; CUDA ranks
// compute on the device, so not there; nor one thread a rank, whatever the ranks.
TEST(ConfigSources, ThreadsPastTheCoresAreWarnedAbout) {
  const std::string path = written_base();
  const int cores = omp_get_num_procs();
  const char* policy = std::getenv("OMP_WAIT_POLICY");  // ctest sets passive
  const std::string kept_policy = policy == nullptr ? "" : policy;
  ::unsetenv("OMP_WAIT_POLICY");
  ::setenv("LOCAL_WORLD_SIZE", "2", 1);
  // At least 2: one thread a rank is never warned about (2 ranks of 2 threads pass a 1-core node).
  const std::string over = fmt::format("train.num_threads={}", std::max(2, cores));
  const RunConfig crowded = load_run_config(path, {over});
  const RunConfig fitting = load_run_config(path, {fmt::format("train.num_threads={}", std::max(1, cores / 2))});
  const RunConfig derived = load_run_config(path, {});
  const RunConfig cuda = load_run_config(path, {over, "device=cuda"});
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  const RunConfig passive = load_run_config(path, {over});
  ::unsetenv("OMP_WAIT_POLICY");
  ::setenv("LOCAL_WORLD_SIZE", std::to_string(cores + 1).c_str(), 1);  // more ranks than cores
  const RunConfig one_a_rank = load_run_config(path, {"train.num_threads=1"});
  ::unsetenv("LOCAL_WORLD_SIZE");
  if (kept_policy.empty()) {
    ::unsetenv("OMP_WAIT_POLICY");
  } else {
    ::setenv("OMP_WAIT_POLICY", kept_policy.c_str(), 1);
  }
  ASSERT_EQ(crowded.warnings.size(), 1u);
  EXPECT_EQ(
      crowded.warnings[0],
      fmt::format("train.num_threads = {} (given in --set {}) on each of this node's 2 rank(s) asks for {} "
                  "threads on its {} cores: OpenMP's spinning waits can make the steps several times slower; leave "
                  "train.num_threads out ({} a rank here) or set OMP_WAIT_POLICY=passive",
                  std::max(2, cores), over, 2 * std::max(2, cores), cores, std::max(1, cores / 2)));
  EXPECT_TRUE(fitting.warnings.empty());
  EXPECT_TRUE(derived.warnings.empty());  // the count it derives fits
  EXPECT_TRUE(cuda.warnings.empty());
  EXPECT_TRUE(passive.warnings.empty());
  // One thread a rank has no team whose waits spin, however many ranks share the cores.
  EXPECT_TRUE(one_a_rank.warnings.empty());
}

TEST(ConfigSources, DefaultDecayStepsArePrintedAsDerived) {
  const std::string path = written_base();
  RunConfig c = load_run_config(path, {"train.max_steps=300", "optim.warmup_steps=10"});
  EXPECT_EQ(c.optim.decay_steps, 300);
  EXPECT_TRUE(has_line(c, "optim.decay_steps = 300 (train.max_steps)"));
  c = load_run_config(path, {"train.max_steps=5", "optim.warmup_steps=10"});
  EXPECT_EQ(c.optim.decay_steps, 10);
  EXPECT_TRUE(has_line(c, "optim.decay_steps = 10 (optim.warmup_steps"));
  c = load_run_config(path, {"optim.decay_steps=50", "optim.warmup_steps=10"});
  EXPECT_FALSE(has_line(c, "optim.decay_steps"));
}

}  // namespace
}  // namespace zt
