// What lies at a path a command was given for weights, so that weights given to the wrong flag are
// named with the flag that reads them (eval/sample --run on a checkpoint folder, train.init_from on
// a run directory) rather than refused for a file they lack.
#pragma once

#include <string>

namespace zt {

enum class WeightsAt {
  kNothingKnown,       // none of those below (or no such path): the reader's own error says why
  kRunDirectory,       // a training run's: metrics.jsonl or final.safetensors, or a config.json with "model"
  kCheckpoint,         // one checkpoint: its manifest.json
  kCheckpointFolder,   // checkpoints and their "latest"
  kHuggingFaceFolder,  // a config.json with "model_type"
  kFile,               // a regular file (an llm.c model file, a safetensors file, ...)
};

WeightsAt weights_at(const std::string& path);

// "a zerotrain checkpoint folder", ...: for messages ("" for kNothingKnown).
const char* weights_at_name(WeightsAt at);

// The first file or folder of a training run's in `dir` (metrics.jsonl, final.safetensors,
// RUN_LOCK, checkpoints; a dangling link too), or "" where none is: what the commands that write
// into a folder (prepare --out, ckpt export --out) refuse, since they would replace the run's own
// vocab.json or config.json.
std::string run_directory_marker(const std::string& dir);

}  // namespace zt
