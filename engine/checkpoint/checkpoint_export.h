// Exporting a GPT checkpoint's master weights for other tools, one tensor at a time (memory near
// the largest tensor, whatever the model size): a Hugging Face GPT2LMHeadModel folder
// (config.json + model.safetensors, true vocabulary) or llm.c's model file.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "engine/checkpoint/checkpoint_reader.h"
#include "engine/core/dtype.h"
#include "models/gpt/gpt_config.h"
#include "models/gpt/gpt_params.h"

namespace zt::ckpt {

// The manifest's "model" object for a GPT model (what a trainer passes in CheckpointMeta::model).
nlohmann::json gpt_model_json(const gpt::GptConfig& config);
// The GPT config a checkpoint was saved from; InputError if the manifest's model object is not a
// GPT config or its parameter table is not that model's.
gpt::GptConfig gpt_config_of(const CheckpointReader& reader);
// The unit layout the checkpoint's run used (train.head_chunks and train.block_units; 1 where its
// config has none): the units its shards are of (gpt_params.h), as gpt_config_of checks.
gpt::UnitLayout unit_layout_of(const CheckpointReader& reader);

// DIR/config.json and DIR/model.safetensors (F32 or BF16, round to nearest even).
void export_hf(const CheckpointReader& reader, const std::string& out_dir, DType dtype);
// llm.c's model file: 256 int32 header (magic 20240326, version 3 fp32 / 5 bf16, maxT, V, L, H,
// C, Vp), then wte, wpe and the per-layer tensors stacked over layers, linear weights [out, in].
void export_llmc(const CheckpointReader& reader, const std::string& out_path, DType dtype);

}  // namespace zt::ckpt
