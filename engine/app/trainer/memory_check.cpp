// The start-of-run memory check (see the header).
#include "engine/app/trainer/memory_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/app/trainer/run_memory.h"
#include "engine/base/core/check.h"
#include "engine/base/core/memory_tracker.h"
#include "engine/distributed/launch/rendezvous.h"
#include "kernels/compute_backend.h"

namespace zt {

namespace {

constexpr std::int64_t kUnknown = -1;

// A file's first number ("max" and unreadable files give kUnknown).
std::int64_t read_number(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return kUnknown;
  try {
    return static_cast<std::int64_t>(std::stoll(word));
  } catch (const std::exception&) {
    return kUnknown;
  }
}

std::int64_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream fields(line.substr(13));
      long long kib = 0;
      if (fields >> kib) return static_cast<std::int64_t>(kib) * 1024;
    }
  }
  return kUnknown;
}

// The cgroup's limit less its usage: cgroup v2, else v1; kUnknown without a limit.
std::int64_t cgroup_headroom_bytes() {
  std::int64_t limit = read_number("/sys/fs/cgroup/memory.max");
  std::int64_t usage = read_number("/sys/fs/cgroup/memory.current");
  if (limit == kUnknown) {
    limit = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    usage = read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes");
    if (limit >= (std::int64_t{1} << 60)) limit = kUnknown;  // v1's "no limit" is a huge number
  }
  if (limit == kUnknown || usage == kUnknown) return kUnknown;
  return std::max<std::int64_t>(0, limit - usage);
}

}  // namespace

int ranks_sharing_gpu(int node_ranks, int gpus, int device_index) {
  gpus = std::max(1, gpus);
  return std::max(1, node_ranks / gpus + (device_index < node_ranks % gpus ? 1 : 0));
}

MemoryOffer host_memory_offer(std::int64_t mem_available, std::int64_t cgroup_headroom, int node_ranks) {
  std::int64_t bytes = mem_available;
  if (cgroup_headroom != kUnknown && (bytes == kUnknown || cgroup_headroom < bytes)) bytes = cgroup_headroom;
  node_ranks = std::max(1, node_ranks);
  if (bytes != kUnknown) bytes /= node_ranks;
  MemoryOffer offer;
  offer.bytes = bytes;
  offer.what = fmt::format(
      "host memory available {}(MemAvailable {}{})",
      node_ranks > 1 ? fmt::format("to each of this node's {} ranks ", node_ranks) : "",
      mem_available == kUnknown ? "unknown" : format_bytes(mem_available),
      cgroup_headroom == kUnknown ? "" : fmt::format(", cgroup headroom {}", format_bytes(cgroup_headroom)));
  return offer;
}

MemoryOffer memory_offered(const RunConfig& c, int device_index) {
  MemoryOffer offer;
  if (const char* test = std::getenv("ZT_TEST_AVAILABLE_BYTES")) {
    offer.bytes = static_cast<std::int64_t>(std::atoll(test));
    offer.what = "ZT_TEST_AVAILABLE_BYTES";
    return offer;
  }
  if (c.device == Device::kCUDA) {
    // comm.backend = "mpi" on CUDA is for several ranks on one GPU: local ranks take the node's GPUs
    // round robin (cuda_device_for_local_rank), and each of a GPU's ranks is offered its share.
    // NCCL runs one rank a GPU (a rank may see only its own through CUDA_VISIBLE_DEVICES, and the
    // launcher need not say how many ranks a node runs), so there a rank is offered all of it.
    const int sharing = c.comm_backend != CommBackend::kMpi
                            ? 1
                            : ranks_sharing_gpu(ranks_on_this_node(c.world_size), cuda_device_count(), device_index);
    offer.bytes = cuda_device_free_bytes(device_index);
    if (offer.bytes > 0 && sharing > 1) offer.bytes /= sharing;
    offer.what = sharing > 1 ? fmt::format("each of the {} ranks sharing cuda:{} (its free memory over them)", sharing,
                                           device_index)
                             : fmt::format("the free memory of cuda:{}", device_index);
    return offer;
  }
  return host_memory_offer(mem_available_bytes(), cgroup_headroom_bytes(), ranks_on_this_node(c.world_size));
}

RequiredMemory::Phase RequiredMemory::phase(std::optional<Phase> leaving_out) const {
  std::optional<Phase> largest;
  auto consider = [&](Phase p, bool weighed) {
    if (!weighed || p == leaving_out) return;
    if (!largest || of(p).total_bytes() > of(*largest).total_bytes()) largest = p;
  };
  consider(weighs_timed_step ? Phase::kTimedStep : Phase::kStep, true);  // the first of them on a tie
  consider(Phase::kSetup, true);
  consider(Phase::kFinalGather, weighs_final_gather);
  consider(Phase::kSample, weighs_sample);
  consider(Phase::kChoices, weighs_choices);
  return largest.value_or(Phase::kStep);
}

const StageMemory& RequiredMemory::of(Phase p) const {
  switch (p) {
    case Phase::kTimedStep: return timed_step;
    case Phase::kSetup: return setup;
    case Phase::kFinalGather: return final_gather;
    case Phase::kSample: return sample;
    case Phase::kChoices: return choices;
    case Phase::kStep: break;
  }
  return step;
}

RequiredMemory required_memory(const RunConfig& c, int world_size, const std::optional<ChoiceShape>& choices) {
  RequiredMemory r;
  r.step = predict_run_memory(c, c.zero.stage, world_size);
  r.setup = predict_setup_memory(c, r.step);
  if (const std::optional<StageMemory> timed = predict_timed_step_memory(c, r.step)) {
    r.weighs_timed_step = true;
    r.timed_step = *timed;
  }
  r.has_final_gather = c.log.final_weights;
  r.weighs_final_gather = r.has_final_gather && c.device == Device::kCPU;
  if (r.has_final_gather) r.final_gather = predict_final_gather_memory(c, r.step, world_size);
  r.weighs_sample = c.log.samples();
  if (r.weighs_sample) r.sample = predict_sample_memory(c, r.step, world_size);
  r.weighs_choices = choices.has_value();
  if (r.weighs_choices)
    r.choices = predict_choice_memory(c, r.step, run_choice_plan(c, *choices, world_size), world_size);
  r.staging = c.device == Device::kCPU ? predict_checkpoint_staging_bytes(c, world_size) : 0;
  return r;
}

std::int64_t predicted_required_bytes(const RunConfig& c, int world_size, const std::optional<ChoiceShape>& choices) {
  return required_memory(c, world_size, choices).bytes();
}

namespace {

// The run's other ZeRO stages on its ranks, as the memory check would weigh them: a stage does not
// always need less than a lower one (stage 2's reduced shards in flight can pass stage 1's whole
// gradients), so "raise zero.stage" is said only where a higher stage needs less, and a stage that
// fits the offer is named (the lowest: the least communication). Stages the config's rules refuse
// (int8 gathers at stage 0) are not weighed.
struct StageAdvice {
  std::optional<std::pair<int, std::int64_t>> fitting;  // (stage, bytes)
  bool higher_needs_less = false;
};

StageAdvice other_stages(const RunConfig& c, int world_size, std::int64_t offer, std::int64_t needs) {
  StageAdvice advice;
  if (world_size == 1) return advice;  // every stage holds the whole model on one rank
  for (int stage = 0; stage <= 3; ++stage) {
    if (stage == c.zero.stage) continue;
    RunConfig other = c;
    other.zero.stage = stage;
    try {
      check_trainable(other);
    } catch (const InputError&) {
      continue;
    }
    const std::int64_t bytes = required_memory(other, world_size, run_choice_shape(other)).bytes();
    if (bytes <= offer && !advice.fitting) advice.fitting = std::make_pair(stage, bytes);
    if (stage > c.zero.stage && bytes < needs) advice.higher_needs_less = true;
  }
  return advice;
}

}  // namespace

void check_memory_fits(const RunConfig& c, int world_size, int device_index) {
  if (!c.train.check_memory) return;
  const MemoryOffer offer = memory_offered(c, device_index);
  if (offer.bytes < 0) return;  // nothing to compare with: the run goes on, as before
  const RequiredMemory required = required_memory(c, world_size, run_choice_shape(c));
  if (required.bytes() <= offer.bytes) return;
  const StageMemory& predicted = required.predicted();
  const std::int64_t staging = required.staging;
  std::string categories;
  for (int i = 0; i < kNumMemCategories; ++i) {
    const auto cat = static_cast<MemCategory>(i);
    if (predicted[cat] == 0) continue;
    categories +=
        fmt::format("{}{} {}", categories.empty() ? "" : ", ", mem_category_name(cat), format_bytes(predicted[cat]));
  }
  if (staging > 0) categories += fmt::format(", checkpoint staging {}", format_bytes(staging));
  // What could still lower it: a stage already at 3, or activations all recomputed, is not named;
  // nor a higher stage on one rank, where every stage holds the whole model (more ranks then, at a
  // stage that shards: stage 0 replicates whatever the rank count).
  const RequiredMemory::Phase phase = required.phase();
  // Setting the weights up, and gathering them into final.safetensors, hold the model states and a
  // unit's buffers, no activations: a smaller batch or recomputation does not lower them, so
  // neither is offered (nor blamed) there.
  const bool setup = phase == RequiredMemory::Phase::kSetup || phase == RequiredMemory::Phase::kFinalGather;
  const StageAdvice stages = other_stages(c, world_size, offer.bytes, required.bytes());
  const bool recompute_left = !setup && c.train.activation_checkpointing.kind != CheckpointPolicy::Kind::kAll;
  std::vector<std::string_view> keys;
  if (!setup) keys = {"train.micro_batch", "train.seq_len"};
  if (stages.fitting || stages.higher_needs_less) keys.push_back("zero.stage");
  if (recompute_left) keys.push_back("train.activation_checkpointing");
  // The model's shape (or the folder it comes from) and the dtypes size every category: a --set of
  // one of them is named too (not of keys that size nothing, such as model.rope_theta).
  for (const std::string_view key :
       {"model.arch", "model.n_layer", "model.n_embd", "model.n_head", "model.n_kv_head", "model.vocab_size",
        "model.block_size", "model.intermediate_size", "model.tie_embeddings", "model.dropout", "train.init_from",
        "precision.param_dtype", "precision.activations", "precision.matmul", "precision.attention",
        "precision.gelu_epilogue"}) {
    keys.push_back(key);
  }
  const std::string sources = c.sources_of(keys);
  // Bytes too where the two round alike ("needs 11.02 MiB ... offers: 11.02 MiB").
  const auto [needs, offers] = format_bytes_apart(required.bytes(), offer.bytes);
  // A micro-batch of one sequence lowers no further.
  const std::string lower =
      setup ? std::string("shrink the model (its weights and optimizer states need this without activations)")
      : c.train.micro_batch > 1
          ? fmt::format("lower train.micro_batch (with train.grad_accum to keep the batch) or train.seq_len (here {})",
                        c.train.seq_len)
          : fmt::format("lower train.seq_len (here {}; train.micro_batch is 1)", c.train.seq_len);
  // Ranks lower the model states only at a stage that shards (stage 0 replicates them).
  const std::string stage_move = stages.fitting
                                     ? fmt::format("set zero.stage = {} (it needs {})", stages.fitting->first,
                                                   format_bytes(stages.fitting->second))
                                 : stages.higher_needs_less ? "raise zero.stage"
                                                            : "";
  const std::string shard = c.zero.stage == 0 ? (stage_move.empty() ? "add ranks at a higher zero.stage"
                                                                    : stage_move + ", add ranks at a higher zero.stage")
                                              : (stage_move.empty() ? "add ranks" : stage_move + ", add ranks");
  throw_input_error(
      "config error in {}: the run needs {} per rank at ZeRO stage {} on {} rank(s){} ({}), more than "
      "{} offers: {}; {}, {}{}{}, or set train.check_memory = false to try anyway",
      sources, needs, c.zero.stage, world_size,
      phase == RequiredMemory::Phase::kTimedStep     ? " in its first step, whose kernels time their choices (at most)"
      : phase == RequiredMemory::Phase::kSetup       ? " to set its weights up"
      : phase == RequiredMemory::Phase::kFinalGather ? " to gather its final weights after the last step"
      : phase == RequiredMemory::Phase::kSample      ? " to sample text (at most)"
      : phase == RequiredMemory::Phase::kChoices     ? " to score its multiple-choice examples (data.choice_file)"
                                                     : "",
      categories, offer.what, offers, lower, shard,
      !recompute_left ? ""
      : c.train.activation_checkpointing.kind == CheckpointPolicy::Kind::kNone
          ? ", checkpoint activations (train.activation_checkpointing)"
          : ", checkpoint every block's activations (train.activation_checkpointing = \"all\")",
      phase == RequiredMemory::Phase::kFinalGather &&
              required.of(required.phase(RequiredMemory::Phase::kFinalGather)).total_bytes() + required.staging <=
                  offer.bytes
          ? ", set log.final_weights = false"
      : phase == RequiredMemory::Phase::kSample
          ? ", set log.sample_tokens = 0 (or lower train.seq_len: the sample's window and cache)"
      : phase == RequiredMemory::Phase::kChoices
          ? ", leave data.choice_file out (zerotrain eval --choices scores a checkpoint's weights apart)"
      : phase == RequiredMemory::Phase::kTimedStep
          ? ", set train.deterministic = true (nothing timed: the kernels' reproducible choices)"
          : "");
}

}  // namespace zt
