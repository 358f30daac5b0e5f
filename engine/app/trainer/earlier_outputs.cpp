// What an earlier run left in a run directory (see the header).
#include "engine/app/trainer/earlier_outputs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "engine/app/checkpoint/checkpoint_folder.h"
#include "engine/app/io/output_file.h"
#include "engine/app/io/safetensors.h"

namespace zt {

namespace {

// The optimizer steps final.safetensors was written after (its "steps" metadata, as
// write_final_weights records it); -1 where it has none or cannot be read.
std::int64_t final_weights_steps(const std::string& path) {
  try {
    const SafetensorsHeader header = read_safetensors_header(path);
    const nlohmann::json meta = header.json.value("__metadata__", nlohmann::json::object());
    if (!meta.is_object() || !meta.contains("steps") || !meta["steps"].is_string()) return -1;
    const std::string text = meta["steps"].get<std::string>();
    std::size_t used = 0;
    const long long steps = std::stoll(text, &used);
    return used == text.size() ? steps : -1;
  } catch (const std::exception&) {  // not a safetensors file, or no number: not these weights
    return -1;
  }
}

}  // namespace

void start_fresh_log(TrainerState& s) {
  if (s.root) {
    const std::string kept = keep_aside(s.run_dir + "/final.safetensors", "final weights");
    if (!kept.empty()) {
      s.progress.message(
          fmt::format("final.safetensors: an earlier run's weights kept as {} (this run started afresh)", kept));
    }
  }
  if (!s.metrics) return;
  s.metrics->start_afresh();
  if (!s.metrics->set_aside().empty()) {
    s.progress.message(fmt::format("metrics.jsonl: an earlier run's log kept as {} (this run started afresh)",
                                   s.metrics->set_aside()));
  }
}

void keep_earlier_final_weights_at_resume(TrainerState& s, std::int64_t optimizer_steps, bool log_is_ours) {
  if (!s.root) return;
  const std::string path = s.run_dir + "/final.safetensors";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return;
  const std::int64_t steps = final_weights_steps(path);
  if (log_is_ours && steps == optimizer_steps) return;  // the resumed checkpoint's weights
  const std::string kept = keep_aside(path, "final weights");
  if (kept.empty()) return;
  s.progress.message(
      fmt::format("final.safetensors, {}, kept as {} ({})",
                  steps < 0      ? std::string("weights of no recorded step")
                  : !log_is_ours ? fmt::format("another trajectory's weights after {} steps", steps)
                  : steps > optimizer_steps
                      ? fmt::format("the weights after {} steps, past the {} resumed from", steps, optimizer_steps)
                      : fmt::format("the weights after {} steps, before the {} resumed from", steps, optimizer_steps),
                  kept,
                  s.config.log.final_weights ? "this run writes its own at its end"
                                             : "this run writes none: log.final_weights = false"));
}

ckpt::SupersededUsage say_set_aside(TrainerState& s, const std::string& folder, const std::vector<std::string>& moved,
                                    const std::string& why) {
  const ckpt::SupersededUsage usage = ckpt::superseded_usage(folder);
  s.progress.message(
      fmt::format("{}: moved {} ({}) to {}/{}, which now holds {} checkpoint(s), {} (nothing deletes them: remove "
                  "those no longer needed)",
                  folder, fmt::join(moved, ", "), why, folder, ckpt::kSupersededName, usage.checkpoints,
                  format_bytes(usage.bytes)));
  return usage;
}

void log_set_aside(TrainerState& s, const std::vector<std::string>& moved, int step, const std::string& why,
                   const ckpt::SupersededUsage& usage) {
  s.log({{"type", "superseded_checkpoints"},
         {"step", step},
         {"moved", moved},
         {"reason", why},
         {"superseded_checkpoints", usage.checkpoints},
         {"superseded_bytes", usage.bytes}});
}

void report_set_aside(TrainerState& s, const std::string& folder, const std::vector<std::string>& moved, int step,
                      const std::string& why) {
  log_set_aside(s, moved, step, why, say_set_aside(s, folder, moved, why));
}

}  // namespace zt
