// A run config's memory prediction (see the header).
#include "engine/app/trainer/run_memory.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/app/checkpoint/async_checkpoint.h"
#include "engine/app/data/choice_file.h"
#include "engine/app/trainer/store_comm.h"
#include "engine/base/core/check.h"
#include "engine/distributed/sharding/shard_layout.h"
#include "kernels/contracts/kernel_scratch.h"
#include "kernels/exec_context.h"
#include "models/model_family.h"

namespace zt {

namespace {

// The store's sharding as the trainer sets it up at `stage` on `world_size` ranks: its options, its
// communicator's staging and its world (a group's under hybrid sharding).
struct StoreSharding {
  ZeroOptions zero;
  ShardingOptions options;
  int ranks = 1;
};

StoreSharding store_sharding(const RunConfig& config, int stage, int world_size, const ShardingOptions& options) {
  StoreSharding s;
  s.options = options;
  s.options.deterministic = s.options.deterministic || config.train.deterministic;
  const StoreCommChoice choice = store_comm_choice(config, world_size);
  s.options.backend = choice.staging;
  s.options.replica_groups = world_size / choice.group_size;  // hybrid sharding: the store's world is a group
  s.options.grad_accum = config.train.grad_accum;
  s.zero = config.zero;
  s.zero.stage = stage;
  s.ranks = choice.group_size;
  return s;
}

// The footprint of `build`'s model under the run's config. On CUDA its workspace takes the largest
// kernel call's scratch ([Note: the kernels' scratch, predicted] in kernels/contracts/kernel_scratch.h):
// the model's calls, and in a training step (`step`) the store's gradient norm over its units.
ModelFootprint run_footprint(const RunConfig& c, const ModelBuild& build, bool step) {
  const ModelSpec spec = c.model_spec();
  ModelFootprint f = predict_footprint(spec, build, c.param_dtype, c.device);
  if (c.device != Device::kCUDA) return f;
  std::int64_t scratch = cuda_call_scratch_bytes(spec, build, c.param_dtype, c.kernel_choices());
  if (step) {
    const auto units = static_cast<std::int64_t>(build_param_table(spec).units().size());
    scratch = std::max(scratch, 4 * (c.zero.fold_in_global_order ? kernel_scratch::exact_sum_of_squares_floats(units)
                                                                 : kernel_scratch::sum_of_squares_floats(units)));
  }
  f.kernel_scratch_bytes = scratch;
  f.workspace_bytes += scratch;
  return f;
}

}  // namespace

StageMemory predict_run_memory(const RunConfig& config, int stage, int world_size, const ShardingOptions& options) {
  const ModelSpec spec = config.model_spec();
  const ModelFootprint footprint = run_footprint(config, config.model_build(), /*step=*/true);
  const StoreSharding s = store_sharding(config, stage, world_size, options);
  const ShardingOptions& o = s.options;
  const ZeroOptions& zero = s.zero;
  StageMemory m = predict_rank_memory(build_param_table(spec), config.param_dtype, footprint,
                                      step_schedule(spec, config.train.activation_checkpointing), zero, s.ranks, o);
  // The trainer's own step collective, the loss and stop vote (two floats all-reduced on the host
  // communicator, MPI on several ranks), runs after every gradient reduction was waited: it adds to
  // nothing, but is the comm_buffers peak where the store stages nothing of its own (fp32 units on
  // NCCL at stages 0-1, or a StagedCommunicator, whose staging is tracked apart). Folding in global
  // order, the losses are all-gathered instead, into untracked host memory.
  if (!zero.fold_in_global_order) {
    m[MemCategory::kCommBuffers] = std::max(
        m[MemCategory::kCommBuffers], host_all_reduce_staging_bytes(kLossAndStopElements, world_size, o.deterministic));
  }
  return m;
}

StepVolume predict_run_volume(const RunConfig& config, int stage, int world_size) {
  const ModelSpec spec = config.model_spec();
  const StoreCommChoice choice = store_comm_choice(config, world_size);
  ZeroOptions zero = config.zero;
  zero.stage = stage;
  StepVolume v = predict_step_volume(build_param_table(spec), config.param_dtype, zero, choice.group_size,
                                     step_schedule(spec, config.train.activation_checkpointing),
                                     config.train.grad_accum, world_size / choice.group_size);
  // Where the store shares the trainer's host communicator, the step's loss and stop vote (an
  // all-reduce of two elements; folding in global order, an all-gather of each rank's micro-batch
  // losses and stop request as doubles) is counted with it.
  if (!choice.hybrid && !choice.device_comm) {
    const std::int64_t words = 2 * (std::int64_t{config.train.grad_accum} + 1);  // doubles as I32 pairs
    const std::int64_t loss_and_stop = zero.fold_in_global_order
                                           ? words * world_size * (world_size - 1) / world_size
                                           : 2 * kLossAndStopElements * (world_size - 1) / world_size;
    v.in_group += loss_and_stop;
    v.bytes_in_group += 4 * loss_and_stop;  // fp32, or I32 words
  }
  return v;
}

namespace {

// `step` less what only a step holds: its gathered units, pending gradients, activations and
// kernels' scratch.
StageMemory outside_a_step(const StageMemory& step) {
  StageMemory m = step;
  m[MemCategory::kParameters] -= step.step_only_param_bytes;
  m[MemCategory::kGradients] -= step.step_only_grad_bytes;
  m[MemCategory::kActivations] = 0;
  m[MemCategory::kWorkspace] -= step.kernel_scratch_bytes;
  return m;
}

}  // namespace

StageMemory predict_setup_memory(const RunConfig& c, const StageMemory& step) {
  StageMemory m = outside_a_step(step);
  m[MemCategory::kWorkspace] -= step.step_only_workspace_bytes;
  // The staging buffers come with the first collective, but for a quantized publish's.
  m[MemCategory::kCommBuffers] = step.publish_comm_bytes;
  m[MemCategory::kWorkspace] += 4 * c.model_spec().family().param_table(c.model_spec()).max_unit_numel();
  return m;
}

std::optional<StageMemory> predict_timed_step_memory(const RunConfig& c, const StageMemory& step) {
  // As ComputeBackend::open_cuda sets KernelResources' timed choices.
  if (c.device != Device::kCUDA || c.train.deterministic) return std::nullopt;
  StageMemory m = step;
  m[MemCategory::kWorkspace] += timed_search_scratch_bytes(c);
  return m;
}

std::int64_t timed_search_scratch_bytes(const RunConfig& c) {
  const ModelSpec spec = c.model_spec();
  const std::int64_t weights =
      std::max(build_param_table(spec).max_unit_numel(), std::int64_t{spec.padded_vocab_size()} * spec.model.n_embd);
  const std::int64_t rows = std::int64_t{c.train.micro_batch} * c.train.seq_len *
                            std::max(spec.family().mlp_width(spec.model), spec.model.n_embd);
  const std::int64_t held = std::min(kTimedScratchLimitBytes, 4 * std::max(weights, rows));
  return held + held / 4;
}

std::int64_t final_gather_buffer_bytes(const RunConfig& c, int world_size) {
  // ShardedAdamW::gather_master's buffer: the unit padded to the optimizer's shards (unsharded at
  // stage 0), on the store's world (a group's under hybrid sharding).
  const int optimizer_ranks = c.zero.stage >= 1 ? store_comm_choice(c, world_size).group_size : 1;
  const std::int64_t largest = build_param_table(c.model_spec()).max_unit_numel();
  return 4 * shard_sizes(largest, optimizer_ranks).padded_numel;
}

StageMemory predict_final_gather_memory(const RunConfig& c, const StageMemory& step, int world_size) {
  StageMemory m = outside_a_step(step);
  m[MemCategory::kWorkspace] += final_gather_buffer_bytes(c, world_size);
  // On the CPU the collectives' staging lives only while a reduction does, and the gather's
  // all-gathers land in its buffer itself. NCCL stages an all-gather into host memory on the
  // device (the unit in fp32, in comm_buffers): a step's staging stays there, not weighed on CUDA
  // (the check weighs device memory; the buffer is host memory) and never run on a GPU.
  if (c.device == Device::kCPU) m[MemCategory::kCommBuffers] = 0;
  return m;
}

namespace {

// `step` while a forwards-only model of `build` runs on the run's store (a sample's, the
// multiple-choice scorer's) on `world_size` ranks, `cache_bytes` of key/value cache beside its
// activations. Its forwards gather units through the store as a step's forward does (stage 3:
// whole units, under the same schedule and prefetch), but free each at its release, no backward
// following (replay_forward); no gradient is pending or reduced, so nothing is staged but a
// quantized gather; the training model's fp32 copies of bf16 units are freed for the model's own
// (in its footprint).
StageMemory forward_only_memory(const RunConfig& c, const StageMemory& step, const ModelBuild& build,
                                std::int64_t cache_bytes, int world_size) {
  const ModelSpec spec = c.model_spec();
  const ModelFootprint model = run_footprint(c, build, /*step=*/false);
  const StoreSharding s = store_sharding(c, c.zero.stage, world_size, {});
  const TransientPeaks forward = replay_forward(
      build_param_table(spec), c.param_dtype, s.zero, s.ranks, s.options.deterministic, s.options.backend,
      step_schedule(spec, c.train.activation_checkpointing).forward, s.options.replica_groups);
  StageMemory m = step;
  m[MemCategory::kParameters] += forward.gathered_params - step.step_only_param_bytes;
  m[MemCategory::kGradients] -= step.step_only_grad_bytes;
  m[MemCategory::kCommBuffers] = forward.comm_staging;
  m[MemCategory::kActivations] = model.activation_bytes + cache_bytes;
  // The context's cuBLASLt workspace, in the model's footprint too, is the run's one; only this
  // model's kernels run, so only their scratch is held.
  const std::int64_t shared = c.device == Device::kCUDA ? kCublasWorkspaceBytes : 0;
  m[MemCategory::kWorkspace] +=
      model.workspace_bytes - shared - step.step_only_workspace_bytes - step.kernel_scratch_bytes;
  m.kernel_scratch_bytes = model.kernel_scratch_bytes;
  return m;
}

}  // namespace

StageMemory predict_sample_memory(const RunConfig& c, const StageMemory& step, int world_size) {
  const ModelSpec spec = c.model_spec();
  const int window = c.train.seq_len;
  const std::int64_t cache = std::int64_t{spec.n_layer()} * window * spec.family().kv_cache_row_width(spec) *
                             static_cast<std::int64_t>(dtype_size_bytes(c.activation_dtype));
  StageMemory m = forward_only_memory(c, step, sampling_build(window, c.activation_dtype), cache, world_size);
  // On CUDA a drawn token's cached attention over the whole window holds its splits' partials.
  if (c.device == Device::kCUDA) {
    const std::int64_t decode = kernel_scratch::cached_attention_bytes(1, 1, spec.model.n_head, window);
    m[MemCategory::kWorkspace] += std::max<std::int64_t>(0, decode - m.kernel_scratch_bytes);
    m.kernel_scratch_bytes = std::max(m.kernel_scratch_bytes, decode);
  }
  // The sample's stop vote (every few draws on several ranks) on the trainer's host communicator.
  m[MemCategory::kCommBuffers] =
      std::max(m[MemCategory::kCommBuffers],
               host_all_reduce_staging_bytes(kLossAndStopElements, world_size, c.train.deterministic));
  return m;
}

namespace {

// The file's shape, read and checked (InputError for a bad file); none without a file.
std::optional<ChoiceShape> read_choice_shape(const RunConfig& c) {
  if (c.data.choice_file.empty()) return std::nullopt;
  // Named by its key, as the run's data names its files.
  return read_naming_key(c, "data.choice_file",
                         [&] { return choice_shape(data::ChoiceFile::load(c.data.choice_file, c.model.vocab_size)); });
}

// An example past model.block_size: the run's data refuses the file (DataSource).
bool over_context(const RunConfig& c, const std::optional<ChoiceShape>& shape) {
  return shape && shape->longest_input > c.model.block_size;
}

}  // namespace

std::optional<ChoiceShape> run_choice_shape(const RunConfig& c) {
  const std::optional<ChoiceShape> shape = read_choice_shape(c);
  return over_context(c, shape) ? std::nullopt : shape;
}

std::optional<ChoiceShape> run_choice_shape_or_note(const RunConfig& c, std::string& note) {
  try {
    const std::optional<ChoiceShape> shape = read_choice_shape(c);
    if (over_context(c, shape)) {
      note = fmt::format(
          "the multiple-choice scorer is left out of the prediction: data.choice_file {} has an example of {} "
          "positions, over model.block_size = {} (train refuses it)",
          c.data.choice_file, shape->longest_input, c.model.block_size);
      return std::nullopt;
    }
    return shape;
  } catch (const InputError& e) {
    note = fmt::format("the multiple-choice scorer is left out of the prediction: {}", e.what());
    return std::nullopt;
  }
}

ChoicePlan run_choice_plan(const RunConfig& c, const ChoiceShape& shape, int world_size) {
  // As evaluation.cpp scores: a training micro-batch's tokens a forward, within the model's context.
  return plan_choices(shape, world_size, std::int64_t{c.train.micro_batch} * c.train.seq_len, c.model.block_size);
}

StageMemory predict_choice_memory(const RunConfig& c, const StageMemory& step, const ChoicePlan& plan, int world_size) {
  StageMemory m = forward_only_memory(c, step, scoring_build(plan.rows_per_forward, plan.seq_len, c.activation_dtype),
                                      0, world_size);
  // The rows' losses summed over the ranks after the scorer's model is gone (score_choices), on the
  // trainer's host communicator as its loss is (predict_run_memory).
  m[MemCategory::kCommBuffers] = std::max(m[MemCategory::kCommBuffers],
                                          host_all_reduce_staging_bytes(plan.rows, world_size, c.train.deterministic));
  return m;
}

std::int64_t predict_checkpoint_staging_bytes(const RunConfig& c, int world_size) {
  if (!c.checkpoint.async) return 0;
  // Under hybrid sharding group 0 writes a checkpoint of its g ranks.
  return ckpt::rank_file_bytes(build_param_table(c.model_spec()), store_comm_choice(c, world_size).group_size, 0);
}

}  // namespace zt
