// Exporting a checkpoint's master weights for other tools, one tensor at a time (memory near the
// largest tensor, whatever the model size): a Hugging Face folder (config.json + model.safetensors,
// true vocabulary; GPT2LMHeadModel or LlamaForCausalLM) or, for GPT-2, llm.c's model file.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "engine/app/checkpoint/checkpoint_model.h"
#include "engine/app/checkpoint/checkpoint_reader.h"
#include "engine/base/core/dtype.h"

namespace zt::ckpt {

// DIR/config.json (the family's ModelFamily::hf_config) and DIR/model.safetensors (F32 or BF16, round to nearest even).
void export_hf(const CheckpointReader& reader, const std::string& out_dir, DType dtype);
// llm.c's model file (GPT-2 only; InputError for another family): 256 int32 header (magic
// 20240326, version 3 fp32 / 5 bf16, maxT, V, L, H, C, Vp), then wte, wpe and the per-layer
// tensors stacked over layers, linear weights [out, in].
void export_llmc(const CheckpointReader& reader, const std::string& out_path, DType dtype);

}  // namespace zt::ckpt
