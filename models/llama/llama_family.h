// The Llama family as a registered model family (models/model_family.h): model.arch = "llama".
#pragma once

#include <memory>

#include "models/llama/llama_config.h"
#include "models/model_family.h"

namespace zt::llama {

// The Llama config of a model section: the shared keys and the family's own (model.family_keys,
// as read_keys resolved them). Throws a JSON error on a missing or mistyped family key.
LlamaConfig llama_config(const ModelConfig& model);

std::unique_ptr<const ModelFamily> make_family();

}  // namespace zt::llama
