// The Hugging Face config.json of a model: GPT2LMHeadModel for GPT-2, LlamaForCausalLM for a
// Llama. `ckpt export --format hf` writes it beside the weights; debug-state puts it in its file's
// metadata (hf_config), so the parity tests build the reference from what transformers would read.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/base/core/dtype.h"
#include "models/model_family.h"

namespace zt {

// `dropout`: GPT-2's (model.dropout); `dtype`: the weights' torch_dtype (F32 or BF16).
nlohmann::ordered_json hf_config_json(const ModelSpec& spec, double dropout, DType dtype);

}  // namespace zt
