// The trainer's two calls: save the optimizer state a ZeroParamStore + ShardedAdamW hold (any
// stage), and restore it into a fresh pair on any number of ranks and any stage — master, AdamW
// moments and step count, then working parameters re-derived from the master and published.
#pragma once

#include <string>

#include "engine/app/checkpoint/async_checkpoint.h"
#include "engine/app/checkpoint/checkpoint_reader.h"
#include "engine/app/checkpoint/checkpoint_writer.h"
#include "engine/distributed/optim/sharded_adamw.h"

namespace zt::ckpt {

// Collective over the store's communicator. meta.position.optimizer_step, zero_stage and
// param_dtype are filled from the optimizer and store; the rest is the caller's.
SaveResult save_training_state(Communicator& comm, const std::string& folder, const ZeroParamStore& store,
                               const ShardedAdamW& optimizer, CheckpointMeta meta, int keep_last);
// The same save started asynchronously on `saver`'s communicator (async_checkpoint.h): this rank's
// state copied from the optimizer's memory (the GPU's on CUDA) into the staging buffer, then
// written in the background; returns the seconds the caller was blocked. No save may be in flight.
double start_training_state_save(AsyncCheckpointer& saver, const std::string& folder, const ZeroParamStore& store,
                                 const ShardedAdamW& optimizer, CheckpointMeta meta, int keep_last);

// Loads this rank's shards (reading only what they overlap), sets the step count and rebuilds
// the working parameters from the masters: this rank's work alone, no collective. InputError for
// another model or a damaged checkpoint (a shard holding NaN).
void load_training_state(const CheckpointReader& reader, ZeroParamStore& store, ShardedAdamW& optimizer);
// load_training_state, then publishes the working parameters (collective).
void restore_training_state(const CheckpointReader& reader, ZeroParamStore& store, ShardedAdamW& optimizer);

}  // namespace zt::ckpt
