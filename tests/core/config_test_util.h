// What the config tests share: a minimal valid config and the one-line-error expectation.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <initializer_list>
#include <string>

#include "engine/app/config/run_config.h"
#include "engine/base/core/check.h"

namespace zt {

inline nlohmann::json base() {
  return nlohmann::json::parse(R"({"model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 16,
                                              "vocab_size": 65}})");
}

// The InputError's message of f(), or "" with a failure where it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an InputError";
  return "";
}

// Expects parse_run_config to throw InputError whose message contains every fragment.
inline void expect_error(nlohmann::json doc, std::initializer_list<const char*> fragments) {
  try {
    parse_run_config(std::move(doc), "test.json");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
    for (const char* f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
  }
}

}  // namespace zt
