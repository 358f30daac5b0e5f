// The config's train and optim sections (docs/config.md): the batch terms, the run's length and
// seed, its kernels' choices, and the optimizer with its learning-rate schedule, whose default
// decay length is the run's.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "engine/app/config/run_config.h"
#include "engine/base/core/config_reader.h"

namespace zt {

// Reads the train section into c.train (c.model and c.world_size already read: the sequence's
// default length and the batch terms follow from them), deriving the missing batch term and
// noting each derived value in c.derived; refuses unknown keys.
void read_train_section(ConfigReader r, RunConfig& c);
// Reads the optim section into c.optim (c.train read: the decay ends with train.max_steps by
// default); refuses unknown keys.
void read_optim_section(ConfigReader r, RunConfig& c);

// What would split `global` tokens over seq_len x world_size: the micro-batch nearest the config's
// from below (else above) whose sequences divide it with a grad_accum in its range,
// "train.micro_batch = M splits it: grad_accum A" (`split` true), or "no micro-batch splits it ..."
// saying why none does (not a multiple of seq_len x ranks, past any global batch, or every split's
// accumulation past its largest).
struct BatchSplit {
  std::string text;
  bool split = false;
};
BatchSplit batch_split(int config_micro_batch, int seq_len, int world_size, std::int64_t global);
// batch_split's text as a refusal's tail: " (TEXT)" for a split, "; TEXT" for none. For the batch
// terms' refusals, the config's and plan's.
std::string batch_split_hint(int config_micro_batch, int seq_len, int world_size, std::int64_t global);

// The smallest micro-batch whose sequences split `global` tokens over seq_len x world_size with a
// grad_accum in its range (micro-batch 1 where the sequences a rank are few enough), 0 where none
// does.
int smallest_splitting_micro_batch(int seq_len, int world_size, std::int64_t global);

// OMP_WAIT_POLICY=passive (read as libgomp reads it, any case): waiting threads sleep rather than
// spin, so threads past the cores cost little.
bool omp_waits_passively();

// The thread count OMP_NUM_THREADS gives (its first, the outer regions', of a list), or 0 where it
// is unset or no count from 1 to 1024: what train.num_threads left out takes, and sample and eval.
int omp_num_threads_from_environment();

// The sections as to_json writes them: a reload gives the same TrainConfig and OptimConfig.
// (train.global_batch_tokens is left out: RunConfig::run_file_json adds it where it was given.)
nlohmann::json train_section_json(const TrainConfig& t);
nlohmann::json optim_section_json(const OptimConfig& o);

}  // namespace zt
