// Exporting a checkpoint's master weights for other tools, one tensor at a time (memory near the
// largest tensor, whatever the model size): a Hugging Face folder (config.json + model.safetensors,
// true vocabulary; GPT2LMHeadModel or LlamaForCausalLM) or, for GPT-2, llm.c's model file.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/app/checkpoint/checkpoint_model.h"
#include "engine/app/checkpoint/checkpoint_reader.h"
#include "engine/base/core/dtype.h"

namespace zt::ckpt {

// The directory of the run that saved the checkpoint in `checkpoint_dir` (its tokenizer files,
// vocab.json), where export_hf and `zerotrain sample --ckpt` read the run's text: the folder above
// its checkpoint folder where that is a run's (the default layout <run_dir>/checkpoints, or a
// checkpoint.dir inside the run directory), so a run moved with its checkpoints is still found;
// else the run directory the manifest records (extra.run_dir, absolute), where checkpoint.dir put
// them elsewhere; "" where that directory is gone.
std::string run_directory_of(const std::string& checkpoint_dir, const Manifest& manifest);

// The special tokens' ids (bos_token_id, eos_token_id, pad_token_id) an HF export of the run in
// `run_dir` writes into config.json, and where `zerotrain sample` stops: its tokenizer's; those the
// model it started from gave (`carried`, its checkpoints' extra.special_token_ids) where the run
// has no tokenizer and trained on no vocabulary of its own, or where the model's list of ids
// (an instruct model's eos_token_id) holds the tokenizer's.
nlohmann::json run_special_token_ids(const std::string& run_dir, const nlohmann::json& carried);

// What export_hf wrote in its folder.
struct HfExport {
  std::vector<std::string> files;            // model.safetensors, or model-0000k-of-0000n.safetensors
  std::vector<std::string> tokenizer_files;  // copied from the run directory, or made of its vocab.json
  // Tokenizer files in the folder that no export recorded writing (a user's, an older export's),
  // kept, where this export writes no file of that name: said, as they may number another model's tokens.
  std::vector<std::string> kept_tokenizer_files;
  bool tokenizer_from_vocab = false;  // the latter
  std::string run_dir;                // where they were looked for (run_directory_of; "" for none)
  std::int64_t total_bytes = 0;       // tensor data
};
// DIR/config.json (the family's ModelFamily::hf_config) and the tensors (F32 or BF16, round to
// nearest even) in DIR/model.safetensors, or, past max_shard_bytes, in shards of at most that much
// (a larger tensor alone) with model.safetensors.index.json, as save_pretrained writes them; one
// tensor in memory at a time. The tokenizer files of `text_dir` (the run directory, run_directory_of,
// or where the checkpoint's own vocabulary now is; "" for none) are copied.
HfExport export_hf(const CheckpointReader& reader, const std::string& out_dir, DType dtype,
                   std::int64_t max_shard_bytes, const std::string& text_dir);
// llm.c's model file (GPT-2 only; InputError for another family): 256 int32 header (magic
// 20240326, version 3 fp32 / 5 bf16, maxT, V, L, H, C, Vp), then wte, wpe and the per-layer
// tensors stacked over layers, linear weights [out, in].
void export_llmc(const CheckpointReader& reader, const std::string& out_path, DType dtype);

}  // namespace zt::ckpt
