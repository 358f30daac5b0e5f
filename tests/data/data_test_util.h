// Helpers shared by the data-layer tests: temporary paths, whole-file I/O, and an assertion that
// a call throws InputError whose message contains given fragments.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

#include "engine/base/core/check.h"

namespace zt::data::testing {

inline std::string temp_path(const std::string& name) { return ::testing::TempDir() + "/zt_data_" + name; }

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Runs fn, expecting an InputError whose one-line message contains every fragment.
inline void expect_input_error(const std::function<void()>& fn, std::initializer_list<std::string> fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is one line: " << msg;
    for (const std::string& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
  }
}

}  // namespace zt::data::testing
