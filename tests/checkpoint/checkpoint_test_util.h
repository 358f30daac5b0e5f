// Shared by the checkpoint tests: parameter tables with awkward sizes, a deterministic value for
// every (state, unit, element), and one rank's optimizer state under any layout, so N saving ranks
// and M loading ranks can be simulated in one process (or be real MPI ranks).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/app/checkpoint/checkpoint_reader.h"
#include "engine/app/checkpoint/checkpoint_writer.h"
#include "engine/distributed/sharding/shard_layout.h"

namespace zt::ckpt::testing {

// Units of 41, 11, 4 and 1 elements: none divisible by 2, 3 or 4, and one smaller than the ranks.
inline ParamTable odd_table() {
  ParamTable t;
  t.add_unit("embeddings");
  t.add_param("wte", {7, 5}, {6, 5}, true);
  t.add_param("wpe", {3, 2}, {3, 2}, true);
  t.add_unit("h.0");
  t.add_param("h.0.w", {11}, {11}, false);
  t.add_unit("h.1");
  t.add_param("h.1.w", {2, 2}, {2, 2}, true);
  t.add_unit("final");
  t.add_param("final.b", {1}, {1}, false);
  return t;
}

// Units spanning several 1 MiB checksum chunks per rank file.
inline ParamTable big_table() {
  ParamTable t;
  t.add_unit("a");
  t.add_param("a.w", {300001}, {300001}, true);
  t.add_unit("b");
  t.add_param("b.w", {123457}, {123457}, true);
  t.add_unit("c");
  t.add_param("c.w", {5}, {5}, false);
  return t;
}

// A distinct, exactly representable value per (state, unit, element).
inline float state_value(StateKind kind, int unit, std::int64_t element) {
  std::uint64_t h = (static_cast<std::uint64_t>(kind) * 1000003u + static_cast<std::uint64_t>(unit)) * 2654435761u +
                    static_cast<std::uint64_t>(element) * 40503u;
  h ^= h >> 13;
  const float v = static_cast<float>(static_cast<std::int64_t>(h % 2000001) - 1000000) * (1.0f / 1024.0f);
  return kind == StateKind::kExpAvgSq ? std::abs(v) : v;  // a second moment, as a loader checks
}

// One rank's optimizer state: shards of `layout` (zero padding), per kind and unit.
struct RankState {
  ShardLayout layout;
  std::vector<std::vector<float>> values[kNumStateKinds];  // [kind][unit][shard element]

  RankState(const ParamTable& table, int world, int rank) : layout(table, world, rank) {
    for (auto& per_kind : values) {
      for (std::size_t u = 0; u < layout.num_units(); ++u) {
        per_kind.emplace_back(static_cast<std::size_t>(layout.unit(static_cast<int>(u)).shard), 0.0f);
      }
    }
  }
  void fill() {
    for (int k = 0; k < kNumStateKinds; ++k) {
      for (std::size_t u = 0; u < layout.num_units(); ++u) {
        const UnitShard& s = layout.unit(static_cast<int>(u));
        for (std::int64_t i = 0; i < s.live(); ++i) {
          values[k][u][static_cast<std::size_t>(i)] =
              state_value(static_cast<StateKind>(k), static_cast<int>(u), s.begin + i);
        }
      }
    }
  }
  TensorView view(StateKind kind, int unit) {
    std::vector<float>& v = values[static_cast<int>(kind)][static_cast<std::size_t>(unit)];
    return TensorView{v.data(), DType::kF32, Device::kCPU, Shape{static_cast<std::int64_t>(v.size())}};
  }
  OptimizerStateSource source() {
    return {&layout, [this](StateKind k, int u) { return view(k, u); }};
  }
  OptimizerStateTarget target() {
    return {&layout, [this](StateKind k, int u) { return view(k, u); }};
  }
  // Number of elements that differ from state_value (padding must be zero).
  std::int64_t mismatches() const {
    std::int64_t bad = 0;
    for (int k = 0; k < kNumStateKinds; ++k) {
      for (std::size_t u = 0; u < layout.num_units(); ++u) {
        const UnitShard& s = layout.unit(static_cast<int>(u));
        for (std::int64_t i = 0; i < s.shard; ++i) {
          const float want =
              i < s.live() ? state_value(static_cast<StateKind>(k), static_cast<int>(u), s.begin + i) : 0.0f;
          bad += values[k][u][static_cast<std::size_t>(i)] != want;
        }
      }
    }
    return bad;
  }
};

// The meta of a simulated save at `step`: a position derived from it, a test model and config.
inline CheckpointMeta simulated_meta(std::int64_t step, int stage = 0,
                                     const nlohmann::json& extra = nlohmann::json::object()) {
  CheckpointMeta meta;
  meta.position = {step, step * 100, step * 4, static_cast<int>(step)};
  meta.zero_stage = stage;
  meta.model = {{"kind", "test"}};
  meta.config = {{"train", {{"seed", 7}}}};
  meta.extra = extra;
  return meta;
}

// `world` ranks saving at ZeRO stage `stage` (stage 0: each holds whole units), simulated in turn.
// `extra`: the manifest's extra (e.g. the lineage a trainer records: save_id, previous_save_id).
inline CommitResult save_simulated_result(const std::string& folder, const ParamTable& table, int world, int stage,
                                          std::int64_t step, int keep_last = 0,
                                          const nlohmann::json& extra = nlohmann::json::object()) {
  const std::string temp = temp_dir_for(folder, step);
  prepare_temp_dir(temp);
  std::vector<RankFileWritten> files;
  for (int r = 0; r < world; ++r) {
    RankState state(table, stage == 0 ? 1 : world, stage == 0 ? 0 : r);
    state.fill();
    files.push_back(write_rank_file(temp, table, world, r, state.source()));
  }
  return commit_checkpoint(folder, temp, table, simulated_meta(step, stage, extra), world, files, keep_last);
}
inline std::string save_simulated(const std::string& folder, const ParamTable& table, int world, int stage,
                                  std::int64_t step, int keep_last = 0,
                                  const nlohmann::json& extra = nlohmann::json::object()) {
  return save_simulated_result(folder, table, world, stage, step, keep_last, extra).path;
}

}  // namespace zt::ckpt::testing
