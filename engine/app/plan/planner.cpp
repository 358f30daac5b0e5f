// The planner's search (see the header).
#include "engine/app/plan/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "engine/app/trainer/memory_check.h"
#include "engine/app/trainer/run_memory.h"
#include "engine/base/core/check.h"

namespace zt::plan {

namespace {

constexpr const char* kCheckpointing[] = {"none", "selective", "every:2", "all"};
constexpr int kHeadChunks[] = {1, 2, 4, 8};
constexpr int kPrefetch[] = {0, 1, 2};
constexpr double kInflightMb[] = {0.0, 64.0};  // unbounded, or reductions holding at most 64 MiB pending

// The config as given; where it does not load at this rank count with its own micro-batch (one
// that does not divide its global batch: a config written for another N), with micro_batch 1, since
// the search sets the micro-batch anyway. The config's own error stands where that fails too.
RunConfig load_base(const std::string& path, std::vector<std::string> sets, int world_size, std::string& note) {
  std::string refused;
  RunConfig c = load_run_config_past_batch_split(path, sets, world_size, "train.micro_batch=1", refused);
  if (!refused.empty()) {
    note = fmt::format("the config's own micro-batch does not load on {} rank(s) ({}); the search sets it", world_size,
                       refused);
  }
  return c;
}

// The value of `key` the user's --set entries give (the last one), if any: a searched key given
// there is held at it (--set zero.stage=1 plans stage 1), as a search over it would drop it.
std::optional<std::string> held_value(const std::vector<std::string>& sets, const std::string& key) {
  std::optional<std::string> value;
  for (const std::string& s : sets) {
    const std::size_t eq = s.find('=');
    if (eq != std::string::npos && s.compare(0, eq, key) == 0) value = s.substr(eq + 1);
  }
  return value;
}

// The values searched for `key`: the held one alone where the user set it, else `searched`.
template <typename T>
std::vector<T> values_for(const std::vector<std::string>& sets, const std::string& key, std::vector<T> searched,
                          T held) {
  return held_value(sets, key) ? std::vector<T>{held} : searched;
}

}  // namespace

PlanResult plan(const std::string& config_path, const std::vector<std::string>& base_sets, int world_size,
                std::int64_t budget_bytes, const OpProfile& profile, const Links& links) {
  PlanResult out;
  const RunConfig base = load_base(config_path, base_sets, world_size, out.note);
  out.global_batch_tokens = base.train.global_batch_tokens;
  out.device = base.device;
  // The multiple-choice scorer's plan follows each candidate's micro-batch; its file is read once.
  std::string choices_note;
  const std::optional<ChoiceShape> choices = run_choice_shape_or_note(base, choices_note);
  if (!choices_note.empty()) out.note += (out.note.empty() ? "" : "; ") + choices_note;
  const std::int64_t per_sequence = static_cast<std::int64_t>(base.train.seq_len) * world_size;
  out.smallest_bytes = -1;
  // Each searched key the user's --set gives is held at the value the base config read from it.
  const std::vector<std::string>& held = base_sets;
  std::vector<int> micro_batches;
  for (int mb = 1; mb * per_sequence <= out.global_batch_tokens; mb *= 2) micro_batches.push_back(mb);
  if (held_value(held, "train.micro_batch")) {
    micro_batches = {base.train.micro_batch};
  } else if (held_value(held, "train.grad_accum")) {  // the accumulation held: its micro-batch
    micro_batches = {static_cast<int>(out.global_batch_tokens / (per_sequence * base.train.grad_accum))};
  }
  std::vector<std::string> checkpointing(std::begin(kCheckpointing), std::end(kCheckpointing));
  if (held_value(held, "train.activation_checkpointing")) {
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
  const std::optional<std::string> held_bound = held_value(held, "zero.max_inflight_reduction_mb");
  for (const char* key :
       {"zero.stage", "train.micro_batch", "train.grad_accum", "train.activation_checkpointing", "train.head_chunks",
        "train.block_units", "zero.prefetch_units", "zero.max_inflight_reduction_mb"}) {
    if (const std::optional<std::string> value = held_value(held, key)) out.held.push_back(key + ("=" + *value));
  }
  for (int stage : stages) {
    for (int mb : micro_batches) {
      if (mb < 1 || out.global_batch_tokens % (static_cast<std::int64_t>(mb) * per_sequence) != 0) continue;
      const std::int64_t accum = out.global_batch_tokens / (mb * per_sequence);
      for (const std::string& ckpt : checkpointing) {
        for (int chunks : head_chunks) {
          if (chunks > base.model.padded_vocab_size() / 64 && !held_value(held, "train.head_chunks")) continue;
          for (int units : block_units) {
            for (int prefetch : stage == 3 ? prefetches : std::vector<int>{base.zero.prefetch_units}) {
              for (double bound : held_bound   ? std::vector<double>{-1.0}  // the user's text, set as given
                                  : stage >= 2 ? std::vector<double>(std::begin(kInflightMb), std::end(kInflightMb))
                                               : std::vector<double>{0.0}) {
                std::vector<std::string> sets = {fmt::format("zero.stage={}", stage),
                                                 fmt::format("train.micro_batch={}", mb),
                                                 fmt::format("train.grad_accum={}", accum),
                                                 fmt::format("train.global_batch_tokens={}", out.global_batch_tokens),
                                                 fmt::format("train.activation_checkpointing={}", ckpt),
                                                 fmt::format("train.head_chunks={}", chunks),
                                                 fmt::format("train.block_units={}", units)};
                // Only stage 3 gathers ahead: elsewhere the config's own value stays, unnamed.
                if (stage == 3) sets.push_back(fmt::format("zero.prefetch_units={}", prefetch));
                sets.push_back(held_bound ? "zero.max_inflight_reduction_mb=" + *held_bound
                                          : fmt::format("zero.max_inflight_reduction_mb={:g}", bound));
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
                if (bytes > budget_bytes) continue;
                out.fitting.push_back({sets, mb, bytes, estimate_step_time(profile, c, world_size, links)});
              }
            }
          }
        }
      }
    }
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
