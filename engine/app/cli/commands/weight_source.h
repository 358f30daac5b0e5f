// Where a model outside a training run takes its weights from (`zerotrain sample`, `eval`):
// the weights a run left in its directory (--run), a sharded checkpoint (--ckpt) or pretrained
// weights (--from), resolved from the flags and the source's own config or manifest without
// loading any weights, so that a bad flag or prompt fails before the slow part. The model itself:
// standalone_model.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/app/cli/commands/arg_parser.h"
#include "engine/app/config/run_config.h"
#include "models/model_family.h"

namespace zt::ckpt {
class CheckpointReader;
}  // namespace zt::ckpt

namespace zt::cli {

// Declares --run, --ckpt, --from, --device and --dtype on `parser` (`what`: what the weights are for).
void add_weight_flags(ArgParser& parser, const std::string& what);

// Where the weights come from, read from the flags and the source's own config or manifest
// without loading any weights, so a bad flag or prompt fails before the slow part.
struct WeightSource {
  enum class Kind { kRun, kCheckpoint, kPretrained };
  Kind kind = Kind::kRun;
  std::string path;  // the run directory, the resolved checkpoint, or the pretrained folder or file
  ModelSpec spec;
  // The store's: a run's or checkpoint's working parameter dtype (a run computes with those, so its
  // samples and scores come out as the run's own); pretrained weights in the activations' dtype.
  DType param_dtype = DType::kF32;
  int context = 1;  // the most positions a model attends to: a run's seq_len (--run, --ckpt), else block_size
  int num_threads = 1;
  std::string text_dir;  // where tokenizer.json or vocab.json lie, "" where nowhere
  Device device = Device::kCPU;
  int device_index = 0;  // the GPU, on CUDA
  DType activations = DType::kF32;
  std::vector<std::string> notes;  // for stderr: which checkpoint "latest" resolved to
  // --ckpt: the resolved checkpoint, open from its resolution to the model's load. The reader's
  // shared hold on its directory keeps a live run's keep_last from deleting it in between; the
  // commands release it once their model is loaded.
  std::shared_ptr<const ckpt::CheckpointReader> checkpoint;
  // The tokens whose draw ends a sample, as transformers' generate stops at them: the eos_token_id
  // (one, or an instruct model's list) of a pretrained folder's generation_config.json, else of
  // its config.json; of a run or checkpoint, the one its HF export writes (run_special_token_ids).
  // Empty for an llm.c model file and a run without a tokenizer or pretrained model to name one,
  // and for every command but sample (eval ends nothing: its files are not read).
  std::vector<std::int32_t> end_of_text_ids;
  // The run's config as it saved it (its config.json, a checkpoint's manifest); null for --from.
  nlohmann::json saved_config;
  // The data files as the weights' run read them (run_identity.h's data_identity: a checkpoint's
  // manifest records it, and a run's final.safetensors); null where nothing records it (--from,
  // files written before it was recorded).
  nlohmann::json saved_data_identity;
};

// A run's saved config as one process reads its model, data and batch: the keys that could refuse
// a run's weights in this build aside (its optimizer, attention kernels, the batch terms that split
// its global batch over its ranks). InputError naming `source`.
RunConfig saved_run_config(nlohmann::json doc, const std::string& source);

// Exactly one of --run, --ckpt and --from, else an InputError naming `command`; likewise a bad
// --device or --dtype.
// `checkpoint`: where given, the checkpoint --ckpt's folder resolved to on another rank (eval's
// rank 0), read as it is rather than chosen again, so every rank reads the same one.
WeightSource resolve_weight_source(const ArgParser& parser, const std::string& command,
                                   const std::string& checkpoint = "");

}  // namespace zt::cli
