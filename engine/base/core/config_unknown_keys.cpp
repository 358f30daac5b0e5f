// ConfigReader's refusal of a key its section does not have, and the key it suggests instead: the
// same name in another section, another trainer's name for one of ours, or the nearest spelling.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/base/core/check.h"
#include "engine/base/core/config_reader.h"

namespace zt {

namespace {

// Names other trainers give the same things (Hugging Face's learning_rate and batch_size,
// nanoGPT's max_iters, eval_iters and lr_decay_iters, DeepSpeed's gradient_accumulation_steps and
// gradient_clipping, train_micro_batch_size_per_gpu, wall_clock_breakdown, a bare "steps"; FSDP's
// MixedPrecision and DeepSpeed's bf16 section and data_types for the number formats): the keys
// they stand for here, or none. Asked before the
// nearest spelling, which guesses (optim.steps is train.max_steps, not optim.eps; nanoGPT's
// eval_iters counts evaluation batches, not train.eval_every).
std::vector<const char*> our_names_for(const std::string& key) {
  static const std::pair<const char*, std::vector<const char*>> kOtherNames[] = {
      {"learning_rate", {"lr"}},
      {"batch_size", {"micro_batch"}},
      {"per_device_batch_size", {"micro_batch"}},
      {"per_device_train_batch_size", {"micro_batch"}},
      {"train_micro_batch_size_per_gpu", {"micro_batch"}},
      {"wall_clock_breakdown", {"profile_ops"}},
      {"steps", {"max_steps"}},
      {"num_steps", {"max_steps"}},
      {"max_iters", {"max_steps"}},
      {"warmup", {"warmup_steps"}},
      {"warmup_iters", {"warmup_steps"}},
      {"weight_decay_rate", {"weight_decay"}},
      {"gradient_accumulation_steps", {"grad_accum"}},
      {"gradient_clipping", {"grad_clip"}},
      {"max_grad_norm", {"grad_clip"}},
      {"eval_interval", {"eval_every"}},
      {"eval_iters", {"eval_batches"}},
      {"lr_decay_iters", {"decay_steps"}},
      {"min_learning_rate", {"min_lr"}},
      {"decay_type", {"decay"}},
      {"lr_scheduler", {"decay"}},
      {"lr_scheduler_type", {"decay"}},
      {"betas", {"beta1", "beta2"}},
      {"gradient_checkpointing", {"activation_checkpointing"}},
      // Mixed precision: the working formats (fp32 master weights and moments whatever they are),
      // and the format gradients are added into across micro-batches (FSDP's reduce_dtype,
      // DeepSpeed's grad_accum_dtype).
      {"bf16", {"param_dtype", "activations"}},
      {"mixed_precision", {"param_dtype", "activations"}},
      {"master_weights", {"param_dtype"}},
      {"grad_accum_dtype", {"grad_shard_dtype"}},
      {"data_types", {"grad_shard_dtype"}},
  };
  for (const auto& [other, ours] : kOtherNames) {
    if (key == other) return ours;
  }
  return {};
}

// DeepSpeed's and FSDP's keys with no key of that meaning here, or one counted in other units:
// what stands for them, said instead of a spelling's guess (reduce_bucket_size's nearest key takes
// MiB, not elements; there is no offload for a guess to find).
const char* other_trainer_note(const std::string& key) {
  static constexpr const char* kBatch =
      "the global batch is 'train.global_batch_tokens', in tokens: sequences x train.seq_len";
  static constexpr const char* kOffload =
      "no CPU or NVMe offload here: 'zero.stage' 3 shards parameters, gradients and optimizer states, and "
      "'train.activation_checkpointing' trades activations for compute";
  static constexpr const char* kLiveUnits =
      "'zero.prefetch_units' and 'zero.reshard_after_forward' decide how many units stay gathered";
  static const std::pair<const char*, const char*> kNotes[] = {
      {"train_batch_size", kBatch},
      {"global_batch_size", kBatch},
      {"zero_optimization", "ZeRO's options are the 'zero' section's keys: 'zero.stage', 'zero.overlap_comm', ..."},
      {"fp16",
       "no fp16 with loss scaling here: bf16, which needs none, through 'precision.param_dtype' and "
       "'precision.activations'"},
      {"offload_optimizer", kOffload},
      {"offload_param", kOffload},
      {"offload_params", kOffload},  // FSDP's CPUOffload field
      {"cpu_offload", kOffload},
      {"reduce_bucket_size",
       "each reduction is a unit's; where gradients pend, as at stages 2-3, 'zero.max_inflight_reduction_mb' "
       "bounds what the reductions in flight hold, in MiB"},
      {"allgather_bucket_size", "each gather is a unit's: 'train.block_units' and 'train.head_chunks' size the units"},
      {"stage3_prefetch_bucket_size", "'zero.prefetch_units' counts the units gathered ahead, not elements"},
      {"stage3_max_live_parameters", kLiveUnits},
      {"stage3_max_reuse_distance", kLiveUnits},
      {"contiguous_gradients", "always so here, with no key: each unit's gradients are one flat buffer"},
      {"sharding_strategy",
       "'zero.stage' (FULL_SHARD 3, SHARD_GRAD_OP 2, NO_SHARD 0) and, for HYBRID_SHARD, 'zero.shard_group_size'"},
      {"reduce_dtype",
       "gradients are reduced in fp32 inside a group whatever the working format; 'zero.cross_group_grad_dtype' "
       "sets hybrid sharding's reduction across the groups, 'zero.grad_shard_dtype' the stored gradient shard's"},
  };
  for (const auto& [other, note] : kNotes) {
    if (key == other) return note;
  }
  return nullptr;
}

}  // namespace

void ConfigReader::reject_unknown_keys() const {
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (known_.count(it.key()) != 0) continue;
    // A key of that very name in another section first (a top-level `lr` is `optim.lr`, not a
    // misspelt `log`), else the nearest of this section's.
    std::string hint;
    if (homes_ != nullptr) {
      if (const auto home = homes_->find(it.key()); home != homes_->end()) {
        std::vector<std::string> elsewhere;
        for (const std::string& h : home->second) {
          if (h != dotted(it.key())) elsewhere.push_back("'" + h + "'");
        }
        if (!elsewhere.empty()) hint = fmt::format(" (did you mean {}?)", fmt::join(elsewhere, " or "));
      }
    }
    // Another trainer's name for a key of this section or another (train.learning_rate is optim.lr).
    if (hint.empty()) {
      std::vector<std::string> named;
      for (const char* ours : our_names_for(it.key())) {
        if (known_.count(ours) != 0) {
          named.push_back(fmt::format("'{}'", dotted(ours)));
        } else if (homes_ != nullptr) {
          if (const auto home = homes_->find(ours); home != homes_->end() && !home->second.empty()) {
            named.push_back(fmt::format("'{}'", *home->second.begin()));
          }
        }
      }
      if (!named.empty()) hint = fmt::format(" (did you mean {}?)", fmt::join(named, " and "));
    }
    if (const char* note = other_trainer_note(it.key()); hint.empty() && note != nullptr) {
      hint = fmt::format(" ({})", note);
    }
    if (const std::string near = nearest_key(it.key(), known_); hint.empty() && !near.empty()) {
      hint = " (did you mean '" + dotted(near) + "'?)";
    }
    throw_input_error("config error in {}: unknown key '{}'{}", source_of(it.key()), dotted(it.key()), hint);
  }
}

std::string nearest_key(const std::string& key, const std::set<std::string>& valid) {
  // Another trainer's name for a key the section has: what it means, before any spelling's guess.
  for (const char* ours : our_names_for(key)) {
    if (valid.count(ours) > 0) return ours;
  }
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, key.size() / 3) + 1;
  for (const std::string& cand : valid) {
    // Levenshtein distance, one row at a time.
    std::vector<std::size_t> row(cand.size() + 1);
    for (std::size_t j = 0; j <= cand.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= key.size(); ++i) {
      std::size_t diag = row[0];
      row[0] = i;
      for (std::size_t j = 1; j <= cand.size(); ++j) {
        const std::size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (key[i - 1] == cand[j - 1] ? 0 : 1)});
        diag = up;
      }
    }
    if (row[cand.size()] < best_distance) {
      best_distance = row[cand.size()];
      best = cand;
    }
  }
  if (!best.empty()) return best;
  // A key that is one word of exactly one valid key's ("every" for every_steps): too far from it
  // by edits, but what it names.
  std::string holder;
  for (const std::string& cand : valid) {
    const bool word =
        cand.starts_with(key + "_") || cand.ends_with("_" + key) || cand.find("_" + key + "_") != std::string::npos;
    if (!word) continue;
    if (!holder.empty()) return "";  // more than one: no guess
    holder = cand;
  }
  return holder;
}

}  // namespace zt
