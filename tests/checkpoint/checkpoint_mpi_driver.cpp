// Test driver for checkpoints across real ranks (run alone or under mpirun by the Python tests):
//   save FOLDER --stage S --step K [--table odd|big | --model-config CONFIG] [--keep-last K]
//   load PATH --stage T [--table odd|big | --model-config CONFIG]
// `save` writes known optimizer state (GPT: the model's real initial weights as master) from each
// rank's ZeRO layout at stage S; `load` resolves PATH (a checkpoint or a folder's latest), loads
// this rank's layout at stage T and checks every value bit for bit. Exit 0 only if all is exact.
#include <fmt/format.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/app/checkpoint/checkpoint_export.h"
#include "engine/app/checkpoint/checkpoint_resolution.h"
#include "engine/app/config/run_config.h"
#include "engine/distributed/comm/communicator.h"
#include "models/model_family.h"
#include "tests/checkpoint/checkpoint_test_util.h"

namespace {

using namespace zt;
using namespace zt::ckpt;

struct Args {
  std::string mode, path, table = "odd", model_config;
  int stage = 0, keep_last = 0;
  std::int64_t step = 1;
};

Args parse(int argc, char** argv) {
  Args a;
  if (argc < 3) throw InputError("usage: checkpoint_mpi_driver save|load PATH [flags]");
  a.mode = argv[1];
  a.path = argv[2];
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--stage")
      a.stage = std::stoi(value);
    else if (flag == "--step")
      a.step = std::stoll(value);
    else if (flag == "--table")
      a.table = value;
    else if (flag == "--model-config")
      a.model_config = value;
    else if (flag == "--keep-last")
      a.keep_last = std::stoi(value);
    else
      throw InputError("unknown flag " + flag);
  }
  return a;
}

// The master a run of the config's model starts from: every unit initialised as the trainer does
// (same seed).
void set_model_master(testing::RankState& state, const ParamTable& table, const RunConfig& cfg) {
  std::vector<float> full(static_cast<std::size_t>(table.max_unit_numel()));
  for (std::size_t u = 0; u < table.units().size(); ++u) {
    init_unit_params(cfg.model_spec(), table, static_cast<int>(u), cfg.train.seed, full.data());
    const UnitShard& s = state.layout.unit(static_cast<int>(u));
    std::memcpy(state.values[0][u].data(), full.data() + s.begin, static_cast<std::size_t>(s.live()) * 4);
  }
}

int run(const Args& a, Communicator& comm) {
  std::unique_ptr<RunConfig> cfg;
  ParamTable table = a.table == "big" ? testing::big_table() : testing::odd_table();
  if (!a.model_config.empty()) {
    cfg = std::make_unique<RunConfig>(load_run_config(a.model_config, {}, comm.world_size()));
    table = build_param_table(cfg->model_spec());
  }
  const int world = comm.world_size(), rank = comm.rank();
  // The optimizer layout ZeroParamStore uses: whole units at stage 0, the N-way shards otherwise.
  testing::RankState state(table, a.stage == 0 ? 1 : world, a.stage == 0 ? 0 : rank);
  if (a.mode == "save") {
    state.fill();
    if (cfg) set_model_master(state, table, *cfg);
    CheckpointMeta meta;
    meta.position = {a.step, a.step * 1000, a.step * 8, static_cast<int>(a.step)};
    meta.zero_stage = a.stage;
    meta.model = cfg ? model_json(cfg->model_spec()) : nlohmann::json{{"kind", "test"}};
    meta.config = cfg ? cfg->to_json() : nlohmann::json::object();
    const SaveResult r = save_checkpoint(comm, a.path, table, state.source(), meta, a.keep_last);
    fmt::print("rank {}/{}: saved {} ({} bytes of {})\n", rank, world, r.path, r.rank_bytes, r.total_bytes);
    return 0;
  }
  if (a.mode == "load") {
    const ResolvedCheckpoint resolved = resolve_checkpoint(a.path, Validation::kStructure);
    for (const std::string& note : resolved.notes) fmt::print("rank {}: note: {}\n", rank, note);
    const CheckpointReader reader(resolved.path);
    load_optimizer_state(reader, table, state.target());
    testing::RankState expected(table, a.stage == 0 ? 1 : world, a.stage == 0 ? 0 : rank);
    expected.fill();
    if (cfg) set_model_master(expected, table, *cfg);
    std::int64_t bad = 0;
    for (int k = 0; k < kNumStateKinds; ++k) {
      for (std::size_t u = 0; u < table.units().size(); ++u) {
        bad += std::memcmp(state.values[k][u].data(), expected.values[k][u].data(), state.values[k][u].size() * 4) != 0;
      }
    }
    fmt::print("rank {}/{}: loaded {} (saved by {} ranks at stage {}) at stage {}: {} read {} bytes\n", rank, world,
               resolved.path, reader.manifest().world_size, reader.manifest().zero_stage, a.stage,
               bad == 0 ? "exact," : fmt::format("{} MISMATCHED units,", bad), reader.bytes_read());
    return bad == 0 ? 0 : 1;
  }
  throw InputError("unknown mode " + a.mode);
}

}  // namespace

int main(int argc, char** argv) {
  zt::MemoryTracker tracker;
  std::unique_ptr<zt::Communicator> comm = zt::make_communicator(tracker, {});
  try {
    const int rc = run(parse(argc, argv), *comm);
    comm.reset();
    return rc;
  } catch (const std::exception& e) {
    fmt::print(stderr, "rank {}: error: {}\n", comm->rank(), e.what());
    comm.reset();
    return 2;
  }
}
