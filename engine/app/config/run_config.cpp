// Parsing and validation of RunConfig: the order the sections are read in, the top level's keys and
// the log, checkpoint and comm sections. The other sections each have a file of their own beside
// this one (model_, data_, train_, precision_ and zero_section), reader and writer together, so the
// schema stays next to its defaults; to_json() writes the resolved config in the same schema (so a
// run directory's config.json reloads).
#include "engine/app/config/run_config.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#include "engine/app/config/config_limits.h"
#include "engine/app/config/data_section.h"
#include "engine/app/config/init_from.h"
#include "engine/app/config/model_section.h"
#include "engine/app/config/precision_section.h"
#include "engine/app/config/train_section.h"
#include "engine/app/config/zero_section.h"
#include "engine/app/io/input_file.h"
#include "engine/base/core/check.h"
#include "engine/base/core/config_reader.h"
#include "engine/base/core/config_text.h"
#include "engine/base/core/float_text.h"

namespace zt {

namespace {

void read_log(ConfigReader r, LogConfig& l, const std::string& source) {
  // runs/<the config's name>; a name that is no folder's ("...json" has stem "..", which would make
  // runs/.. the working directory) is "run", as is a pipe's (`--config <(jq ...)` reads /dev/fd/63,
  // whose "63" every such run would share, whatever its config).
  const std::filesystem::path config_path(source);
  std::string stem = config_path.stem().string();
  const std::string parent = config_path.parent_path().string();
  const bool pipe = parent == "/dev/fd" || parent == "/proc/self/fd" || source == "/dev/stdin";
  if (stem.empty() || stem == "." || stem == ".." || pipe) stem = "run";
  l.run_dir = r.get_path("run_dir", "runs/" + stem);
  l.every_steps = r.get_int("every_steps", l.every_steps, 1, kMaxConfigSteps);
  l.progress = r.get_enum("progress", l.progress, {"auto", "live", "plain"});
  l.sample_every = r.get_int("sample_every", l.sample_every, 0, kMaxConfigSteps);
  l.sample_tokens = r.get_int("sample_tokens", l.sample_tokens, 0, 100000);
  l.sample_temperature = r.get_float("sample_temperature", l.sample_temperature, 1e-3, 100.0);
  l.sample_top_k = r.get_int("sample_top_k", l.sample_top_k, 0, 65535);
  l.sample_prompt = r.get_string("sample_prompt", l.sample_prompt);
  l.profile_ops = r.get_bool("profile_ops", l.profile_ops);
  l.final_weights = r.get_bool("final_weights", l.final_weights);
  r.reject_unknown_keys();
}

void read_checkpoint(ConfigReader r, CheckpointConfig& k) {
  k.dir = r.get_path("dir", k.dir);
  k.every_steps = r.get_int("every_steps", k.every_steps, 0, kMaxConfigSteps);
  k.keep_last = r.get_int("keep_last", k.keep_last, 0, 1000000);
  k.at_end = r.get_bool("at_end", k.at_end);
  k.save_on_signal = r.get_bool("save_on_signal", k.save_on_signal);
  k.async = r.get_bool("async", k.async);
  r.reject_unknown_keys();
}

void read_comm(ConfigReader& r, RunConfig& c) {
  const std::string backend = r.get_enum("backend", "auto", {"auto", "nccl", "mpi"});
  c.comm_backend = backend == "nccl" ? CommBackend::kNccl : backend == "mpi" ? CommBackend::kMpi : CommBackend::kAuto;
  if (c.comm_backend == CommBackend::kNccl && c.device != Device::kCUDA) {
    throw_input_error(
        "config error in {}: comm.backend = \"nccl\" needs device = \"cuda\" (CPU ranks talk through MPI)",
        r.sources_of({"comm.backend", "device"}));
  }
  // Hybrid sharding keeps deterministic mode's promise (the same bits at every stage) by summing
  // each hop in rank order, which MPI's reductions on CPU ranks do and NCCL's (rings, trees, NVLink
  // SHARP) do not; the staged MPI path on CUDA has no hybrid sharding.
  const bool nccl = c.device == Device::kCUDA && c.comm_backend != CommBackend::kMpi;
  if (nccl && c.train.deterministic && c.zero.hybrid(c.world_size)) {
    throw_input_error(
        "config error in {}: train.deterministic = true with hybrid sharding (zero.shard_group_size = {} of {} "
        "ranks) on NCCL: NCCL's reductions do not sum in rank order, so the stages' bits could differ; set "
        "train.deterministic = false or drop zero.shard_group_size",
        r.sources_of({"train.deterministic", "zero.shard_group_size", "device", "comm.backend"}),
        c.zero.shard_group_size, c.world_size);
  }
}

// Every key a config has, by name: a default config's, as to_json writes them (a section's keys,
// and the top level's own), for an unknown key's "did you mean" (ConfigReader::set_key_homes).
// Also the keys a default config does not write: train.global_batch_tokens (written only where a
// run gave it) and every registered family's own model keys (a GPT's config holds none of a
// Llama's). Built for each config read: a family may register after the first.
std::shared_ptr<const KeyHomes> config_key_homes() {
  auto out = std::make_shared<KeyHomes>();
  auto add = [&](const std::string& key, const std::string& dotted) {
    std::vector<std::string>& homes = (*out)[key];
    if (std::find(homes.begin(), homes.end(), dotted) == homes.end()) homes.push_back(dotted);
  };
  const nlohmann::json defaults = RunConfig{}.to_json();
  for (const auto& [name, value] : defaults.items()) {
    if (!value.is_object()) {
      add(name, name);
      continue;
    }
    for (const auto& [key, inner] : value.items()) add(key, name + "." + key);
  }
  add("global_batch_tokens", "train.global_batch_tokens");
  for (const std::string& family : model_family_names()) {
    for (const std::string& key : model_family(family).own_keys()) add(key, "model." + key);
  }
  return out;
}

}  // namespace

RunConfig parse_run_config(nlohmann::json doc, const std::string& source, int world_size,
                           std::shared_ptr<const OverrideSources> overrides, const SavedModelKeys& saved_model_keys) {
  RunConfig c;
  c.source = source;
  // Shared by every reader below, and completed by apply_init_from's sources.
  auto sources = std::make_shared<OverrideSources>(overrides ? *overrides : OverrideSources{});
  c.overrides = sources;
  c.world_size = world_size;
  ConfigReader root(doc, source, "", sources);
  root.set_key_homes(config_key_homes());
  if (!root.has("model")) {
    throw_input_error(
        "config error in {}: missing required section 'model'{}", source,
        root.section("train").has("init_from") ? " (with train.init_from, \"model\": {} takes its keys)" : "");
  }
  c.device = root.get_enum("device", "cpu", {"cpu", "cuda"}) == "cuda" ? Device::kCUDA : Device::kCPU;
  read_log(root.section("log"), c.log, source);  // where a resumed run's checkpoint is (saved_model_keys)
  read_checkpoint(root.section("checkpoint"), c.checkpoint);
  // The pretrained checkpoint's model keys, before the model section is read.
  // The keys it sets are its source's: errors in them, and checks across them, name that file.
  const OverrideSources from_init =
      apply_init_from(doc, root, saved_model_keys ? std::function([&] { return saved_model_keys(c); }) : nullptr);
  sources->insert(from_init.begin(), from_init.end());
  read_model_section(root.section("model"), c);
  read_data_section(root.section("data"), c.data);
  read_train_section(root.section("train"), c);
  read_optim_section(root.section("optim"), c);
  read_precision_section(root.section("precision"), c);
  read_zero_section(root.section("zero"), c);
  ConfigReader comm = root.section("comm");
  read_comm(comm, c);
  comm.reject_unknown_keys();
  root.reject_unknown_keys();
  check_model_support(c);
  return c;
}

namespace {

// A config from a pipe (`--config <(jq ...)`, /dev/stdin fed by a writer) can be read once, and
// memory and plan load the config again (each stage, each choice): they take the text the first
// read got (the second read found the pipe drained and refused it). A regular file is read anew.
std::string read_config_text(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) return read_whole_input(path, "config error: --config");
  static std::mutex mutex;
  static std::map<std::string, std::string> piped;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = piped.find(path); it != piped.end()) return it->second;
  std::string text = read_whole_input(path, "config error: --config");
  piped.emplace(path, text);
  return text;
}

}  // namespace

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides, int world_size,
                          const SavedModelKeys& saved_model_keys) {
  nlohmann::json doc = parse_config_json(read_config_text(path), path);
  if (!doc.is_object()) {
    throw_input_error("config error in {}: the top level must be a JSON object of sections, not {}", path,
                      doc.type_name());
  }
  take_derived_out(doc, path);  // before the --set entries, which may give those keys
  auto sources = std::make_shared<OverrideSources>();
  for (const std::string& o : overrides) {
    for (const std::string& key : apply_override(doc, o)) {
      // A later --set of a key replaces what earlier ones set inside it (an object value whole).
      std::erase_if(*sources, [&](const auto& entry) { return entry.first.starts_with(key + "."); });
      (*sources)[key] = "--set " + o;
    }
  }
  return parse_run_config(std::move(doc), path, world_size, std::move(sources), saved_model_keys);
}

RunConfig load_run_config_past_batch_split(const std::string& path, std::vector<std::string>& overrides, int world_size,
                                           const BatchFallback& fallback, std::string& refused) {
  try {
    return load_run_config(path, overrides, world_size);
  } catch (const BatchSplitError& original) {
    std::vector<std::string> retry = overrides;
    for (std::string& set : fallback(original)) retry.push_back(std::move(set));
    RunConfig c;
    try {
      c = load_run_config(path, retry, world_size);
    } catch (const InputError&) {  // the original says why, and whether any micro-batch splits it
      throw original;
    }
    refused = original.what();
    overrides = std::move(retry);
    return c;
  }
}

void rethrow_naming_key(const RunConfig& c, const std::string& key, const InputError& e) {
  std::string what = e.what();
  if (what.starts_with("config error in ")) throw;
  if (what.starts_with(key + ": ")) what.erase(0, key.size() + 2);  // named once, with its source
  throw_input_error("config error in {}: {}: {}", c.sources_of({key}), key, what);
}

nlohmann::json RunConfig::model_json() const { return model_section_json(*this); }

namespace {

// The defaults a run's config.json names in "derived" (run_file_json), which a config given again
// derives again (take_derived_out).
// The first three from flags of their sections; train.num_threads where the node's cores (or
// OMP_NUM_THREADS) gave it; the model family's own (ModelConfig::derived_family_keys).
constexpr const char* kFileDerivedKeys[] = {"train.seq_len",     "optim.min_lr",    "optim.decay_steps",
                                            "train.num_threads", "model.n_kv_head", "model.intermediate_size",
                                            "train.micro_batch"};

}  // namespace

nlohmann::json RunConfig::run_file_json() const {
  nlohmann::json j = to_json();
  // The terms the config gave, so that on another rank count the file derives what it derived:
  // the accumulation, or the micro-batch where the config gave the accumulation instead (written,
  // for what reads the file, and named in "derived" below).
  if (train.global_batch_given && !train.micro_batch_derived) j["train"].erase("grad_accum");
  if (train.global_batch_given) j["train"]["global_batch_tokens"] = train.global_batch_tokens;
  // The defaults that follow another key, named: the file stays the whole resolved config, and,
  // given again, derives them again (take_derived_out), so that with --set train.max_steps=6 the
  // schedule is 6 steps long (written as given, decay_steps stayed the first run's 2 and the rate
  // sat at its floor from step 3).
  nlohmann::json derived_keys = nlohmann::json::array();
  const bool given[] = {train.seq_len_given, optim.min_lr_given, optim.decay_steps_given,
                        train.num_threads_given};  // kFileDerivedKeys' first four
  for (std::size_t i = 0; i < std::size(given); ++i) {
    if (!given[i]) derived_keys.push_back(kFileDerivedKeys[i]);
  }
  for (const std::string& key : model.derived_family_keys) derived_keys.push_back("model." + key);
  if (train.micro_batch_derived) derived_keys.push_back("train.micro_batch");
  if (!derived_keys.empty()) j["derived"] = std::move(derived_keys);
  return j;
}

void take_derived_out(nlohmann::json& doc, const std::string& source) {
  if (!doc.is_object() || !doc.contains("derived")) return;
  if (doc["derived"].is_null()) {  // null: not given (ConfigReader::find)
    doc.erase("derived");
    return;
  }
  const nlohmann::json list = doc["derived"];
  doc.erase("derived");
  const auto refuse = [&] {
    throw_input_error(
        "config error in {}: \"derived\" (a run's config.json names the defaults it derived) must be a list of "
        "keys among \"{}\"; got {}",
        source, fmt::join(kFileDerivedKeys, "\", \""), list.dump());
  };
  if (!list.is_array()) refuse();
  for (const nlohmann::json& key : list) {
    if (!key.is_string()) refuse();
    const std::string k = key.get<std::string>();
    if (std::find(std::begin(kFileDerivedKeys), std::end(kFileDerivedKeys), k) == std::end(kFileDerivedKeys)) refuse();
    const std::string section = k.substr(0, k.find('.')), name = k.substr(k.find('.') + 1);
    if (doc.contains(section) && doc[section].is_object()) doc[section].erase(name);
  }
}

nlohmann::json RunConfig::to_json() const {
  return {
      {"device", std::string(device_name(device))},
      {"model", model_json()},
      {"data", data_section_json(data)},
      {"train", train_section_json(train)},
      {"optim", optim_section_json(optim)},
      {"precision", precision_section_json(*this)},
      {"zero", zero_section_json(zero)},
      {"comm", {{"backend", comm_backend_name(comm_backend)}}},
      {"log",
       {{"run_dir", log.run_dir},
        {"every_steps", log.every_steps},
        {"progress", log.progress},
        {"sample_every", log.sample_every},
        {"sample_tokens", log.sample_tokens},
        {"sample_temperature", shortest_decimal(log.sample_temperature)},
        {"sample_top_k", log.sample_top_k},
        {"sample_prompt", log.sample_prompt},
        {"profile_ops", log.profile_ops},
        {"final_weights", log.final_weights}}},
      {"checkpoint",
       {{"dir", checkpoint.dir},
        {"every_steps", checkpoint.every_steps},
        {"keep_last", checkpoint.keep_last},
        {"at_end", checkpoint.at_end},
        {"save_on_signal", checkpoint.save_on_signal},
        {"async", checkpoint.async}}},
  };
}

void check_trainable(const RunConfig& c) {
  check_memory_countable(c);
  if (c.zero.gather_wire != WireDType::kExact && c.zero.stage == 0) {
    throw_input_error(
        "config error in {}: zero.gather_dtype = \"int8\" quantizes the parameter all-gathers of stages 1-3; stage "
        "0 has none",
        c.sources_of({"zero.gather_dtype", "zero.stage"}));
  }
}

}  // namespace zt
