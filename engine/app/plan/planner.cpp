// The planner's search (see the header).
#include "engine/app/plan/planner.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>

#include "engine/app/config/config_limits.h"
#include "engine/app/config/train_section.h"
#include "engine/app/config/zero_section.h"
#include "engine/app/trainer/memory_check.h"
#include "engine/app/trainer/run_memory.h"
#include "engine/base/core/check.h"
#include "engine/base/core/config_text.h"
#include "engine/distributed/sharding/stage_policy.h"

namespace zt::plan {

namespace {

constexpr const char* kCheckpointing[] = {"none", "selective", "every:2", "all"};
constexpr int kHeadChunks[] = {1, 2, 4, 8};
constexpr int kPrefetch[] = {0, 1, 2};
constexpr double kInflightMb[] = {0.0, 64.0};  // unbounded, or reductions holding at most 64 MiB pending

// The in-flight bounds searched where gradients pend: kInflightMb and the config's own.
std::vector<double> inflight_bounds(double config_mb) {
  std::vector<double> bounds(std::begin(kInflightMb), std::end(kInflightMb));
  if (std::find(bounds.begin(), bounds.end(), config_mb) == bounds.end()) bounds.push_back(config_mb);
  return bounds;
}

// The keys the user's --set entries give, with their values as train reads them: config_text's
// apply_override on a document whose sections are objects, so that a section's JSON
// (--set 'zero={"stage":1}') sets its keys one by one, as the dotted spelling does. A searched key
// among them is held at its value (--set zero.stage=1 plans stage 1), as a search over it would
// drop it. A key set to null is not given, and not held.
using SetKeys = std::map<std::string, nlohmann::json>;

// The keys `assignment` sets, applied to `doc` (its section made an object first).
std::vector<std::string> apply_set(nlohmann::json& doc, const std::string& assignment) {
  const std::string section = assignment.substr(0, std::min(assignment.find('.'), assignment.find('=')));
  if (!doc.contains(section) || !doc[section].is_object()) doc[section] = nlohmann::json::object();
  return apply_override(doc, assignment);
}

SetKeys set_keys(const std::vector<std::string>& sets) {
  nlohmann::json doc = nlohmann::json::object();
  SetKeys out;
  for (const std::string& s : sets) {
    for (const std::string& key : apply_set(doc, s)) {
      std::string pointer = "/" + key;
      std::replace(pointer.begin(), pointer.end(), '.', '/');
      const nlohmann::json& value = doc.at(nlohmann::json::json_pointer(pointer));
      if (value.is_null()) {  // not given (ConfigReader::find): the search's, as if unset
        out.erase(key);
      } else {
        out[key] = value;
      }
    }
  }
  return out;
}

// A held value as the plan prints and sets it: a string's text, else its JSON.
std::string held_text(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// The values searched for `key`: the held one alone where the user set it, else `searched`.
template <typename T>
std::vector<T> values_for(const SetKeys& held, const std::string& key, std::vector<T> searched, T held_value) {
  return held.count(key) > 0 ? std::vector<T>{held_value} : searched;
}

// `sets` less what sets train.micro_batch or train.grad_accum: a dotted entry, or those two keys of
// a train section's JSON (its other keys, a global batch or seq_len, stay, each set on its own).
std::vector<std::string> without_batch_split(const std::vector<std::string>& sets) {
  std::vector<std::string> out;
  for (const std::string& s : sets) {
    nlohmann::json doc = nlohmann::json::object();
    const std::vector<std::string> keys = apply_set(doc, s);
    const auto batch_term = [](const std::string& k) { return k == "train.micro_batch" || k == "train.grad_accum"; };
    if (std::none_of(keys.begin(), keys.end(), batch_term)) {
      out.push_back(s);
      continue;
    }
    for (const auto& [key, value] : set_keys({s})) {
      if (!batch_term(key)) out.push_back(key + "=" + value.dump());
    }
  }
  return out;
}

// The config to plan from, and the micro-batches the search tries (`micro_batches`). As given where
// it loads at this rank count: a micro-batch or accumulation the user's --set holds is kept, and
// without either every micro-batch that splits the global batch is tried. A config written for
// another rank count (its own micro-batch does not split its global batch here) is read with the
// smallest micro-batch that splits it, as the search sets it anyway (said in `note`), but a held
// accumulation then takes the micro-batch that splits the global batch with it, and a held
// micro-batch that cannot is refused by name. The config's own errors stand.
RunConfig load_base(const std::string& path, const std::vector<std::string>& given_sets, const SetKeys& held,
                    int world_size, std::vector<int>& micro_batches, std::string& note) {
  const bool held_mb = held.count("train.micro_batch") > 0, held_accum = held.count("train.grad_accum") > 0;
  // A held micro-batch or accumulation splits the config's global batch, as the search's do: where
  // the config derives its global batch (micro_batch x seq_len x grad_accum x ranks), the held key
  // would derive another, a hyper-parameter changed unsaid (a held micro_batch of 3 planned a
  // global batch 5.3 times smaller). Pinned at the config's own; one that cannot split it is
  // refused by name below. (A config whose own split fails here gives its global batch itself.)
  std::vector<std::string> sets = given_sets;
  if (held_mb != held_accum) {  // both held derive the global batch, as train does
    try {
      const RunConfig unheld = load_run_config(path, without_batch_split(given_sets), world_size);
      sets.push_back(fmt::format("train.global_batch_tokens={}", unheld.train.global_batch_tokens));
    } catch (const BatchSplitError&) {}
  }
  // Every divisor of the sequences a rank takes a step, not only powers of two: 12 sequences run
  // as 3 x 4 or 6 x 2 where 4 x 3 may not fit and 2 x 6 is slower. Only those the config's ranges
  // take (a grad_accum up to its largest, a micro_batch up to its): others would only be refused,
  // and past 2^31 sequences one narrowed to int was tried twice. (A global batch no micro-batch
  // splits leaves none, and the search says it considered nothing.)
  auto splitting_micro_batches = [&](const RunConfig& c) {
    const std::int64_t per_sequence = std::int64_t{c.train.seq_len} * world_size;
    if (c.train.global_batch_tokens % per_sequence != 0) return;
    const std::int64_t sequences = c.train.global_batch_tokens / per_sequence;
    const std::int64_t least = (sequences + kMaxConfigGradAccum - 1) / kMaxConfigGradAccum;
    const std::int64_t most = std::min<std::int64_t>(sequences, kMaxConfigDim);
    std::vector<int> above_root;  // each divisor past sqrt(sequences), largest first
    for (std::int64_t mb = 1; mb * mb <= sequences; ++mb) {
      if (sequences % mb != 0) continue;
      if (mb >= least && mb <= most) micro_batches.push_back(static_cast<int>(mb));
      const std::int64_t pair = sequences / mb;
      if (pair != mb && pair >= least && pair <= most) above_root.push_back(static_cast<int>(pair));
    }
    micro_batches.insert(micro_batches.end(), above_root.rbegin(), above_root.rend());
  };
  try {
    RunConfig c = load_run_config(path, sets, world_size);
    if (held_mb || held_accum) {
      micro_batches = {c.train.micro_batch};
    } else {
      splitting_micro_batches(c);
    }
    return c;
  } catch (const BatchSplitError& e) {
    if (held_mb && e.global_batch_tokens == 0) {  // no global batch to split: the batch is past any
      throw_input_error("{} (train.micro_batch is held as --set gives it: leave it out for the search to set it)",
                        e.what());
    }
    if (held_mb) {
      // Said from the terms, not the config's refusal: that one names the pinned global batch as
      // a --set the user never gave. The split that would work, as the config's refusal says it.
      throw_input_error(
          "train.micro_batch = {} (held as --set gives it) does not split train.global_batch_tokens = {} over "
          "train.seq_len x ranks = {} x {}{}: leave it out for the search to set it",
          e.micro_batch, e.global_batch_tokens, e.seq_len, e.world_size,
          batch_split_hint(e.micro_batch, e.seq_len, e.world_size, e.global_batch_tokens));
    }
  }
  std::string refused;
  std::vector<std::string> base_sets = without_batch_split(sets);
  // The smallest micro-batch that splits the config's global batch, where it gave one (1 where the
  // sequences a rank are 65536 or fewer: past them micro-batch 1's accumulation is out of range,
  // and the config was refused though the search had choices): a --set global batch wins over a
  // grad_accum the file gives too, which would otherwise refuse that micro-batch as well.
  RunConfig c = load_run_config_past_batch_split(
      path, base_sets, world_size,
      [](const BatchSplitError& e) {
        const int smallest = smallest_splitting_micro_batch(e.seq_len, e.world_size, e.global_batch_tokens);
        std::vector<std::string> fallback = {fmt::format("train.micro_batch={}", smallest > 0 ? smallest : 1)};
        if (e.global_batch_tokens > 0) {
          fallback.push_back(fmt::format("train.global_batch_tokens={}", e.global_batch_tokens));
        }
        return fallback;
      },
      refused);
  if (!refused.empty()) {
    // A held accumulation's micro-batch is the search's: the refusal's own hint would name another.
    note = held_accum
               ? fmt::format("the config's own micro-batch does not load on {} rank(s); the search sets it", world_size)
               : fmt::format("the config's own micro-batch does not load on {} rank(s) ({}); the search sets it",
                             world_size, refused);
  }
  if (!held_accum) {
    splitting_micro_batches(c);
    return c;
  }
  // The held accumulation: a whole number (a --set value is JSON); anything else is refused below
  // by name, as is one that does not split the global batch.
  const nlohmann::json& value = held.at("train.grad_accum");
  const std::int64_t accum = value.is_number_integer() ? value.get<std::int64_t>() : 0;
  const std::int64_t per_sequence = std::int64_t{c.train.seq_len} * world_size;
  if (accum < 1 || c.train.global_batch_tokens % (per_sequence * accum) != 0) {
    throw_input_error(
        "train.grad_accum = {} (held as --set gives it) does not split train.global_batch_tokens = {} over "
        "train.seq_len x ranks = {} x {}: leave it out for the search to set it",
        held_text(value), c.train.global_batch_tokens, c.train.seq_len, world_size);
  }
  micro_batches = {static_cast<int>(c.train.global_batch_tokens / (per_sequence * accum))};
  return c;
}

}  // namespace

PlanResult plan(const std::string& config_path, const std::vector<std::string>& base_sets, int world_size,
                std::int64_t budget_bytes, const OpProfile& profile, const Links& links) {
  PlanResult out;
  // Each searched key the user's --set gives is held at the value the base config read from it.
  const SetKeys held = set_keys(base_sets);
  std::vector<int> micro_batches;
  const RunConfig base = load_base(config_path, base_sets, held, world_size, micro_batches, out.note);
  out.global_batch_tokens = base.train.global_batch_tokens;
  out.device = base.device;
  // The multiple-choice scorer's plan follows each candidate's micro-batch; its file is read once.
  std::string choices_note;
  const std::optional<ChoiceShape> choices = run_choice_shape_or_note(base, choices_note);
  if (!choices_note.empty()) out.note += (out.note.empty() ? "" : "; ") + choices_note;
  const std::int64_t per_sequence = static_cast<std::int64_t>(base.train.seq_len) * world_size;
  out.smallest_bytes = -1;
  std::int64_t least_lean = -1;  // the least need with zero.overlap_comm = false, while nothing fits
  std::vector<std::string> checkpointing(std::begin(kCheckpointing), std::end(kCheckpointing));
  if (held.count("train.activation_checkpointing") > 0) {
    checkpointing = {base.train.activation_checkpointing.to_string()};
  }
  const std::vector<int> stages = values_for(held, "zero.stage", {0, 1, 2, 3}, base.zero.stage);
  const std::vector<int> head_chunks =
      values_for(held, "train.head_chunks", std::vector<int>(std::begin(kHeadChunks), std::end(kHeadChunks)),
                 base.train.head_chunks);
  const std::vector<int> block_units = values_for(held, "train.block_units", {1, 2}, base.train.block_units);
  const std::vector<int> prefetches =
      values_for(held, "zero.prefetch_units", std::vector<int>(std::begin(kPrefetch), std::end(kPrefetch)),
                 base.zero.prefetch_units);
  const auto bound_given = held.find("zero.max_inflight_reduction_mb");
  const std::optional<std::string> held_bound =
      bound_given != held.end() ? std::optional<std::string>(bound_given->second.dump()) : std::nullopt;  // as JSON
  const bool chunks_held = held.count("train.head_chunks") > 0;
  // The config's own bound as its MiB, written as short as gives its bytes (as a run's config.json).
  const double config_bound_mb = zero_section_json(base.zero).at("max_inflight_reduction_mb").get<double>();
  for (const char* key :
       {"zero.stage", "train.micro_batch", "train.grad_accum", "train.activation_checkpointing", "train.head_chunks",
        "train.block_units", "zero.prefetch_units", "zero.max_inflight_reduction_mb"}) {
    if (const auto given = held.find(key); given != held.end())
      out.held.push_back(key + ("=" + held_text(given->second)));
  }
  for (int stage : stages) {
    for (int mb : micro_batches) {
      if (mb < 1 || out.global_batch_tokens % (static_cast<std::int64_t>(mb) * per_sequence) != 0) continue;
      const std::int64_t accum = out.global_batch_tokens / (mb * per_sequence);
      for (const std::string& ckpt : checkpointing) {
        for (int chunks : head_chunks) {
          if (chunks > base.model.padded_vocab_size() / 64 && !chunks_held) continue;
          for (int units : block_units) {
            // zero.overlap_comm = false waits every collective at once: no prefetch or bound to choose.
            for (int prefetch :
                 stage == 3 && base.zero.overlap_comm ? prefetches : std::vector<int>{base.zero.prefetch_units}) {
              // Where gradients pend (stages 2-3; at any stage a head reduced in rounds on several
              // ranks, zero.reduce_every_micro_batch, zero.fold_in_global_order: the stage policy's
              // rule) and collectives overlap, the bounds searched and the config's own (a bound
              // the user tuned is a choice too: without it a config that fits was said to fit
              // nothing); elsewhere the config's value stays, unnamed, as it acts on nothing.
              ZeroOptions at_stage = base.zero;
              at_stage.stage = stage;
              const bool bounded = base.zero.overlap_comm && make_stage_policy(at_stage, world_size, base.param_dtype)
                                                                 .pends_unit(/*reduced_in_rounds=*/chunks > 1);
              for (double bound : held_bound || !bounded ? std::vector<double>{-1.0}  // not searched
                                                         : inflight_bounds(config_bound_mb)) {
                std::vector<std::string> sets = {fmt::format("zero.stage={}", stage),
                                                 fmt::format("train.micro_batch={}", mb),
                                                 fmt::format("train.grad_accum={}", accum),
                                                 fmt::format("train.global_batch_tokens={}", out.global_batch_tokens),
                                                 fmt::format("train.activation_checkpointing={}", ckpt),
                                                 fmt::format("train.head_chunks={}", chunks),
                                                 fmt::format("train.block_units={}", units)};
                // Only stage 3 gathers ahead: elsewhere the config's own value stays, unnamed.
                if (stage == 3) sets.push_back(fmt::format("zero.prefetch_units={}", prefetch));
                if (held_bound) {
                  sets.push_back("zero.max_inflight_reduction_mb=" + *held_bound);  // the user's text, as given
                } else if (bounded) {
                  sets.push_back(fmt::format("zero.max_inflight_reduction_mb={}", bound));
                }
                std::vector<std::string> all = base_sets;
                all.insert(all.end(), sets.begin(), sets.end());
                ++out.considered;
                RunConfig c;
                try {
                  c = load_run_config(config_path, all, world_size);
                  check_trainable(c);
                } catch (const InputError& e) {
                  if (out.invalid++ == 0) out.first_refusal = e.what();  // a combination the config's rules refuse
                  continue;
                }
                const std::int64_t bytes = predicted_required_bytes(c, world_size, choices);
                if (out.smallest_bytes < 0 || bytes < out.smallest_bytes) out.smallest_bytes = bytes;
                // Until something fits: each candidate's need with fewer communication buffers
                // (zero.overlap_comm = false, which the search does not vary), the least of them
                // for the refusal to name (a trial's 1.42 MiB need fit 1.3 MiB with overlap off).
                if (out.fitting.empty() && bytes > budget_bytes && c.zero.overlap_comm) {
                  RunConfig lean = c;
                  lean.zero.overlap_comm = false;
                  const std::int64_t lean_bytes = predicted_required_bytes(lean, world_size, choices);
                  if (least_lean < 0 || lean_bytes < least_lean) least_lean = lean_bytes;
                }
                if (bytes > budget_bytes) continue;
                out.fitting.push_back({sets, mb, bytes, estimate_step_time(profile, c, world_size, links)});
              }
            }
          }
        }
      }
    }
  }
  if (out.fitting.empty() && least_lean >= 0 && least_lean < out.smallest_bytes) {
    out.smallest_bytes_fewer_buffers = least_lean;
  }
  // Fastest first (times within 1e-9 of each other are equal: the same work summed in another
  // order); among equals the larger micro-batch, then the one needing less memory.
  std::stable_sort(out.fitting.begin(), out.fitting.end(), [](const Choice& a, const Choice& b) {
    if (std::abs(a.time.step_s - b.time.step_s) > 1e-9 * std::max(a.time.step_s, b.time.step_s)) {
      return a.time.step_s < b.time.step_s;
    }
    if (a.micro_batch != b.micro_batch) return a.micro_batch > b.micro_batch;
    return a.required_bytes < b.required_bytes;
  });
  return out;
}

}  // namespace zt::plan
