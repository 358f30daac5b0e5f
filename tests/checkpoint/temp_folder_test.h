// The checkpoint gtests' fixture: a fresh folder under the temporary directory for each test
// (folder_), removed after it.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace zt::ckpt::testing {

class TempFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "zt_ckpt_test_XXXXXX").string();
    folder_ = mkdtemp(tmpl.data());
  }
  void TearDown() override { std::filesystem::remove_all(folder_); }
  std::string folder_;
};

}  // namespace zt::ckpt::testing
