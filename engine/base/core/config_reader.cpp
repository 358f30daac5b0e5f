// ConfigReader: checked access to JSON config sections (the text they come from: config_text.h).
#include "engine/base/core/config_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "engine/base/core/check.h"
#include "engine/base/core/config_text.h"

namespace zt {

const nlohmann::json ConfigReader::kEmptyObject = nlohmann::json::object();

ConfigReader::ConfigReader(const nlohmann::json& node, std::string file, std::string path,
                           std::shared_ptr<const OverrideSources> overrides)
    : node_(node), file_(std::move(file)), path_(std::move(path)), overrides_(std::move(overrides)) {
  if (!node_.is_object()) {
    // A section a --set gave as a word: its JSON's fault said where (`--set 'optim={"lr": 0.1,}'`).
    const std::optional<std::string> set = own_set_value(path_);
    const std::string hint = set && node_.is_string() ? json_word_hint(*set) : "";
    const auto own = overrides_ != nullptr ? overrides_->find(path_) : OverrideSources::const_iterator{};
    throw_input_error("config error in {}: '{}' must be a JSON object{}",
                      overrides_ != nullptr && own != overrides_->end() ? own->second : file_,
                      path_.empty() ? "<root>" : path_, hint);
  }
}

// A key given as null (in the file, or --set data.train_file=null) is one not given: its default,
// as JSON merge patches and Hugging Face's configs read null, and the way to clear with --set a
// key the file gives. Still a key of the section (a misspelt one is refused).
const nlohmann::json* ConfigReader::find(const std::string& key) {
  known_.insert(key);
  auto it = node_.find(key);
  return it == node_.end() || it->is_null() ? nullptr : &*it;
}

bool ConfigReader::has(const std::string& key) const {
  const auto it = node_.find(key);
  return it != node_.end() && !it->is_null();
}

std::string ConfigReader::source_of(const std::string& key) const {
  if (overrides_ != nullptr) {
    const std::string name = dotted(key);
    // Its own --set, or one that gave a section around it whole (`--set 'model.rope_scaling={...}'`).
    if (const std::string* set = enclosing_override(name)) return *set;
    // A section only a --set made (`--set trian.max_steps=3`): that assignment, not the file.
    const auto inside = overrides_->lower_bound(name + ".");
    if (inside != overrides_->end() && inside->first.rfind(name + ".", 0) == 0) return inside->second;
  }
  return file_;
}

std::string ConfigReader::section_sources() const {
  if (path_.empty() || overrides_ == nullptr) return file_;
  if (const std::string* whole = enclosing_override(path_)) return *whole;
  std::string out = file_;
  const std::string inside = path_ + ".";
  for (auto it = overrides_->lower_bound(inside); it != overrides_->end() && it->first.starts_with(inside); ++it) {
    out += (out == file_ ? " and " : ", ") + it->second;
  }
  return out;
}

const std::string* ConfigReader::enclosing_override(const std::string& name) const {
  for (std::size_t end = name.size(); end != std::string::npos && end > 0; end = name.rfind('.', end - 1)) {
    const auto it = overrides_->find(name.substr(0, end));
    if (it != overrides_->end()) return &it->second;
  }
  return nullptr;
}

std::string config_sources(const std::string& file, const OverrideSources* overrides,
                           std::span<const std::string_view> dotted_keys) {
  std::string out = file;
  if (overrides == nullptr) return out;
  std::set<std::string> named;
  for (const std::string_view key : dotted_keys) {
    // Its own source, or that of a section around it given whole (--set 'model.rope_scaling={...}').
    const std::string name(key);
    for (std::size_t end = name.size(); end != std::string::npos && end > 0; end = name.rfind('.', end - 1)) {
      const auto it = overrides->find(name.substr(0, end));
      if (it == overrides->end()) continue;
      if (named.insert(it->second).second) out += (out == file ? " and " : ", ") + it->second;
      break;
    }
  }
  return out;
}

std::string ConfigReader::sources_of(std::initializer_list<std::string_view> dotted_keys) const {
  return config_sources(file_, overrides_.get(), dotted_keys);
}

void ConfigReader::fail_type(const std::string& key, const char* expected, const nlohmann::json& got) const {
  const std::string source = source_of(key);
  // A --set value is read as JSON first (--set log.run_dir=2024 is the number 2024): say how to
  // write it as text, in the user's own spelling.
  std::string hint;
  const std::optional<std::string> set = own_set_value(dotted(key));
  if (std::string_view(expected).starts_with("a string") && set && (got.is_number() || got.is_boolean())) {
    hint =
        fmt::format(" (a --set value is read as JSON; for the text, quote it: --set '{}=\"{}\"')", dotted(key), *set);
  } else if (set && got.is_string()) {
    // Kept as a word because it is no JSON, where an object, a list or a number was meant.
    hint = json_word_hint(*set);
  }
  throw_input_error("config error in {}: key '{}' must be {} (got {}){}", source, dotted(key), expected,
                    preview_json(got), hint);
}

std::optional<std::string> ConfigReader::own_set_value(const std::string& dotted) const {
  if (overrides_ == nullptr) return std::nullopt;
  const auto it = overrides_->find(dotted);
  if (it == overrides_->end() || !it->second.starts_with("--set ")) return std::nullopt;
  return it->second.substr(it->second.find('=') + 1);
}

void ConfigReader::fail_range(const std::string& key, const std::string& value, const std::string& min_value,
                              const std::string& max_value) const {
  const std::string source = source_of(key);
  // A file's value may be one an older build accepted (a run directory's config.json, resumed): a
  // --set of the key is the way to continue without editing the run's own record.
  const std::string hint = source == file_ ? fmt::format(" (a --set {}=VALUE overrides the file)", dotted(key)) : "";
  throw_input_error("config error in {}: key '{}' = {} is out of range [{}, {}]{}", source, dotted(key), value,
                    min_value, max_value, hint);
}

std::optional<long long> json_integer_in(const nlohmann::json& v, long long min_value, long long max_value) {
  if (!v.is_number_integer()) return std::nullopt;
  // Above 2^63 - 1 a long long would read it as a negative number.
  if (v.is_number_unsigned() && v.get<unsigned long long>() > static_cast<unsigned long long>(max_value)) {
    return std::nullopt;
  }
  const long long x = v.get<long long>();
  if (x < min_value || x > max_value) return std::nullopt;
  return x;
}

int json_int_key(const nlohmann::json& j, const char* key, int min_value, int max_value, std::string_view prefix) {
  const nlohmann::json& v = j.at(key);
  const std::optional<long long> x = json_integer_in(v, min_value, max_value);
  if (!x) {
    throw std::invalid_argument(
        fmt::format("{}{} = {} is not an integer in [{}, {}]", prefix, key, v.dump(), min_value, max_value));
  }
  return static_cast<int>(*x);
}

float json_fp32_key(const nlohmann::json& j, const char* key, std::string_view prefix) {
  const nlohmann::json& v = j.at(key);
  const double d = v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN();
  if (!holds_in_fp32(d)) {
    throw std::invalid_argument(fmt::format("{}{} = {} is not a finite fp32 number", prefix, key, v.dump()));
  }
  return static_cast<float>(d);
}

int ConfigReader::get_int(const std::string& key, int fallback, long long min_value, long long max_value) {
  return static_cast<int>(get_int64(key, fallback, min_value, max_value));  // callers' ranges are int's
}

std::int64_t ConfigReader::get_int64(const std::string& key, std::int64_t fallback, long long min_value,
                                     long long max_value) {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  // A whole number in exponent form (DeepSpeed's configs write 1e5 and 5e8) is a JSON float: taken.
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) fail_type(key, "an integer", *v);
    if (d < static_cast<double>(min_value) || d > static_cast<double>(max_value)) {
      fail_range(key, fmt::format("{}", d), fmt::format("{}", min_value), fmt::format("{}", max_value));
    }
    return static_cast<std::int64_t>(d);
  }
  if (!v->is_number_integer()) fail_type(key, "an integer", *v);
  const std::optional<long long> x = json_integer_in(*v, min_value, max_value);
  if (!x) fail_range(key, v->dump(), fmt::format("{}", min_value), fmt::format("{}", max_value));
  return static_cast<std::int64_t>(*x);
}

double ConfigReader::get_double(const std::string& key, double fallback, double min_value, double max_value) {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_number()) fail_type(key, "a number", *v);
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < min_value || x > max_value) {
    fail_range(key, fmt::format("{}", x), fmt::format("{}", min_value), fmt::format("{}", max_value));
  }
  return x;
}

float ConfigReader::get_float(const std::string& key, double fallback, double min_value, double max_value) {
  const double x = get_double(key, fallback, min_value, max_value);
  if (x != 0.0 && std::fabs(x) < std::numeric_limits<float>::min()) {
    throw_input_error(
        "config error in {}: key '{}' = {:g} is below the smallest normal float ({:g}), which keeps it (as 0 or a "
        "subnormal); write 0 where zero is meant",
        source_of(key), dotted(key), x, double{std::numeric_limits<float>::min()});
  }
  return static_cast<float>(x);
}

std::string ConfigReader::get_string(const std::string& key, const std::string& fallback) {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) fail_type(key, "a string", *v);
  return v->get<std::string>();
}

std::string ConfigReader::get_choice(const std::string& key, const std::string& fallback, const std::string& choices) {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) {
    throw_input_error("config error in {}: key '{}' must be one of: {} (got {})", source_of(key), dotted(key), choices,
                      preview_json(*v));
  }
  return v->get<std::string>();
}

std::string ConfigReader::get_enum(const std::string& key, const std::string& fallback,
                                   const std::vector<std::string>& allowed) {
  std::string list;
  for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
  const std::string s = get_choice(key, fallback, list);
  if (std::find(allowed.begin(), allowed.end(), s) == allowed.end()) {
    throw_input_error("config error in {}: key '{}' = {} is not one of: {}", source_of(key), dotted(key),
                      preview_json(nlohmann::json(s)), list);
  }
  return s;
}

std::vector<std::string> ConfigReader::get_string_list(const std::string& key) {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return {};
  std::vector<std::string> out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {  // [] is the absent list (config.json writes it so)
    for (const nlohmann::json& e : *v) {
      if (!e.is_string()) fail_type(key, "a string or a list of strings", *v);
      out.push_back(e.get<std::string>());
    }
  } else {
    fail_type(key, "a string or a list of strings", *v);
  }
  for (const std::string& e : out) {
    if (e.empty()) throw_input_error("config error in {}: key '{}' holds an empty string", source_of(key), dotted(key));
  }
  return out;
}

std::optional<std::string> expand_home(const std::string& path) {
  if (path.empty() || path[0] != '~' || (path.size() > 1 && path[1] != '/')) return path;
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') return std::nullopt;
  return std::string(home) + path.substr(1);
}

namespace {

std::string expanded_path(const std::string& path, const std::string& where, const std::string& key) {
  // No file system takes a NUL in a name; the open stopped at it and said the name was missing.
  if (path.find('\0') != std::string::npos) {
    throw_input_error("config error in {}: key '{}' = '{}' holds a NUL character, which no path can", where, key, path);
  }
  std::optional<std::string> expanded = expand_home(path);
  if (!expanded) {
    throw_input_error("config error in {}: '{}' starts with ~, but HOME is not set to expand it", where, path);
  }
  return *std::move(expanded);
}

}  // namespace

std::string ConfigReader::get_path(const std::string& key, const std::string& fallback) {
  return expanded_path(get_string(key, fallback), source_of(key), dotted(key));
}

std::vector<std::string> ConfigReader::get_path_list(const std::string& key) {
  std::vector<std::string> out = get_string_list(key);
  for (std::string& p : out) p = expanded_path(p, source_of(key), dotted(key));
  return out;
}

bool ConfigReader::get_bool(const std::string& key, bool fallback) {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) fail_type(key, "true or false", *v);
  return v->get<bool>();
}

ConfigReader ConfigReader::section(const std::string& key) {
  const nlohmann::json* v = find(key);
  if (v != nullptr && !v->is_object()) fail_type(key, "a JSON object", *v);
  ConfigReader inner(v == nullptr ? kEmptyObject : *v, file_, dotted(key), overrides_);
  inner.homes_ = homes_;
  return inner;
}

std::optional<ConfigReader> ConfigReader::optional_section(const std::string& key) {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return std::nullopt;  // absent, or null (find)
  return section(key);
}

}  // namespace zt
