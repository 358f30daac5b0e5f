// What a resumed run changes against the saved one (see the header).
#include "engine/app/trainer/resume_changes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/app/config/config_limits.h"
#include "engine/app/config/zero_section.h"
#include "engine/base/core/check.h"
#include "engine/base/core/config_text.h"

namespace zt {

namespace {

using ConfigKey = std::pair<const char*, const char*>;  // section, key

// The keys besides the global batch whose change changes the trajectory (trajectory_changes).
constexpr ConfigKey kTrajectoryKeys[] = {
    {"train", "seed"},         {"train", "seq_len"},     {"model", "dropout"},
    {"optim", "lr"},           {"optim", "min_lr"},      {"optim", "warmup_steps"},
    {"optim", "decay"},        {"optim", "decay_steps"}, {"optim", "cooldown_fraction"},
    {"optim", "beta1"},        {"optim", "beta2"},       {"optim", "eps"},
    {"optim", "weight_decay"}, {"optim", "grad_clip"}};
// And what deterministic mode's bits follow beside them (deterministic_bit_changes).
constexpr ConfigKey kDeterministicBitKeys[] = {{"train", "deterministic"}, {"train", "micro_batch"}};

// Whether the continued run's learning-rate schedule reads `key` (lr_schedule.h): a constant
// schedule never decays, so its length and floor are not read, and training a constant-LR run for
// longer (whose decay_steps follows max_steps) changes nothing; a switch to a constant rate is said
// by the change of optim.decay itself. (The config refuses a cooldown fraction outside WSD.)
bool schedule_reads(const ConfigKey& k, const nlohmann::json& /*saved*/, const nlohmann::json& current) {
  const std::string_view section = k.first, key = k.second;
  if (section != "optim") return true;
  if (key == "decay_steps" || key == "min_lr") return section_value(current, "optim", "decay") != "constant";
  return true;
}

// "section.key: old -> new" for each of `keys` whose value differs between the two configs.
std::vector<std::string> changed_keys(const nlohmann::json& saved, const nlohmann::json& current,
                                      std::span<const ConfigKey> keys) {
  std::vector<std::string> changes;
  for (const ConfigKey& k : keys) {
    if (!schedule_reads(k, saved, current)) continue;
    const auto& [section, key] = k;
    const nlohmann::json before = section_value(saved, section, key), after = section_value(current, section, key);
    if (before != after) changes.push_back(fmt::format("{}.{}: {} -> {}", section, key, before.dump(), after.dump()));
  }
  return changes;
}

// changed_keys of those of `keys` the saved config records: a checkpoint saved before a key was
// written has nothing to compare.
std::vector<std::string> recorded_changes(const nlohmann::json& saved, const nlohmann::json& current,
                                          std::span<const ConfigKey> keys) {
  std::vector<ConfigKey> recorded;
  for (const ConfigKey& k : keys) {
    if (!section_value(saved, k.first, k.second).is_null()) recorded.push_back(k);
  }
  return changed_keys(saved, current, recorded);
}

}  // namespace

namespace {

// The saved config as this build reads it at the saved rank count; nullopt where it reads no more
// (an older build's rules). Its train.init_from, where gone, is no matter: its model keys are in it.
std::optional<RunConfig> saved_as_read(const nlohmann::json& saved, int saved_world_size) {
  try {
    return parse_run_config(saved, "the checkpoint's config", saved_world_size, nullptr,
                            [](const RunConfig&) { return nlohmann::json::object(); });
  } catch (const InputError&) {
    return std::nullopt;
  }
}

// The zero section's wire keys that act differently now than in the saved run (acting_zero_options),
// each "zero.KEY: "before" -> "after"" with what it acts as where that differs from what is set. A
// saved config this build no longer reads (an older build's rules) is compared as written.
std::vector<std::string> wire_format_changes(const nlohmann::json& saved, int saved_world_size, const RunConfig& now) {
  constexpr std::array<const char*, 3> kKeys = {"gather_dtype", "cross_group_grad_dtype", "grad_shard_dtype"};
  const std::optional<RunConfig> saved_run = saved_as_read(saved, saved_world_size);
  if (!saved_run) {
    std::vector<ConfigKey> keys;
    for (const char* key : kKeys) keys.emplace_back("zero", key);
    return recorded_changes(saved, now.to_json(), keys);
  }
  const nlohmann::json before = zero_section_json(acting_zero_options(*saved_run)),
                       after = zero_section_json(acting_zero_options(now)), set = zero_section_json(now.zero);
  std::vector<std::string> changes;
  for (const char* key : kKeys) {
    if (section_value(saved, "zero", key).is_null() || before[key] == after[key]) continue;  // not recorded: none
    const std::string as_set = set.value(key, nlohmann::json()) == after[key]
                                   ? ""
                                   : fmt::format(
                                         " (set to {}, which acts on nothing in this run: see its derived "
                                         "values)",
                                         set.value(key, nlohmann::json()).dump());
    changes.push_back(fmt::format("zero.{}: {} -> {}{}", key, before[key].dump(), after[key].dump(), as_set));
  }
  return changes;
}

// How a resume on another rank count keeps the saved global batch of `sequences` a step: each rank's
// share in micro-batches of at most the run's own (the sampler's windows of a step are the global
// batch's alone, so the run continues as saved), or why no setting can.
std::string keep_global_batch_hint(const nlohmann::json& saved, std::int64_t sequences, const RunConfig& now) {
  // Tokens at this run's seq_len (a changed one is refused beside it, and named here: at the saved
  // length the value given sets another number of sequences, and the hint refused itself).
  const std::int64_t seq_len = now.train.seq_len;
  const nlohmann::json saved_seq = section_value(saved, "train", "seq_len");
  const std::string at_length = saved_seq.is_number_integer() && saved_seq.get<std::int64_t>() != seq_len
                                    ? fmt::format(" at train.seq_len {}", seq_len)
                                    : "";
  if (sequences % now.world_size != 0) {
    return fmt::format(" (its {} sequences a step do not split over {} ranks: no micro-batch keeps it)", sequences,
                       now.world_size);
  }
  const std::int64_t per_rank = sequences / now.world_size;
  std::int64_t micro_batch = std::min<std::int64_t>(now.train.micro_batch, per_rank);
  while (per_rank % micro_batch != 0) --micro_batch;
  std::string sets = fmt::format("--set train.global_batch_tokens={}", sequences * seq_len);
  if (micro_batch != now.train.micro_batch) sets += fmt::format(" --set train.micro_batch={}", micro_batch);
  // A grad_accum the command line gives would disagree with the global batch set beside it (one in
  // the file is set aside for it): the advice says to leave it out.
  const std::string accum_given = now.overrides != nullptr && now.overrides->count("train.grad_accum") > 0
                                      ? now.overrides->at("train.grad_accum")
                                      : "";
  return fmt::format(" ({}{} keeps it{} on {} rank{}: grad_accum {} is derived)",
                     accum_given.empty() ? "" : fmt::format("without your {}, ", accum_given), sets, at_length,
                     now.world_size, now.world_size == 1 ? "" : "s", per_rank / micro_batch);
}

}  // namespace

std::vector<std::string> trajectory_changes(const nlohmann::json& saved, int saved_world_size, std::int64_t saved_step,
                                            const RunConfig& now) {
  if (saved_step == 0) return {};  // no step has read anything but the weights: any schedule, data or seed
  const nlohmann::json current = now.to_json();
  std::vector<std::string> changes = changed_keys(saved, current, kTrajectoryKeys);
  // decay_steps by default follows max_steps (or the warmup): say so, as the user set neither.
  const auto derived = std::find_if(now.derived.begin(), now.derived.end(),
                                    [](const std::string& d) { return d.starts_with("optim.decay_steps = "); });
  // min_lr by default is the single-precision lr / 10 (1e-3: 0.000100000005): say which to write.
  const bool min_lr_derived = std::any_of(now.derived.begin(), now.derived.end(),
                                          [](const std::string& d) { return d.starts_with("optim.min_lr = "); });
  const nlohmann::json saved_lr = section_value(saved, "optim", "lr"),
                       saved_min_lr = section_value(saved, "optim", "min_lr");
  const bool saved_min_lr_default = saved_lr.is_number() && saved_min_lr.is_number() &&
                                    static_cast<float>(saved_min_lr.get<double>()) ==
                                        static_cast<float>(static_cast<float>(saved_lr.get<double>()) / 10.0);
  for (std::string& change : changes) {
    if (!change.starts_with("optim.min_lr:")) continue;
    if (min_lr_derived) {
      change += fmt::format(" (its default, optim.lr / 10; set optim.min_lr = {} to keep the saved schedule)",
                            saved_min_lr.dump());
    } else if (saved_min_lr_default &&
               saved_lr == section_value(current, "optim", "lr")) {  // unset then gives it again
      change +=
          " (the saved run's is its default, optim.lr / 10 in single precision: leave optim.min_lr unset to keep it)";
    }
  }
  for (std::string& change : changes) {
    // The data position is a count of windows (manifest next_sample_index): at another length the
    // same count starts at another token, so a sequential order reads tokens again or skips some.
    if (change.starts_with("train.seq_len:")) {
      change +=
          " (the data position is kept as a count of windows, which at the new length starts at another "
          "token: a sequential order rereads or skips tokens)";
    }
  }
  for (std::string& change : changes) {
    if (!change.starts_with("optim.decay_steps:") || derived == now.derived.end()) continue;
    change +=
        fmt::format(" (its default, from {}; set optim.decay_steps = {} to keep the saved schedule)",
                    derived->find("train.max_steps") != std::string::npos ? "train.max_steps" : "optim.warmup_steps",
                    section_value(saved, "optim", "decay_steps").dump());
  }
  // The number formats the step computes in: the working parameters' (the master weights and
  // AdamW's moments stay fp32 either way), the activations' and the collectives'. Which windows a step reads, beside
  // the files themselves (data_changes): their order, and the generated text's size where both runs
  // read it.
  const bool embedded = section_value(saved, "data", "dataset") == "embedded" && now.data.dataset == "embedded" &&
                        now.data.train_file.empty() && now.data.train_files.empty();
  std::vector<ConfigKey> recorded = {{"precision", "param_dtype"}, {"precision", "activations"}, {"data", "order"}};
  if (embedded) recorded.push_back({"data", "embedded_chars"});
  for (std::string& c : recorded_changes(saved, current, recorded)) changes.push_back(std::move(c));
  // The wire formats that round what every rank computes with are formats too: int8 gathers (each
  // rank computes with the decoded values), a lossy cross-group reduction, and the gradient
  // shard's (fp32 or the working dtype) accumulation; each as it acts, on either side, where the
  // saved config reads at its rank count (fp32 gradient shards of fp32 parameters, or int8 on one
  // rank's solo path, change no bit, and were refused as changes; a key that stops acting is one).
  for (std::string& c : wire_format_changes(saved, saved_world_size, now)) changes.push_back(std::move(c));
  // The samples of a step are a function of the global batch only (engine/app/data/batch_sampler.h).
  const nlohmann::json mb = section_value(saved, "train", "micro_batch"),
                       ga = section_value(saved, "train", "grad_accum");
  // Within the config's own ranges: a manifest resealed by hand with micro_batch 0 divided by zero
  // below (SIGFPE), and a grad_accum of 2^63 overflowed the product.
  const auto within = [](const nlohmann::json& v, long long most) {
    return v.is_number_integer() && v.get<std::int64_t>() >= 1 && v.get<std::int64_t>() <= most;
  };
  if ((mb.is_number_integer() || ga.is_number_integer()) &&
      !(within(mb, kMaxConfigDim) && within(ga, kMaxConfigGradAccum))) {
    changes.push_back(fmt::format(
        "global batch: the checkpoint's train.micro_batch {} and grad_accum {} are not a batch (a damaged manifest)",
        mb.dump(), ga.dump()));
  } else if (mb.is_number_integer() && ga.is_number_integer()) {
    const std::int64_t before = mb.get<std::int64_t>() * ga.get<std::int64_t>() * saved_world_size;
    const std::int64_t after = std::int64_t{now.train.micro_batch} * now.train.grad_accum * now.world_size;
    if (before != after) {
      changes.push_back(
          fmt::format("global batch (micro_batch x grad_accum x ranks): {} x {} x {} = {} -> {} x {} x {} = {}{}",
                      mb.get<std::int64_t>(), ga.get<std::int64_t>(), saved_world_size, before, now.train.micro_batch,
                      now.train.grad_accum, now.world_size, after, keep_global_batch_hint(saved, before, now)));
    }
  }
  return changes;
}

std::string evaluation_window_change(const nlohmann::json& saved, const RunConfig& now) {
  const nlohmann::json batches = section_value(saved, "train", "eval_batches"),
                       mb = section_value(saved, "train", "micro_batch");
  if (!batches.is_number_integer() || !mb.is_number_integer()) return "";  // not recorded: nothing to compare
  const std::int64_t before = batches.get<std::int64_t>() * mb.get<std::int64_t>();
  const std::int64_t after = std::int64_t{now.train.eval_batches} * now.train.micro_batch;
  if (before == after) return "";
  return fmt::format("the evaluation's windows (train.eval_batches x train.micro_batch): {} x {} = {} -> {} x {} = {}",
                     batches.get<std::int64_t>(), mb.get<std::int64_t>(), before, now.train.eval_batches,
                     now.train.micro_batch, after);
}

std::string choice_file_change(const nlohmann::json& saved, const RunConfig& now) {
  const nlohmann::json recorded = section_value(saved, "data", "choice_file");
  if (recorded.is_null()) return "";  // not recorded: nothing to compare
  const std::string before = recorded.is_string() ? recorded.get<std::string>() : "";
  if (before == now.data.choice_file) return "";
  const auto shown = [](const std::string& f) { return f.empty() ? std::string("none") : nlohmann::json(f).dump(); };
  return fmt::format("data.choice_file: {} -> {} (multiple-choice accuracies on either side are not comparable)",
                     shown(before), shown(now.data.choice_file));
}

std::vector<std::string> deterministic_bit_changes(const nlohmann::json& saved, int saved_world_size,
                                                   const RunConfig& now, std::string_view saved_kernels,
                                                   std::string_view now_kernels) {
  if (!now.train.deterministic && section_value(saved, "train", "deterministic") != nlohmann::json(true)) return {};
  std::vector<std::string> changes = changed_keys(saved, now.to_json(), kDeterministicBitKeys);
  for (std::string& change : changes) {  // each with its own reason (one shared one misled)
    change += change.starts_with("train.micro_batch")
                  ? " (the fold adds each micro-batch's gradients: its bits follow the micro-batch)"
                  : " (the modes reduce the gradients in different orders)";
  }
  // The fold gives the same bits at any rank count, but int8 gathers' blocks and hybrid sharding's
  // two hops follow the shards: on another rank count (either side acting) not bit for bit.
  if (saved_world_size != now.world_size) {
    const std::optional<RunConfig> before = saved_as_read(saved, saved_world_size);
    const auto sharded_bits = [](const RunConfig& c) {
      return acting_zero_options(c).gather_wire == WireDType::kInt8 || c.zero.hybrid(c.world_size);
    };
    if ((before && sharded_bits(*before)) || sharded_bits(now)) {
      changes.push_back(
          fmt::format("ranks: {} -> {} (int8 gathers' blocks or hybrid sharding's groups follow the "
                      "shards)",
                      saved_world_size, now.world_size));
    }
  }
  // The kernels of another device, as of another CPU type or GPU model, are another set of roundings.
  const bool records_device = saved.is_object() && saved.contains("device") && saved["device"].is_string();
  const std::string saved_device =
      records_device ? saved["device"].get<std::string>() : std::string(device_name(Device::kCPU));
  if (saved_device != device_name(now.device)) {
    changes.push_back(fmt::format("device: {} -> {} (other kernels round the products' last bits their own way)",
                                  saved_device, device_name(now.device)));
  } else if (!saved_kernels.empty() && saved_kernels != now_kernels) {
    changes.push_back(now.device == Device::kCPU
                          ? fmt::format("the BLAS kernels: {} -> {} (each rounds a product's last bits its own way)",
                                        saved_kernels, now_kernels)
                          : fmt::format("the GPU and its libraries: {} -> {} (cuBLASLt's heuristic picks each "
                                        "product's algorithm by them, and cuDNN its attention's kernels)",
                                        saved_kernels, now_kernels));
  }
  return changes;
}

}  // namespace zt
