// The config's zero section (docs/config.md): ZeRO stage, collective scheduling, hybrid sharding and
// quantized collectives, read into RunConfig::zero and written back by to_json.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/app/config/run_config.h"
#include "engine/base/core/config_reader.h"

namespace zt {

// Reads the section into c.zero (c.train and c.source already read: the deterministic mode's
// per-micro-batch reductions follow from them), refusing unknown keys.
void read_zero_section(ConfigReader r, RunConfig& c);
// The section as to_json writes it: a reload gives the same ZeroOptions.
nlohmann::json zero_section_json(const ZeroOptions& zero);
// The section's keys but the stage that differ from their defaults, in name order:
// "cross_group_grad_dtype = int8, prefetch_units = 3" ("" for none). What the run's start line
// names beside the stage (the quantized collectives showed only in the resolved config's JSON).
std::string zero_choices_changed(const ZeroOptions& zero);

// c.zero with the number formats of its wire keys (gather_dtype, cross_group_grad_dtype,
// grad_shard_dtype) as they act on this run: where one acts on nothing (int8 gathers on one rank's
// solo path, fp32 gradient shards of fp32 parameters or below stage 2, a cross-group format
// without two groups) its exact default, as the run's derived notes say. What a resume compares
// (through zero_section_json): a change that changes no bit is none, one that stops a key acting is
// one; and what the deterministic banner promises.
ZeroOptions acting_zero_options(const RunConfig& c);

// The config's names of the quantized collectives' wire dtypes (zero.gather_dtype: "param" or
// "int8"; zero.cross_group_grad_dtype: "fp32", "bf16" or "int8").
const char* gather_dtype_name(WireDType wire);
const char* cross_group_grad_dtype_name(WireDType wire);

}  // namespace zt
