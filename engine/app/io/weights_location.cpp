// What lies at a weights path (see the header).
#include "engine/app/io/weights_location.h"

#include <nlohmann/json.hpp>

#include <filesystem>

#include "engine/app/io/input_file.h"
#include "engine/base/core/check.h"

namespace zt {

namespace fs = std::filesystem;

WeightsAt weights_at(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_regular_file(p, ec)) return WeightsAt::kFile;
  if (!fs::is_directory(p, ec)) return WeightsAt::kNothingKnown;
  if (fs::exists(p / "manifest.json", ec)) return WeightsAt::kCheckpoint;
  if (fs::exists(p / "latest", ec)) return WeightsAt::kCheckpointFolder;
  if (fs::exists(p / "metrics.jsonl", ec) || fs::exists(p / "final.safetensors", ec)) return WeightsAt::kRunDirectory;
  if (!fs::is_regular_file(p / "config.json", ec)) return WeightsAt::kNothingKnown;
  // Which config.json: a run's has a "model" section, a Hugging Face model's a "model_type". One
  // that cannot be read or parsed says nothing here; its reader names the fault.
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(read_whole_input((p / "config.json").string(), "config.json"), nullptr,
                                   /*allow_exceptions=*/false);
  } catch (const InputError&) {
    return WeightsAt::kNothingKnown;
  }
  if (!config.is_object()) return WeightsAt::kNothingKnown;
  if (config.contains("model")) return WeightsAt::kRunDirectory;
  if (config.contains("model_type")) return WeightsAt::kHuggingFaceFolder;
  return WeightsAt::kNothingKnown;
}

std::string run_directory_marker(const std::string& dir) {
  for (const char* name : {"metrics.jsonl", "final.safetensors", "RUN_LOCK", "checkpoints"}) {
    std::error_code ec;
    if (fs::exists(fs::symlink_status(fs::path(dir) / name, ec))) return name;
  }
  return "";
}

const char* weights_at_name(WeightsAt at) {
  switch (at) {
    case WeightsAt::kRunDirectory: return "a zerotrain run directory";
    case WeightsAt::kCheckpoint: return "a zerotrain checkpoint";
    case WeightsAt::kCheckpointFolder: return "a zerotrain checkpoint folder";
    case WeightsAt::kHuggingFaceFolder: return "a Hugging Face folder";
    case WeightsAt::kFile: return "a file";
    case WeightsAt::kNothingKnown: break;
  }
  return "";
}

}  // namespace zt
