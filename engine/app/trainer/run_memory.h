// The memory prediction for a run config: its model's parameter table, footprint and step
// schedule (models/model_family.h) under the config's zero options, precision and device, fed to the
// model-agnostic ZeRO arithmetic of engine/distributed/sharding/memory_model.h. The trainer's memory check and
// report and the `memory` command predict through it.
#pragma once

#include <optional>
#include <string>

#include "engine/app/config/run_config.h"
#include "engine/app/trainer/choice_plan.h"
#include "engine/distributed/sharding/memory_model.h"

namespace zt {

// Elements of the trainer's own step collective on the host communicator: the loss and the stop
// vote (Trainer's all_reduce_loss_and_stop), whose staging the prediction counts.
constexpr std::int64_t kLossAndStopElements = 2;

// The config's model, micro_batch, seq_len, checkpointing, dtypes, device and zero options, at
// `stage` on `world_size` ranks. The communicator's staging follows the trainer's choice
// (store_comm_choice), and train.deterministic adds to options.deterministic.
StageMemory predict_run_memory(const RunConfig& config, int stage, int world_size, const ShardingOptions& options = {});

// What setting the weights up holds at its peak, before step 1 (trainer/model_setup: a random
// start, or train.init_from's load): the step's persistent model states and workspace (`step`,
// as predict_run_memory gives it, less what only a step holds: gathered units, pending gradients,
// activations, the collectives' staging, bf16 parameters' fp32 unit copies for fp32-activation
// kernels), and one more unit in fp32 on the host as workspace,
// which every unit passes through. With few activations and a large
// unit (a big vocabulary's token table) it is more than a step's peak.
StageMemory predict_setup_memory(const RunConfig& config, const StageMemory& step);

// A bound of what a step holds where its kernels time their choices (on CUDA without
// train.deterministic: the first call of each product, bias-gradient and norm-backward shape, in
// the run's first step): `step` with timed_search_scratch_bytes more workspace, which the
// prediction does not count (later calls find their choices kept). Elsewhere nothing is timed:
// nullopt.
std::optional<StageMemory> predict_timed_step_memory(const RunConfig& config, const StageMemory& step);

// The most scratch one of those timings holds at once (kernels/cuda: lt_gemm.cu, bias_grad.cu,
// norm_rows_choice.cpp): a product's or a bias gradient's output, or a norm backward's dinp rows,
// each within kTimedScratchLimitBytes and no larger than the step's widest output (a weight
// matrix's gradient in fp32, or micro_batch x seq_len rows of the MLP's width in fp32), and a
// quarter more for the norm's fp32 partials (2 x cols floats per 32-row chunk: an eighth of bf16
// rows' bytes) and the bias gradient's sums. A timing runs inside one call, whose own scratch
// (the timed norm's partials, a product's copies) the step's largest kernel call already bounds.
std::int64_t timed_search_scratch_bytes(const RunConfig& config);

// What the final gather holds at its peak (log.final_weights: engine/app/io/final_weights), after
// the last step: what a step leaves allocated (`step` less what only a step holds: activations,
// gathered units, pending gradients and, on the CPU, the collectives' staging, which lives only
// while a reduction does; on CUDA NCCL stages the gathered unit on the device, left as a step's
// staging; the model's workspace and the fp32 copies of bf16 units stay), and one unit's fp32
// master gathered whole on the host, at its padded length (the optimizer's shards at
// config.zero.stage 1-3, under hybrid sharding one group's), in workspace: the largest unit's. Its
// workspace is a step's and that buffer, the run's largest; its sum is above a step's only where a
// large unit meets few activations.
StageMemory predict_final_gather_memory(const RunConfig& config, const StageMemory& step, int world_size);

// An upper bound of what a sample holds on `world_size` ranks (log.sample_tokens > 0;
// engine/app/trainer/text_sampler): what stays between steps and the units a forward that no
// backward follows gathers (stage 3; replay_forward), no collective's staging but a quantized
// gather's and the stop vote's, the training model's fp32 unit copies freed for the sampling model's, whose workspace
// and activations are its footprint at the run's seq_len
// (the longest window it builds) with a key/value cache of seq_len positions beside them (the
// window and the cache are not both that long at once: a bound, for the memory check, which a
// sample past a step that keeps very few activations can otherwise pass).
StageMemory predict_sample_memory(const RunConfig& config, const StageMemory& step, int world_size);

// data.choice_file's shape, read (and checked: InputError for a bad file) from the file, for the
// scorer's prediction; none without one, or where its longest example is over model.block_size
// (a run the data's own check refuses). Callers predicting many configs read it once.
std::optional<ChoiceShape> run_choice_shape(const RunConfig& config);
// The same for a prediction made away from the run (zerotrain memory, plan): a file that cannot be
// read here is left out of it, said in `note`, rather than refusing the prediction.
std::optional<ChoiceShape> run_choice_shape_or_note(const RunConfig& config, std::string& note);

// How a run's evaluations cut the multiple-choice rows on `world_size` ranks (plan_choices at a
// training micro-batch's tokens a forward, within model.block_size).
ChoicePlan run_choice_plan(const RunConfig& config, const ChoiceShape& shape, int world_size);

// What scoring the multiple-choice examples holds at its peak per category (every evaluation,
// data.choice_file; engine/app/trainer/choice_eval) on `world_size` ranks: as a sample's, what
// stays between steps and the units a forward that no backward follows gathers, the training
// model's fp32 unit copies freed for the scorer model's, whose workspace and activations are its
// footprint at `plan`'s rows and seq_len (no cache): run_choice_plan's, the one the run takes, so
// this is the scorer's peaks, not a bound; its comm_buffers are the larger of a quantized gather's
// staging and the rows' losses' all-reduce, which comes after its model is freed (its sum counts
// them beside the rest, as a step's sum its categories' peaks).
// With few activations in a step (every block checkpointed, a short train.seq_len) and longer
// examples it is more than a step's.
StageMemory predict_choice_memory(const RunConfig& config, const StageMemory& step, const ChoicePlan& plan,
                                  int world_size);

// 4 x the largest unit padded to the optimizer's shards at config.zero.stage: the final gather's
// buffer (ShardedAdamW::gather_master).
std::int64_t final_gather_buffer_bytes(const RunConfig& config, int world_size);

// The elements one rank sends per optimizer step through the store's communicator at `stage`
// (predict_step_volume): inside its group and across the groups under hybrid sharding, all of it
// in_group otherwise, and their bytes. Each step's train record has them measured
// (comm_elements_sent and comm_bytes_sent, and per hop).
StepVolume predict_run_volume(const RunConfig& config, int stage, int world_size);

// checkpoint.async's staging on the fullest rank (rank 0's file: its N-way slice of the fp32
// master, exp_avg and exp_avg_sq; g-way under hybrid sharding, whose group 0 writes), held in host
// memory for the whole run; 0 without it. The same
// at every stage. Apart from the categories above (host memory, also on CUDA, where it is pinned,
// and the pinned allocator rounds the block up to its size class: up to 2 MiB more, not counted).
std::int64_t predict_checkpoint_staging_bytes(const RunConfig& config, int world_size);

}  // namespace zt
