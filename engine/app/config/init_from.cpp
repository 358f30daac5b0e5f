// train.init_from's model keys merged into the config's model section (see the header).
#include "engine/app/config/init_from.h"

#include <fmt/format.h>

#include <filesystem>

#include "engine/app/io/pretrained.h"
#include "engine/base/core/check.h"
#include "engine/base/core/config_text.h"
#include "models/model_family.h"

namespace zt {

namespace {

// Whether the config gives model key `key`: null is a key not given (ConfigReader::find), but for
// rope_scaling, whose null is a value, no scaling, as in Hugging Face's configs: compared with the
// checkpoint's as any value.
bool model_key_given(const nlohmann::json& model, const std::string& key) {
  return model.contains(key) && (!model[key].is_null() || key == "rope_scaling");
}

}  // namespace

OverrideSources apply_init_from(nlohmann::json& doc, ConfigReader& root,
                                const std::function<nlohmann::json()>& saved_model_keys) {
  OverrideSources set;
  if (!doc.contains("train") || !doc["train"].is_object() || !doc["train"].contains("init_from")) return set;
  const nlohmann::json& from = doc["train"]["init_from"];
  if (from.is_null()) return set;  // null: not given (ConfigReader::find)
  if (!from.is_string()) {
    throw_input_error("config error in {}: train.init_from must be a Hugging Face folder or an llm.c model file path",
                      root.section("train").source_of("init_from"));
  }
  if (from.get<std::string>().empty()) return set;  // "": none (config.json writes it so)
  // As the train section reads it: a leading ~ is $HOME.
  const std::string path = root.section("train").get_path("init_from", "");
  std::error_code ec;
  if (saved_model_keys && !std::filesystem::exists(path, ec)) {
    nlohmann::json saved;
    try {
      saved = saved_model_keys();
    } catch (const InputError& e) {
      throw_input_error(
          "config error in {}: train.init_from = {} does not exist, and its model keys could not come "
          "from the checkpoint resumed instead: {}",
          root.section("train").source_of("init_from"), preview_json(from), e.what());
    }
    root.section("model");  // refused here unless a JSON object
    nlohmann::json& model = doc["model"];
    for (const auto& [key, value] : saved.items()) {
      if (model_key_given(model, key)) continue;  // the config's own keys stay (a resume compares them)
      model[key] = value;
      set["model." + key] = "the checkpoint resumed (train.init_from no longer exists)";
    }
    return set;
  }
  // Refusals named by the key and where it was set, as a data file's are (rethrow_naming_key): a
  // missing folder said only "gpt2: no such Hugging Face folder ...".
  const PretrainedModel pretrained = [&] {
    try {
      return read_pretrained_model(path);
    } catch (const InputError& e) {
      const std::string what = e.what();
      if (what.starts_with("config error in ")) throw;
      throw_input_error("config error in {}: train.init_from: {}", root.section("train").source_of("init_from"), what);
    }
  }();
  nlohmann::json& model = doc["model"];
  ConfigReader section = root.section("model");
  const ModelFamily& family = model_family(pretrained.model_keys.value("arch", ""));
  std::string conflicts;
  for (const auto& [key, value] : pretrained.model_keys.items()) {
    const bool given = model_key_given(model, key);
    if (given && !family.same_model_key(key, model[key], value)) {
      conflicts += fmt::format("{}model.{} = {} ({}; the checkpoint has {})", conflicts.empty() ? "" : ", ", key,
                               preview_json(model[key]), section.source_of(key), preview_json(value));
    }
    if (!given) set["model." + key] = pretrained.source;
    model[key] = value;
  }
  if (!conflicts.empty()) {
    throw_input_error(
        "config error: train.init_from = {} is a {}, and the config sets {}: drop these keys or match them",
        preview_json(from), pretrained.description, conflicts);
  }
  return set;
}

}  // namespace zt
