// The resolved configuration of a run, read from a JSON file plus --set overrides. Sections:
// model, train, precision, optim (later issues add data, zero, checkpoint, log). Every key is
// documented in docs/config.md; unknown keys, wrong types and out-of-range values are errors.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "kernels/cpu/adamw.h"
#include "models/gpt/gpt_config.h"

namespace zt {

struct TrainConfig {
  int micro_batch = 4;  // sequences per forward/backward (B)
  int seq_len = 0;      // tokens per sequence (T); 0 means model.block_size
  std::uint64_t seed = 1337;
  int num_threads = 0;  // CPU threads for kernels and BLAS; 0 means every core
  gpt::CheckpointPolicy activation_checkpointing;
};

struct RunConfig {
  std::string source;  // the file it came from, for messages
  Device device = Device::kCPU;
  gpt::GptConfig model;
  TrainConfig train;
  DType param_dtype = DType::kF32;  // f32, or bf16 with fp32 master weights
  cpu::AdamWHyper optim;            // lr, betas, eps, weight_decay

  nlohmann::json to_json() const;
};

// Reads `path`, applies each "section.key=value" override in order, validates, resolves defaults.
// Throws InputError with a one-line message naming the file and key on any problem.
RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides);

// Same, from a document already in memory (tests; `source` names it in messages).
RunConfig parse_run_config(nlohmann::json doc, const std::string& source);

}  // namespace zt
