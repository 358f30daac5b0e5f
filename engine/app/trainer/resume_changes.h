// What a resumed run changes against the run its checkpoint saved: in its trajectory (the keys
// the optimizer, the schedule, the data order and the batch read), in its evaluation, and in a
// deterministic run's bits. `train --resume` refuses the first without --allow-config-change
// (check_resume_fits, resume.h) and notes the others.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/app/config/run_config.h"

namespace zt {

// What a resume from a checkpoint saved with `saved_config` (RunConfig::to_json()) on
// `saved_world_size` ranks would change in the trajectory under `now`: the seed, the learning-rate
// schedule and AdamW's terms, dropout, the sequence length, the working parameters' and the
// activations' dtypes (precision.param_dtype, precision.activations), and the global batch (micro-batch x
// accumulation x ranks, so another rank count at the same global batch is not a change). One
// "key: old -> new" per change; empty when the run continues as it would have. A checkpoint of
// step 0 (`saved_step`: the weights as set up, e.g. a fine-tune's starting point) has read no
// schedule, data or seed and left AdamW's moments at zero: none there (check_resume_fits then
// sets the data aside too).
std::vector<std::string> trajectory_changes(const nlohmann::json& saved_config, int saved_world_size,
                                            std::int64_t saved_step, const RunConfig& now);

// "" where the evaluation reads the same validation windows as the saved run's, else what changed:
// its first train.eval_batches x train.micro_batch windows, so another product scores others and the
// validation losses on either side of the resume are not comparable (the trajectory is the same).
std::string evaluation_window_change(const nlohmann::json& saved_config, const RunConfig& now);
// "" where the evaluation scores the saved run's multiple-choice file (data.choice_file, by path),
// else the change: the accuracies on either side of the resume are another file's.
std::string choice_file_change(const nlohmann::json& saved_config, const RunConfig& now);

// What makes a resumed deterministic run's bits differ from the saved run's while its trajectory
// stays the same (within rounding): the micro-batch, the unit of forward and backward whose
// gradients the fold adds (docs/zero_memory.md), or the mode itself. Empty outside deterministic mode.
// On another rank count, int8 gathers or hybrid sharding on either side. Another device, or on
// the same device other kernels: `now_kernels` (run_kernels: the CPU's BLAS kernels, or the GPU
// and its libraries) against `saved_kernels` (the manifest's extra under run_kernels_key of the
// device; empty where it records none).
std::vector<std::string> deterministic_bit_changes(const nlohmann::json& saved_config, int saved_world_size,
                                                   const RunConfig& now, std::string_view saved_kernels,
                                                   std::string_view now_kernels);

}  // namespace zt
