// Reads one JSON config section with type and range checks, remembering which keys were read so
// that any key left over is reported as unknown, with the nearest valid key suggested. Every
// error is an InputError naming where the value came from (the file, or the --set that gave it)
// and the dotted key ("model.n_embd").
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zt {

// Dotted key -> what set it, where not the file: the command-line assignment ("--set
// train.micro_batch=8"), or another file the config reads keys from ("hf/config.json"
// of train.init_from).
using OverrideSources = std::map<std::string, std::string>;

// A key's name -> the dotted keys of that name the whole config has ("lr" -> {"optim.lr"}), for
// an unknown key's message: a key written into the wrong section is told where it belongs.
using KeyHomes = std::map<std::string, std::vector<std::string>>;

// Where a check across keys (dotted from the root: "model.n_head") got its values: `file`, and the
// --set assignments of those keys `overrides` holds ("tiny.json and --set model.n_head=3").
std::string config_sources(const std::string& file, const OverrideSources* overrides,
                           std::span<const std::string_view> dotted_keys);
inline std::string config_sources(const std::string& file, const OverrideSources* overrides,
                                  std::initializer_list<std::string_view> dotted_keys) {
  return config_sources(file, overrides, std::span(dotted_keys.begin(), dotted_keys.size()));
}

class ConfigReader {
 public:
  // `node` must outlive the reader. `path` is "" for the root, else the dotted section name.
  // `overrides` names the keys a --set gave, so their errors blame it rather than the file.
  ConfigReader(const nlohmann::json& node, std::string file, std::string path,
               std::shared_ptr<const OverrideSources> overrides = nullptr);

  // Each getter returns `fallback` when the key is absent and throws when present but invalid.
  int get_int(const std::string& key, int fallback, long long min_value, long long max_value);
  std::int64_t get_int64(const std::string& key, std::int64_t fallback, long long min_value, long long max_value);
  double get_double(const std::string& key, double fallback, double min_value, double max_value);
  // A number kept as a float: as get_double, and a nonzero value below float's normal range (1e-46
  // is 0 as a float, 1e-40 a subnormal) refused where a double holds it.
  float get_float(const std::string& key, double fallback, double min_value, double max_value);
  std::string get_string(const std::string& key, const std::string& fallback);
  // A string naming one of `choices` (their text, for the message): a value of another type is
  // refused listing them (a quoted true is no choice either: --set train.activation_checkpointing=true).
  std::string get_choice(const std::string& key, const std::string& fallback, const std::string& choices);
  std::string get_enum(const std::string& key, const std::string& fallback, const std::vector<std::string>& allowed);
  // A list of strings: a JSON array of strings, or one string as a list of one (so --set takes a
  // plain value); empty when absent or []. An empty string in it is refused.
  std::vector<std::string> get_string_list(const std::string& key);
  // A path, or a list of paths: as the string getters, with a leading "~" or "~/" read as $HOME
  // (as a shell reads it on a command line; a config file is not one, and "~/runs" made a folder
  // named "~"). "~user" is not expanded.
  std::string get_path(const std::string& key, const std::string& fallback);
  std::vector<std::string> get_path_list(const std::string& key);
  bool get_bool(const std::string& key, bool fallback);
  bool has(const std::string& key) const;
  // A nested section (an object, or an empty one when absent).
  ConfigReader section(const std::string& key);
  // A section that may be absent or null (as a config.json writes "no such thing"): nullopt then.
  std::optional<ConfigReader> optional_section(const std::string& key);

  // Throws for the first key that no getter or section() asked for: the nearest key of this
  // section suggested, or else the sections `homes` (set_key_homes) have a key of that name in.
  void reject_unknown_keys() const;
  // The whole config's keys by name, for reject_unknown_keys; sections made after inherit them.
  void set_key_homes(std::shared_ptr<const KeyHomes> homes) { homes_ = std::move(homes); }

  const std::string& file() const { return file_; }
  std::string dotted(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  // Where `key`'s value came from: its --set assignment (or, for a section, a --set of a key in
  // it), or the file.
  std::string source_of(const std::string& key) const;
  // Where a check across keys (dotted from the root: "model.n_head") got its values: the file, and
  // the --set assignments of those keys a --set gave ("tiny.json and --set model.n_head=3").
  std::string sources_of(std::initializer_list<std::string_view> dotted_keys) const;
  // Where this section came from, for what it lacks (a required key): the --set that gave it, or one
  // around it, whole; else the file and the --set assignments of keys in it ("llama.json and --set
  // model.rope_scaling.factor=2": the section a --set made that way lacks its other keys).
  std::string section_sources() const;

 private:
  const nlohmann::json* find(const std::string& key);
  // The --set of `name` (dotted) or of a section around it, or nullptr. overrides_ must be set.
  const std::string* enclosing_override(const std::string& name) const;
  [[noreturn]] void fail_type(const std::string& key, const char* expected, const nlohmann::json& got) const;
  // The value text of the --set that gave `dotted` itself ("--set optim.lr=1e999": "1e999"), where
  // one did: the type errors' hints quote it.
  std::optional<std::string> own_set_value(const std::string& dotted) const;
  [[noreturn]] void fail_range(const std::string& key, const std::string& value, const std::string& min_value,
                               const std::string& max_value) const;

  const nlohmann::json& node_;
  std::string file_;
  std::string path_;
  std::shared_ptr<const OverrideSources> overrides_;
  std::shared_ptr<const KeyHomes> homes_;
  std::set<std::string> known_;
  static const nlohmann::json kEmptyObject;
};

// `path` with a leading "~" or "~/" replaced by $HOME, as a shell would (config paths, and command-line
// paths the shell left as they were: --run-dir=~/x); other paths as they are. nullopt where the
// path starts so and HOME is unset or empty.
std::optional<std::string> expand_home(const std::string& path);

// The valid key closest to `key` by edit distance, or "" when none is close enough to suggest.
std::string nearest_key(const std::string& key, const std::set<std::string>& valid);

// `v` as an integer in [min_value, max_value], or nullopt where it is not a whole number (nlohmann's
// get<> takes true for 1 and cuts 2.5 to 2) or lies outside (an unsigned value past 2^63 - 1 too,
// which a long long reads as negative). What get_int checks, for JSON read outside a config (a
// checkpoint's manifest).
std::optional<long long> json_integer_in(const nlohmann::json& v, long long min_value, long long max_value);

// `j[key]` of a model section read back from a file the engine wrote (a checkpoint's manifest), where
// a hand-edited value must not reach nlohmann's get<int> (a cast that is undefined behaviour for
// 1e300) or get<float> (inf): an integer in [min_value, max_value], or a number an fp32 holds;
// otherwise std::invalid_argument naming `prefix` + `key` and the value.
int json_int_key(const nlohmann::json& j, const char* key, int min_value, int max_value, std::string_view prefix = "");
// Whether `v` is finite and within fp32's range, so that a cast to float neither overflows to inf
// nor is undefined (json_fp32_key's check, and a Hugging Face config's).
inline bool holds_in_fp32(double v) { return std::abs(v) <= std::numeric_limits<float>::max(); }
float json_fp32_key(const nlohmann::json& j, const char* key, std::string_view prefix = "");

}  // namespace zt
