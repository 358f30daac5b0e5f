// `zerotrain memory --params`: the ZeRO paper's model-state table (see the header).
#include "engine/app/cli/commands/memory_paper_table.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <string>

#include "engine/base/core/check.h"
#include "engine/distributed/sharding/memory_model.h"

namespace zt::cli {

namespace {

constexpr int kStages = 4;
constexpr double kGB = 1e9, kGiB = 1024.0 * 1024.0 * 1024.0;

// A parameter count: an integer, also written as a float ("7.5e9", "124e6").
std::int64_t parse_param_count(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (!decimal_start(text) || end != text.c_str() + text.size() || !std::isfinite(v) || v < 1 || v > 9e15 ||
      v != std::floor(v)) {
    throw_input_error(
        "zerotrain memory: --params must be a whole number of parameters from 1 to 9e15, such as 124e6 or "
        "7.5e9 (got '{}')",
        text);
  }
  return static_cast<std::int64_t>(v);
}

}  // namespace

int memory_paper_table(const ArgParser& parser, int ranks, bool json) {
  const std::int64_t psi = parse_param_count(parser.get("params"));
  const int k = parser.get_int("k", 12, 0, 1000);
  constexpr const char* kSharded[] = {"nothing (data parallel)", "optimizer states", "+ gradients", "+ parameters"};
  constexpr const char* kFormula[] = {"(2+2+K)Psi", "2Psi+2Psi+K*Psi/N", "2Psi+(2+K)Psi/N", "(2+2+K)Psi/N"};
  nlohmann::json stages = nlohmann::json::array();
  // Units the stage-0 total reads in with a few digits (a thousand parameters were 0.000 GB in every
  // cell), and a space before each number, so a count past the columns' width cannot join them.
  const double stage0 = static_cast<double>(predict_model_states(psi, 0, ranks, k).total());
  const auto [scale, unit, binary_scale, binary_unit] = stage0 >= 1e13  ? std::tuple{1e12, "TB", kGiB * 1024, "TiB"}
                                                        : stage0 >= 1e8 ? std::tuple{kGB, "GB", kGiB, "GiB"}
                                                        : stage0 >= 1e5 ? std::tuple{1e6, "MB", 1048576.0, "MiB"}
                                                                        : std::tuple{1e3, "kB", 1024.0, "KiB"};
  std::string table =
      fmt::format("{:<6}{:<25}{:<19}{:>11}{:>11}{:>15}{:>12}{:>12}\n", "stage", "sharded", "formula",
                  fmt::format("params {}", unit), fmt::format("grads {}", unit), fmt::format("optimizer {}", unit),
                  fmt::format("total {}", unit), fmt::format("total {}", binary_unit));
  for (int stage = 0; stage < kStages; ++stage) {
    const ModelStateBytes m = predict_model_states(psi, stage, ranks, k);
    stages.push_back({{"stage", stage},
                      {"parameters_bytes", m.parameters},
                      {"gradients_bytes", m.gradients},
                      {"optimizer_states_bytes", m.optimizer_states},
                      {"total_bytes", m.total()}});
    table += fmt::format("{:<6}{:<25}{:<19} {:>10.3f} {:>10.3f} {:>14.3f} {:>11.3f} {:>11.3f}\n", stage,
                         kSharded[stage], kFormula[stage], m.parameters / scale, m.gradients / scale,
                         m.optimizer_states / scale, m.total() / scale, m.total() / binary_scale);
  }
  if (json) {
    const nlohmann::json doc = {{"mode", "paper"},      {"params", psi},       {"ranks", ranks},  {"k", k},
                                {"bytes_per_param", 2}, {"bytes_per_grad", 2}, {"stages", stages}};
    fmt::print("{}\n", doc.dump(2));
    return 0;
  }
  fmt::print(
      "ZeRO model states per rank, the paper's 2Psi + 2Psi + K*Psi: Psi = {} parameters, N = {} rank{}, K = {}\n", psi,
      ranks, ranks == 1 ? "" : "s", k);
  fmt::print("(bf16 parameters and gradients, 2 bytes each; K bytes of optimizer state per parameter{})\n{}",
             k == 12 ? ": fp32 master, m, v" : "", table);
  fmt::print(
      "GB = 1e9 bytes, GiB = 2^30 bytes (TB, TiB, MB, MiB, kB, KiB likewise); no units, padding, buffers or "
      "activations (use "
      "--config for those).\n"
      "{}",
      // The paper's own figure, where these are its values; another model's are not its.
      psi == 7500000000 && ranks == 64 && k == 12
          ? "The paper's Figure 1 (Psi = 7.5e9, N = 64, K = 12) rounds these to 120, 31.4, 16.6 and 1.9 GB.\n"
          : "The paper's Figure 1 gives 120, 31.4, 16.6 and 1.9 GB for Psi = 7.5e9, N = 64, K = 12 (`--params 7.5e9 "
            "--ranks 64` prints that case).\n");
  return 0;
}

}  // namespace zt::cli
