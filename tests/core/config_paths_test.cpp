// Paths in a config: a leading "~" is $HOME, as a shell would read it on a command line (a config
// file is not one: "~/runs" made a folder named "~" in the working directory).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/core/config_test_util.h"

namespace zt {
namespace {

class ConfigPaths : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* home = std::getenv("HOME");
    saved_ = home != nullptr ? home : "";
    had_home_ = home != nullptr;
    setenv("HOME", "/home/someone", 1);
  }
  void TearDown() override {
    if (had_home_) {
      setenv("HOME", saved_.c_str(), 1);
    } else {
      unsetenv("HOME");
    }
  }
  std::string saved_;
  bool had_home_ = false;
};

TEST_F(ConfigPaths, ALeadingTildeIsHome) {
  nlohmann::json doc = base();
  doc["log"] = {{"run_dir", "~/runs/a"}};
  doc["checkpoint"] = {{"dir", "~user/ckpts"}};  // another user's home: not expanded
  doc["data"] = {
      {"train_files", {"~/data/train_*.bin", "shards/x~/y.bin"}}, {"val_files", "~/data/val.bin"}, {"vocab_file", "~"}};
  const RunConfig c = parse_run_config(doc, "test.json");
  EXPECT_EQ(c.log.run_dir, "/home/someone/runs/a");
  EXPECT_EQ(c.checkpoint.dir, "~user/ckpts");
  EXPECT_EQ(c.data.vocab_file, "/home/someone");
  EXPECT_EQ(c.data.train_files, (std::vector<std::string>{"/home/someone/data/train_*.bin", "shards/x~/y.bin"}));
  EXPECT_EQ(c.data.val_files, std::vector<std::string>{"/home/someone/data/val.bin"});
}

TEST_F(ConfigPaths, WithoutHomeATildeIsRefusedNamingTheKey) {
  unsetenv("HOME");
  nlohmann::json doc = base();
  doc["log"] = {{"run_dir", "~/runs/a"}};
  expect_error(doc, {"test.json", "~/runs/a", "HOME is not set"});
}

}  // namespace
}  // namespace zt
