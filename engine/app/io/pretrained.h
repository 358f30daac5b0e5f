// Pretrained weights in (train.init_from, sample --from): a Hugging Face folder (config.json and
// model.safetensors, or model-0000k-of-0000n.safetensors shards with their index; F32, BF16 or
// F16 tensors; GPT2LMHeadModel or LlamaForCausalLM) or an llm.c model file (gpt2_124M.bin, fp32 or
// bf16). The model's shape comes from the checkpoint; its tensors are read in ranges, so a rank
// reads only what its own shard holds (a stage-3 rank never holds the whole model).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "engine/base/core/param_table.h"

namespace zt {

// The model section a checkpoint describes ("arch" and the family's keys), and what it is, for
// messages ("Hugging Face GPT2LMHeadModel folder"). InputError naming the path and the fault.
struct PretrainedModel {
  nlohmann::json model_keys;
  std::string description;
  std::string source;  // what holds the keys, for errors in them: the folder's config.json, or the file
  // A Hugging Face config's bos_token_id, eos_token_id and pad_token_id (the integers it sets); a
  // run without a tokenizer of its own carries them into its exports.
  nlohmann::json special_token_ids = nlohmann::json::object();
};
PretrainedModel read_pretrained_model(const std::string& path);

class PretrainedReader {
 public:
  // Opens the checkpoint's tensors and checks them against `table` (the model its config
  // describes): every tensor present in its Hugging Face shape, and nothing else but the buffers
  // Hugging Face saves beside the weights. InputError naming the file and the tensor.
  static std::unique_ptr<PretrainedReader> open(const std::string& path, const ParamTable& table);
  virtual ~PretrainedReader() = default;

  // Elements [begin, end) of tensor `name` in its Hugging Face layout (row-major hf_shape) as fp32.
  virtual void read(const std::string& name, std::int64_t begin, std::int64_t end, float* out) = 0;
  // Bytes read from the checkpoint's files so far (the tests bound what a shard reads).
  std::int64_t bytes_read() const { return bytes_read_; }

 protected:
  std::int64_t bytes_read_ = 0;
};

// Elements [begin, end) of unit `unit`'s flat buffer from the checkpoint, into unit_data + begin:
// each parameter's part of the range from its tensor, padded vocabulary rows zero.
void read_pretrained_unit(PretrainedReader& reader, const ParamTable& table, int unit, std::int64_t begin,
                          std::int64_t end, float* unit_data);

}  // namespace zt
