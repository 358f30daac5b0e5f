// GPT-2 as a registered model family (models/model_family.h): model.arch = "gpt2".
#pragma once

#include <memory>

#include "models/gpt/gpt_config.h"
#include "models/model_family.h"

namespace zt::gpt {

// GPT-2's hyper-parameters are the keys every family has.
GptConfig gpt_config(const ModelConfig& model);

std::unique_ptr<const ModelFamily> make_family();

}  // namespace zt::gpt
