// Resolving `--resume` on rank 0 and sharing the choice with the other ranks.
#include "engine/app/trainer/resume.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <utility>
#include <vector>

#include "engine/app/checkpoint/checkpoint_manifest.h"
#include "engine/app/checkpoint/checkpoint_model.h"
#include "engine/app/checkpoint/checkpoint_reader.h"
#include "engine/app/checkpoint/checkpoint_resolution.h"
#include "engine/app/trainer/resume_changes.h"
#include "engine/base/core/check.h"
#include "engine/base/core/console.h"

namespace zt {

ResumeChoice resolve_resume_checkpoint(Communicator& comm, const std::string& arg,
                                       const std::string& checkpoint_folder) {
  const bool latest = arg == "latest";
  const std::string where = latest ? checkpoint_folder : arg;
  // What rank 0 tells the others: the step of the chosen checkpoint (-1: none) and whether it is
  // `where` itself (a checkpoint directory given by path) or where/step_XXXXXXXX.
  std::int32_t choice[2] = {-1, 0};
  ResumeChoice chosen;
  // Rank 0 alone reads the folder (checksums: every byte); its refusal is the job's, said once.
  on_every_rank(comm, [&] {
    if (comm.rank() != 0) return;
    if (std::error_code ec; latest && !std::filesystem::is_directory(where, ec)) {
      throw_input_error("--resume latest: no checkpoint to resume from (checkpoint folder '{}' {})", where,
                        std::filesystem::exists(std::filesystem::symlink_status(where, ec))
                            ? "is not a directory: something else has its name"
                            : "does not exist");
    }
    std::vector<std::string> notes;
    ckpt::read_while_folder_changes(
        where,
        [&] {
          ckpt::ResolvedCheckpoint resolved = ckpt::resolve_checkpoint(where, ckpt::Validation::kChecksums);
          const std::int64_t step = ckpt::CheckpointReader(resolved.path).manifest().position.step;
          ZT_CHECK(step >= 0 && step <= INT32_MAX, "checkpoint step {} out of range", step);
          choice[0] = static_cast<std::int32_t>(step);
          choice[1] = resolved.path == where ? 1 : 0;
          notes.insert(notes.end(), resolved.notes.begin(), resolved.notes.end());
          // Names the run's set-aside reads in its own folder: those of another folder are not its.
          std::error_code ec;
          if (!latest && !std::filesystem::equivalent(where, checkpoint_folder, ec)) resolved.unusable.clear();
          chosen = ResumeChoice{std::move(resolved.path), std::move(resolved.held), std::move(resolved.unusable)};
        },
        [&](const std::string& changed) { notes.push_back(changed + ": read the folder again"); });
    for (const std::string& note : notes) print_out("resume: {}\n", note);
  });
  std::vector<std::int32_t> all(2 * static_cast<std::size_t>(comm.world_size()));
  comm.all_gather(TensorView{choice, DType::kI32, Device::kCPU, Shape{2}},
                  TensorView{all.data(), DType::kI32, Device::kCPU, Shape{2 * comm.world_size()}})
      .wait();
  if (comm.rank() != 0) {
    chosen.path = all[1] == 1 ? where : (std::filesystem::path(where) / ckpt::step_dir_name(all[0])).string();
  }
  return chosen;
}

namespace {

// "model.n_embd: 128 in the checkpoint, 64 in the config; ...": the keys of two manifests' model
// sections (ckpt::model_json) that differ, each once (padded_vocab_size follows vocab_size, and
// every key follows the family: another family is named alone).
std::string model_differences(const nlohmann::json& saved, const nlohmann::json& now) {
  // A model section leaves out rope_scaling where there is none (a config's null).
  const auto value_in = [](const nlohmann::json& side, const std::string& key) {
    if (side.is_object() && side.contains(key)) return side[key].dump();
    return std::string(key == "rope_scaling" ? "null (none)" : "absent");
  };
  std::vector<std::string> out;
  for (const std::string& key : ckpt::differing_model_keys(saved, now)) {
    out.push_back(fmt::format("model.{}: {} in the checkpoint, {} in the config", key == "type" ? "arch" : key,
                              value_in(saved, key), value_in(now, key)));
  }
  return out.empty() ? saved.dump() + " against " + now.dump() : fmt::format("{}", fmt::join(out, "; "));
}

}  // namespace

nlohmann::json resumed_model_keys(const std::string& arg, const std::string& checkpoint_folder) {
  const std::string where = arg == "latest" ? checkpoint_folder : arg;
  nlohmann::json config;
  std::string path;
  // The checkpoints of one folder are one run's model: whichever a live run's keep_last leaves.
  ckpt::read_while_folder_changes(
      where,
      [&] {
        const ckpt::ResolvedCheckpoint resolved = ckpt::resolve_checkpoint(where, ckpt::Validation::kStructure);
        path = resolved.path;
        config = ckpt::CheckpointReader(resolved.path).manifest().config;
      },
      [](const std::string&) {});
  if (!config.contains("model") || !config["model"].is_object()) {
    throw_input_error("--resume {}: {} records no model section", arg, path);
  }
  return config["model"];
}

std::vector<std::string> check_resume_fits(const std::string& checkpoint, const nlohmann::json& saved_model,
                                           const nlohmann::json& saved_config, int saved_world_size,
                                           std::int64_t saved_step, const RunConfig& now, bool allow_config_change,
                                           const std::vector<std::string>& data_changes) {
  const nlohmann::json expected = ckpt::model_json(now.model_spec());
  if (saved_model != expected) {
    throw_input_error(
        "--resume {}: the checkpoint's model differs from the config's ({}); resume with the "
        "checkpoint's model keys",
        checkpoint, model_differences(saved_model, expected));
  }
  // train.head_chunks and train.block_units lay the parameters out in units (models/unit_layout.h):
  // the checkpoint's shards are of those units.
  for (const auto& [key, now_value] :
       {std::pair{"head_chunks", now.train.head_chunks}, std::pair{"block_units", now.train.block_units}}) {
    const nlohmann::json saved =
        saved_config.contains("train") ? saved_config["train"].value(key, nlohmann::json(1)) : nlohmann::json(1);
    if (saved != nlohmann::json(now_value)) {
      throw_input_error(
          "--resume {}: the checkpoint was saved with train.{} = {}, which lays the parameters out in other "
          "units; resume with the same train.{} (this config has {})",
          checkpoint, key, saved.dump(), key, now_value);
    }
  }
  std::vector<std::string> changes = trajectory_changes(saved_config, saved_world_size, saved_step, now);
  if (saved_step > 0) changes.insert(changes.end(), data_changes.begin(), data_changes.end());
  if (!changes.empty() && !allow_config_change) {
    throw_input_error(
        "--resume {}: the config or data changes what the run's trajectory depends on ({}); continuing "
        "would not be the run that was saved (pass --allow-config-change to continue anyway)",
        checkpoint, fmt::format("{}", fmt::join(changes, "; ")));
  }
  return changes;
}

}  // namespace zt
