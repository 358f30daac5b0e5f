// HfConfigReader: typed fields of a Hugging Face config.json (see the header).
#include "models/hf_config_reader.h"

#include "engine/base/core/check.h"
#include "engine/base/core/config_reader.h"
#include "engine/base/core/config_text.h"

namespace zt {

const nlohmann::json* HfConfigReader::field(const char* key, bool (nlohmann::json::*is)() const noexcept,
                                            const char* what) const {
  if (!has(key)) return nullptr;
  const nlohmann::json& v = hf_.at(key);
  if (!(v.*is)()) throw_input_error("{}: {} must be {} (got {})", source_, key, what, preview_json(v));
  return &v;
}

int HfConfigReader::integer(const char* key) const {
  const nlohmann::json* v = field(key, &nlohmann::json::is_number_integer, "an integer");
  if (v == nullptr) throw_input_error("{}: no {} (a Hugging Face config of this model type has one)", source_, key);
  const long long x = v->get<long long>();
  if (x < 1 || x > (1LL << 30)) refuse(key, "out of range");
  return static_cast<int>(x);
}

int HfConfigReader::integer_or(const char* key, int fallback) const { return has(key) ? integer(key) : fallback; }

double HfConfigReader::number_or(const char* key, double fallback) const {
  const nlohmann::json* v = field(key, &nlohmann::json::is_number, "a number");
  return v == nullptr ? fallback : v->get<double>();
}

bool HfConfigReader::boolean_or(const char* key, bool fallback) const {
  const nlohmann::json* v = field(key, &nlohmann::json::is_boolean, "true or false");
  return v == nullptr ? fallback : v->get<bool>();
}

std::string HfConfigReader::string_or(const char* key, const std::string& fallback) const {
  const nlohmann::json* v = field(key, &nlohmann::json::is_string, "a string");
  return v == nullptr ? fallback : v->get<std::string>();
}

void HfConfigReader::refuse(const char* key, const std::string& why) const {
  throw_input_error("{}: {} = {}: {}", source_, key, hf_.contains(key) ? preview_json(hf_.at(key)) : "(absent)", why);
}

}  // namespace zt
