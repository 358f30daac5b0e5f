// The zero section (see the header).
#include "engine/app/config/zero_section.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/base/core/check.h"
#include "engine/distributed/sharding/stage_policy.h"

namespace zt {

const char* gather_dtype_name(WireDType wire) { return wire == WireDType::kInt8 ? "int8" : "param"; }

const char* cross_group_grad_dtype_name(WireDType wire) {
  return wire == WireDType::kExact ? "fp32" : wire_dtype_name(wire);
}

namespace {

// An option changed from its default where it has nothing to act on is kept (a resume at another
// stage or rank count takes it) and said, rather than shown in force without a word: a stage-3
// (or stage 2-3) option at a stage that does not use it, the overlap limits where every
// collective is waited at once, what one rank's solo path does not call, the reduction limits
// where no gradient pends (StagePolicy::pends, or a table reduced in rounds on several ranks), fp32
// gradient shards where the working dtype is fp32, and the solo path's switch on several ranks.
// Each key once. Called once the section's derived options (fold_in_global_order, ...) are set.
void note_keys_without_effect(RunConfig& c) {
  const ZeroOptions& z = c.zero;
  const StagePolicy policy = make_stage_policy(z, c.world_size, c.param_dtype);
  // A unit reduced in rounds (a tied table under train.head_chunks) pends on several ranks at any stage.
  const bool pends = policy.pends_unit(/*reduced_in_rounds=*/c.train.head_chunks > 1);
  const nlohmann::json chosen = zero_section_json(z), defaults = zero_section_json(ZeroOptions{});
  std::vector<std::string> noted;
  const auto unnoted = [&](const char* key) {
    return chosen[key] != defaults[key] && std::find(noted.begin(), noted.end(), key) == noted.end();
  };
  const auto say = [&](std::vector<std::string> keys, std::string_view one, std::string_view several,
                       std::string_view why) {
    if (keys.empty()) return;
    noted.insert(noted.end(), keys.begin(), keys.end());
    for (std::string& key : keys) key = "zero." + key;
    c.derived.push_back(fmt::format("{} {} {}", fmt::join(keys, ", "), keys.size() == 1 ? one : several, why));
  };
  for (const auto& [key, used_from] : {std::pair{"prefetch_units", 3}, std::pair{"reshard_after_forward", 3},
                                       std::pair{"param_persistence_threshold", 3}, std::pair{"grad_shard_dtype", 2}}) {
    if (z.stage < used_from && unnoted(key)) {
      say({key}, "is", "are",
          fmt::format("a stage{} option: stage {} runs without it", used_from == 3 ? " 3" : "s 2-3", z.stage));
    }
  }
  // What acts on pending gradients: the reduction limits, their overlap, fp32 gradient shards.
  const std::vector<const char*> on_pending = {"overlap_comm", "max_inflight_reductions", "max_inflight_reduction_mb",
                                               "grad_shard_dtype"};
  if (policy.solo) {
    std::vector<std::string> moot;
    for (const char* key : {"overlap_comm", "prefetch_units", "max_inflight_reductions", "max_inflight_reduction_mb",
                            "reshard_after_forward", "param_persistence_threshold", "grad_shard_dtype"}) {
      const bool acts =
          pends && std::find(on_pending.begin(), on_pending.end(), std::string_view(key)) != on_pending.end();
      if (unnoted(key) && !acts) moot.emplace_back(key);
    }
    say(moot, "acts", "act",
        "on collectives, which one rank on the solo path does not call (stage 0's work); zero.solo_path = false "
        "keeps them at one rank");
    return;
  }
  if (!pends && unnoted("max_inflight_reduction_mb")) {
    say({"max_inflight_reduction_mb"}, "bounds", "bound",
        fmt::format("pending gradients, which stage {} holds only with train.deterministic or a token table "
                    "reduced in rounds (train.head_chunks) on several ranks: this run runs without it",
                    z.stage));
  }
  if (!z.overlap_comm) {
    std::vector<std::string> moot;
    for (const char* key : {"prefetch_units", "max_inflight_reductions", "max_inflight_reduction_mb"}) {
      if (unnoted(key) && (std::string_view(key) != "prefetch_units" || z.stage == 3)) moot.emplace_back(key);
    }
    say(moot, "limits", "limit",
        "what is in flight, and zero.overlap_comm = false waits every collective at once (stage 3 gathers each "
        "unit at its use): nothing to limit");
  }
  if (z.fp32_grad_shards && z.stage >= 2 && c.param_dtype == DType::kF32 && unnoted("grad_shard_dtype")) {
    say({"grad_shard_dtype"}, "=", "=", "fp32 changes nothing with fp32 parameters (their working dtype)");
  }
  if (!z.solo_path && c.world_size > 1) {
    c.derived.push_back(
        fmt::format("zero.solo_path = false is a one-rank option: {} ranks call their collectives "
                    "either way",
                    c.world_size));
  }
}

}  // namespace

ZeroOptions acting_zero_options(const RunConfig& c) {
  ZeroOptions z = c.zero;
  if (z.stage == 0 || (c.world_size == 1 && z.solo_path)) z.gather_wire = WireDType::kExact;
  if (!z.hybrid(c.world_size)) z.cross_group_grad_wire = WireDType::kExact;
  // (On one rank's solo path too: bf16 gradients pend in an fp32 buffer where the shard is fp32.)
  if (z.stage < 2 || c.param_dtype == DType::kF32) z.fp32_grad_shards = false;
  return z;
}

void read_zero_section(ConfigReader r, RunConfig& c) {
  ZeroOptions& z = c.zero;
  z.stage = r.get_int("stage", z.stage, 0, 3);
  z.overlap_comm = r.get_bool("overlap_comm", z.overlap_comm);
  z.prefetch_units = r.get_int("prefetch_units", z.prefetch_units, 0, 64);
  z.max_inflight_reductions = r.get_int("max_inflight_reductions", z.max_inflight_reductions, 1, 64);
  // MiB in the config (fractions allowed), bytes in the store.
  const double inflight_mb = r.get_double("max_inflight_reduction_mb", 0.0, 0.0, 1048576.0);
  z.max_inflight_reduction_bytes = std::llround(inflight_mb * 1048576.0);
  if (inflight_mb > 0.0 && z.max_inflight_reduction_bytes == 0) {  // it read as 0: no bound at all
    throw_input_error(
        "config error in {}: key '{}' = {:g} MiB rounds to 0 bytes, which means no bound; one byte (each "
        "reduction waited for before the next) is 1e-06",
        r.source_of("max_inflight_reduction_mb"), r.dotted("max_inflight_reduction_mb"), inflight_mb);
  }
  z.reshard_after_forward = r.get_bool("reshard_after_forward", z.reshard_after_forward);
  z.persistence_threshold = r.get_int("param_persistence_threshold", 0, 0, 2000000000);
  z.fp32_grad_shards = r.get_enum("grad_shard_dtype", "working", {"working", "fp32", "f32"}) != "working";
  z.solo_path = r.get_bool("solo_path", z.solo_path);
  z.shard_group_size = r.get_int("shard_group_size", 0, 0, 1 << 20);
  // A group of every rank is no hybrid ("0 (or N)"): read as 0, and said, so that nothing treats it
  // as one (the stage policy sees the store's world, where g = N and a real group of g look alike:
  // stages 2-3 held an fp32 reduced-shard buffer the flat store does not, 4.6 KiB on a tiny model).
  if (z.shard_group_size != 0 && z.shard_group_size == c.world_size) {
    c.derived.push_back(
        fmt::format("zero.shard_group_size = 0 (the {} given is every rank: no hybrid sharding)", z.shard_group_size));
    z.shard_group_size = 0;
  }
  const std::string gather = r.get_enum("gather_dtype", "param", {"param", "int8"});
  z.gather_wire = gather == "int8" ? WireDType::kInt8 : WireDType::kExact;
  const std::string across = r.get_enum("cross_group_grad_dtype", "fp32", {"fp32", "f32", "bf16", "int8"});
  z.cross_group_grad_wire = across == "int8"   ? WireDType::kInt8
                            : across == "bf16" ? WireDType::kBF16
                                               : WireDType::kExact;
  r.reject_unknown_keys();
  // One rank on the solo path calls no collective: int8 gathers would quantize nothing, and the run
  // would train on exact weights where the key promises the decoded ones.
  if (z.gather_wire != WireDType::kExact && z.stage >= 1 && c.world_size == 1 && z.solo_path) {
    c.derived.push_back(
        "zero.gather_dtype = int8 has no gather to quantize on one rank (zero.solo_path): the run computes with "
        "exact weights; zero.solo_path = false keeps the gathers, and int8, at one rank");
  }
  // Deterministic mode promises the same bits at every stage and every rank count: each
  // micro-batch's gradient folded in global order (ZeroOptions::fold_in_global_order). Hybrid
  // sharding reduces in two hops instead, each in rank order, which keeps the stages bitwise equal
  // at one rank count; with accumulation, or bf16 gradients, that needs stages 0-1 to reduce each
  // micro-batch as stages 2-3 do (ZeroOptions::reduce_every_micro_batch): through the fp32 buffer
  // both hops land in, rounded once. Reduced in their bf16 gradient buffer, stages 0-1 rounded
  // between the hops, and differed from stages 2-3 in the last bits even at grad_accum 1.
  // Outside deterministic mode the same holds for bf16 gradients at one micro-batch a step (the
  // stages' promised equality there, and the exact sum an fp32 cross_group_grad_dtype promises:
  // rounded between the hops, a 4-rank run's first gradient norm was 7.7e-4 off stages 2-3's);
  // with accumulation the stages differ within rounding anyway, and reducing each micro-batch
  // would cost stages 0-1 an exchange per micro-batch.
  const bool bf16_grads = c.param_dtype != DType::kF32;
  z.fold_in_global_order = c.train.deterministic && !z.hybrid(c.world_size);
  z.reduce_every_micro_batch =
      z.hybrid(c.world_size) &&
      (c.train.deterministic ? c.train.grad_accum > 1 || bf16_grads : bf16_grads && c.train.grad_accum == 1);
  note_keys_without_effect(c);
}

std::string zero_choices_changed(const ZeroOptions& zero) {
  const nlohmann::json chosen = zero_section_json(zero), defaults = zero_section_json(ZeroOptions{});
  std::string changed;
  for (const auto& [key, value] : chosen.items()) {
    if (key == "stage" || value == defaults[key]) continue;
    changed += fmt::format("{}{} = {}", changed.empty() ? "" : ", ", key,
                           value.is_string() ? value.get<std::string>() : value.dump());
  }
  return changed;
}

namespace {

// The shortest decimal MiB count that reads back as `bytes` (the key is read in MiB and rounded to
// bytes): 0.1 as given, not 0.10000038146972656.
double mib_as_given(std::int64_t bytes) {
  const double exact = static_cast<double>(bytes) / 1048576.0;
  for (int digits = 1; digits <= 17; ++digits) {
    const double shorter = std::stod(fmt::format("{:.{}g}", exact, digits));
    if (std::llround(shorter * 1048576.0) == bytes) return shorter;
  }
  return exact;
}

}  // namespace

nlohmann::json zero_section_json(const ZeroOptions& zero) {
  return {{"stage", zero.stage},
          {"overlap_comm", zero.overlap_comm},
          {"prefetch_units", zero.prefetch_units},
          {"max_inflight_reductions", zero.max_inflight_reductions},
          {"max_inflight_reduction_mb", mib_as_given(zero.max_inflight_reduction_bytes)},
          {"reshard_after_forward", zero.reshard_after_forward},
          {"param_persistence_threshold", zero.persistence_threshold},
          {"grad_shard_dtype", zero.fp32_grad_shards ? "fp32" : "working"},
          {"solo_path", zero.solo_path},
          {"shard_group_size", zero.shard_group_size},
          {"gather_dtype", gather_dtype_name(zero.gather_wire)},
          {"cross_group_grad_dtype", cross_group_grad_dtype_name(zero.cross_group_grad_wire)}};
}

}  // namespace zt
