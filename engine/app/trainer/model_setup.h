// Setting a model's parameters up for a run: every rank draws its optimizer shard of each unit from
// the seed (each element a function of its index: the same values whatever the rank count), keeps
// it as fp32 master and working parameters, and the store publishes the full units where its stage
// keeps them.
#pragma once

#include <cstdint>
#include <string>

#include "engine/distributed/optim/sharded_adamw.h"
#include "models/model_family.h"

namespace zt {

// `num_threads`: the OpenMP threads the draws run on (the run's train.num_threads).
void initialize_parameters(const ModelSpec& spec, std::uint64_t seed, ZeroParamStore& store, ShardedAdamW& optimizer,
                           MemoryTracker& tracker, int num_threads);
// The same from a pretrained checkpoint (train.init_from): each rank reads only its optimizer
// shard's elements of each unit, through the same one-unit workspace, and refuses a value that is
// NaN or infinite (InputError naming the tensor and element, on every rank of `world`). Returns the
// bytes it read.
std::int64_t load_pretrained_parameters(const std::string& path, ZeroParamStore& store, ShardedAdamW& optimizer,
                                        MemoryTracker& tracker, Communicator& world);

}  // namespace zt
