// The registry of model families, and the spec-level calls that ask a spec's family (see the
// header). The built-in families are the registry's first entries, so a lookup never races their
// registration; a program adds its own before it reads a config.
#include "models/model_family.h"

#include <fmt/format.h>

#include <mutex>

#include "engine/base/core/check.h"
#include "models/gpt/gpt_family.h"
#include "models/llama/llama_family.h"

namespace zt {

namespace {

struct Registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<const ModelFamily>> families;  // never removed: references stay valid
};

Registry& registry() {
  static Registry* r = [] {
    auto* made = new Registry;  // never destroyed: families outlive every static that holds one
    made->families.push_back(gpt::make_family());
    made->families.push_back(llama::make_family());
    return made;
  }();
  return *r;
}

const ModelFamily* find_family(Registry& r, std::string_view name) {
  for (const auto& f : r.families) {
    if (f->name() == name) return f.get();
  }
  return nullptr;
}

}  // namespace

void register_model_family(std::unique_ptr<const ModelFamily> family) {
  ZT_CHECK(family != nullptr, "register_model_family: no family");
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  ZT_CHECK(find_family(r, family->name()) == nullptr, "model family \"{}\" is registered already", family->name());
  r.families.push_back(std::move(family));
}

const ModelFamily& model_family(std::string_view name) {
  Registry& r = registry();
  {
    const std::lock_guard<std::mutex> lock(r.mutex);
    if (const ModelFamily* f = find_family(r, name)) return *f;
  }
  std::string names;
  for (const std::string& n : model_family_names()) names += (names.empty() ? "" : ", ") + n;
  throw_input_error("unknown model family \"{}\" (registered: {})", name, names);
}

bool has_model_family(std::string_view name) {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  return find_family(r, name) != nullptr;
}

std::vector<std::string> model_family_names() {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& f : r.families) names.emplace_back(f->name());
  return names;
}

nlohmann::json ModelFamily::model_keys_from_hf(const nlohmann::json& /*hf*/, const std::string& source) const {
  throw_input_error("{}: the {} family reads no Hugging Face config", source, display_name());
}

bool ModelFamily::same_model_key(const std::string& /*key*/, const nlohmann::json& given,
                                 const nlohmann::json& pretrained) const {
  if (given.is_number() && pretrained.is_number()) return given.get<double>() == pretrained.get<double>();
  return given == pretrained;  // inside objects and lists the library compares numbers by value too
}

const ModelFamily& model_family_for_hf(std::string_view type, const std::string& source) {
  std::string known;
  for (const std::string& n : model_family_names()) {
    const ModelFamily& f = model_family(n);
    if (f.hf_model_type().empty()) continue;
    if (f.hf_model_type() == type) return f;
    known += fmt::format("{}\"{}\"", known.empty() ? "" : ", ", f.hf_model_type());
  }
  throw_input_error("{}: model_type \"{}\" is not one zerotrain trains (known: {})", source, type, known);
}

const ModelFamily& ModelSpec::family() const { return model_family(model.arch); }

ParamTable build_param_table(const ModelSpec& spec) { return spec.family().param_table(spec); }

void init_unit_params(const ModelSpec& spec, const ParamTable& table, int unit, std::uint64_t seed, float* unit_data) {
  spec.family().init_unit_params(spec, table, unit, seed, unit_data, 0,
                                 table.units().at(static_cast<std::size_t>(unit)).numel);
}

void init_unit_params(const ModelSpec& spec, const ParamTable& table, int unit, std::uint64_t seed, float* unit_data,
                      std::int64_t begin, std::int64_t end) {
  spec.family().init_unit_params(spec, table, unit, seed, unit_data, begin, end);
}

std::unique_ptr<LanguageModel> make_model(const ModelSpec& spec, const ModelBuild& build, MemoryTracker& tracker,
                                          const ExecContext& ctx) {
  const ModelFamily& family = spec.family();
  ZT_CHECK(build.dropout == 0.0f || family.has_dropout(), "a {} model has no dropout", family.display_name());
  return family.make_model(spec, build, tracker, ctx);
}

ModelFootprint predict_footprint(const ModelSpec& spec, const ModelBuild& build, DType param_dtype, Device device) {
  return spec.family().footprint(spec, build, param_dtype, device);
}

std::int64_t cuda_call_scratch_bytes(const ModelSpec& spec, const ModelBuild& build, DType param_dtype,
                                     const KernelChoices& choices) {
  return spec.family().cuda_call_scratch_bytes(spec, build, param_dtype, choices);
}

StepSchedule step_schedule(const ModelSpec& spec, const CheckpointPolicy& checkpointing) {
  return spec.family().step_schedule(spec, checkpointing);
}

std::string describe_model(const ModelSpec& spec) {
  const double params = static_cast<double>(build_param_table(spec).total_numel()) / 1e6;
  return spec.family().describe(spec, params);
}

std::string describe_attention(const ModelSpec& spec, const ModelBuild& build, Device device,
                               AttentionKernels kernels) {
  return spec.family().describe_attention(spec, build, device, kernels);
}

}  // namespace zt
