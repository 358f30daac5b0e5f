// Reading a Hugging Face config.json (what `train.init_from` names) into a family's model keys:
// typed getters whose errors are one line naming the file and the field.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace zt {

class HfConfigReader {
 public:
  HfConfigReader(const nlohmann::json& hf, std::string source) : hf_(hf), source_(std::move(source)) {}

  // A required positive integer.
  int integer(const char* key) const;
  // The value, or `fallback` when the field is absent or null.
  int integer_or(const char* key, int fallback) const;
  double number_or(const char* key, double fallback) const;
  bool boolean_or(const char* key, bool fallback) const;
  std::string string_or(const char* key, const std::string& fallback) const;
  // Whether the field is present and not null.
  bool has(const char* key) const { return hf_.contains(key) && !hf_.at(key).is_null(); }
  // InputError: "<source>: <key> = <value>: <why>".
  [[noreturn]] void refuse(const char* key, const std::string& why) const;

 private:
  const nlohmann::json* field(const char* key, bool (nlohmann::json::*is)() const noexcept, const char* what) const;

  const nlohmann::json& hf_;
  std::string source_;
};

}  // namespace zt
