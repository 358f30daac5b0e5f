// Gathering the ranks' memory peaks and printing them beside engine/distributed/sharding/memory_model's
// prediction.
#include "engine/app/trainer/memory_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/app/trainer/run_memory.h"

namespace zt {

std::string compact_memory(const MemorySnapshot& s) {
  static constexpr const char* kShort[] = {"p", "m", "g", "o", "a", "c", "w"};
  std::string out;
  for (int i = 0; i < kNumMemCategories; ++i) {
    if (s.peak_bytes[i] == 0) continue;
    // MiB, as every memory table prints (it was 10^6 bytes, "M", beside tables in MiB).
    out += fmt::format("{}{} {:.1f}MiB", out.empty() ? "" : " ", kShort[i],
                       static_cast<double>(s.peak_bytes[i]) / (1024.0 * 1024.0));
  }
  return out;
}

nlohmann::json memory_json(const MemorySnapshot& s) {
  nlohmann::json j = nlohmann::json::object();
  for (int i = 0; i < kNumMemCategories; ++i)
    j[std::string(mem_category_name(static_cast<MemCategory>(i)))] = s.peak_bytes[i];
  return j;
}

nlohmann::json memory_json(const StageMemory& m) {
  nlohmann::json j = nlohmann::json::object();
  for (int i = 0; i < kNumMemCategories; ++i)
    j[std::string(mem_category_name(static_cast<MemCategory>(i)))] = m.bytes[i];
  return j;
}

std::vector<MemorySnapshot> gather_memory_snapshots(Communicator& comm, const MemorySnapshot& mine) {
  const int N = comm.world_size();
  const std::vector<std::int64_t> own(mine.peak_bytes.begin(), mine.peak_bytes.end());
  const std::vector<std::int64_t> all = all_gather_values<std::int64_t>(comm, own);
  std::vector<MemorySnapshot> out(static_cast<std::size_t>(N));
  for (int r = 0; r < N; ++r) {
    for (int c = 0; c < kNumMemCategories; ++c)
      out[static_cast<std::size_t>(r)].peak_bytes[c] = all[r * kNumMemCategories + c];
  }
  return out;
}

std::string format_measured_vs_predicted(const RunConfig& config, const std::vector<MemorySnapshot>& per_rank,
                                         const BesideTheSteps& beside) {
  const int N = static_cast<int>(per_rank.size());
  const StageMemory step = predict_run_memory(config, config.zero.stage, N);
  StageMemory predicted = step;
  auto take_in = [&](const StageMemory& phase) {
    for (int c = 0; c < kNumMemCategories; ++c) predicted.bytes[c] = std::max(predicted.bytes[c], phase.bytes[c]);
  };
  if (beside.final_gathered) take_in(predict_final_gather_memory(config, step, N));
  if (beside.choice_plan) take_in(predict_choice_memory(config, step, *beside.choice_plan, N));
  const bool whole_run = beside.final_gathered || beside.choice_plan;
  std::string out = fmt::format(
      "memory per rank, ZeRO stage {} on {} rank(s): measured peak beside the prediction "
      "(docs/zero_memory.md)\n",
      config.zero.stage, N);
  out += fmt::format("{:<18} {:>12} {:>12} {:>12} {:>8}\n", "category", "predicted", "rank 0", "max rank", "ratio");
  // A category whose largest peak is not the prediction's byte count is marked: a ratio to three
  // places reads 1.000 for a few KiB on a MiB, and the note below says "to the byte" only where it is.
  bool any_differs = false;
  for (int c = 0; c < kNumMemCategories; ++c) {
    const auto cat = static_cast<MemCategory>(c);
    std::int64_t worst = 0;
    for (const MemorySnapshot& s : per_rank) worst = std::max(worst, s.peak_bytes[c]);
    const std::int64_t p = predicted[cat];
    const bool differs = worst != p;
    any_differs = any_differs || differs;
    const std::string ratio =
        p > 0 ? fmt::format("{:.3f}", static_cast<double>(worst) / static_cast<double>(p)) : std::string("-");
    out += fmt::format("{:<18} {:>12} {:>12} {:>12} {:>8}\n", mem_category_name(cat), format_bytes(p),
                       format_bytes(per_rank[0].peak_bytes[c]), format_bytes(worst), differs ? ratio + "*" : ratio);
  }
  std::vector<std::string> named = {"a training step's peaks"};
  if (beside.final_gathered) named.emplace_back("the final gather's unit in workspace");
  if (beside.choice_plan) named.emplace_back("the multiple-choice scorer's peaks");
  std::string phases = named.front();
  for (std::size_t i = 1; i < named.size(); ++i) phases += (i + 1 == named.size() ? " and " : ", ") + named[i];
  const std::string cuda_gaps = config.device == Device::kCUDA
                                    ? "; on CUDA, kernel calls it leaves out (cuDNN attention's workspace, CUB's "
                                      "sort in the embedding backward, a first step's timed searches) may hold more"
                                    : "";
  if (!any_differs) {
    out += fmt::format("(padding in the prediction: {}; every category measured equal to the prediction to the byte)\n",
                       format_bytes(predicted.padding_bytes));
    return out;
  }
  // A run of no step never reached a step's activations and workspace: its lower peaks are not a
  // prediction missed.
  out += fmt::format(
      "(padding in the prediction: {}; * measured other than predicted: {}the prediction covers {}, "
      "to the byte on the CPU{}; {})\n",
      format_bytes(predicted.padding_bytes),
      beside.stepped ? "" : "no training step ran in this run, so none of a step's peaks were reached; ", phases,
      cuda_gaps,
      whole_run ? "a sample's activations and workspace are bounded for the memory check, not "
                  "predicted here (zerotrain memory)"
                : "evaluation, sampling and the final gather may add workspace and activations");
  return out;
}

}  // namespace zt
