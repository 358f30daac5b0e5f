// Resume through the real ZeroParamStore and ShardedAdamW on any number of ranks and stage:
//   run FOLDER --config CFG --stage S --from A --to B [--dtype f32|bf16] [--set key=value]...
// starts from the model's initial weights (A = 0) or from FOLDER's latest checkpoint (which must be
// at step A), takes steps A..B-1 on synthetic gradients, and saves at step B. The gradient of
// every element is a function of (unit, global element, step) and AdamW is elementwise, so the
// optimizer state after step B is bitwise the same for every rank count, stage and interruption:
// reshard_resume_test.py compares the saved files. Prints each rank's save/load seconds and bytes.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/app/checkpoint/checkpoint_export.h"
#include "engine/app/checkpoint/checkpoint_resolution.h"
#include "engine/app/checkpoint/optimizer_checkpoint.h"
#include "engine/app/config/run_config.h"
#include "engine/base/core/bf16.h"
#include "engine/distributed/optim/sharded_adamw.h"
#include "engine/distributed/sharding/zero_param_store.h"
#include "models/gpt/gpt_params.h"

namespace {

using namespace zt;
using namespace zt::ckpt;

float synthetic_grad(std::size_t unit, std::int64_t element, int step) {
  return std::sin(0.001f * static_cast<float>(element % 100003) + 0.7f * static_cast<float>(unit) +
                  1.3f * static_cast<float>(step)) *
         0.1f;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run(int argc, char** argv, Communicator& comm) {
  if (argc < 3 || std::string(argv[1]) != "run") throw InputError("usage: optimizer_resume_driver run FOLDER [flags]");
  const std::string folder = argv[2];
  std::string config_path, dtype = "f32";
  std::vector<std::string> overrides;
  int stage = 0, from = 0, to = 1;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--config")
      config_path = value;
    else if (flag == "--stage")
      stage = std::stoi(value);
    else if (flag == "--from")
      from = std::stoi(value);
    else if (flag == "--to")
      to = std::stoi(value);
    else if (flag == "--dtype")
      dtype = value;
    else if (flag == "--set")
      overrides.push_back(value);
    else
      throw InputError("unknown flag " + flag);
  }
  const RunConfig cfg = load_run_config(config_path, overrides, comm.world_size());
  const ParamTable table = build_param_table(cfg.model_spec());
  MemoryTracker tracker;
  const ExecContext ctx{Device::kCPU, 1, nullptr};
  ZeroOptions options;
  options.stage = stage;
  options.overlap_comm = false;  // no forward acquires units here, so publishes are waited at once
  ZeroParamStore store(table, dtype == "bf16" ? DType::kBF16 : DType::kF32, options, comm, tracker, ctx);
  ShardedAdamW optimizer(store, cfg.optim.adamw, tracker, ctx);
  const int rank = comm.rank();

  if (from == 0) {
    std::vector<float> full(static_cast<std::size_t>(table.max_unit_numel()));
    for (std::size_t u = 0; u < table.units().size(); ++u) {
      init_unit_params(cfg.model_spec(), table, static_cast<int>(u), cfg.train.seed, full.data());
      optimizer.load_unit(static_cast<int>(u), full.data());
    }
    store.publish_updated_params();
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    const CheckpointReader reader(resolve_checkpoint(folder, Validation::kStructure).path);
    if (reader.manifest().position.step != from) throw InputError(fmt::format("latest is not step {}", from));
    restore_training_state(reader, store, optimizer);
    fmt::print("rank {}/{}: loaded step {} (saved by {} ranks at stage {}) at stage {} in {:.3f} s, read {} bytes\n",
               rank, comm.world_size(), from, reader.manifest().world_size, reader.manifest().zero_stage, stage,
               seconds_since(t0), reader.bytes_read());
  }

  for (int step = from; step < to; ++step) {
    for (std::size_t u = 0; u < table.units().size(); ++u) {
      const UnitShard& s = store.optimizer_layout().unit(static_cast<int>(u));
      const TensorView g = store.grad_shard(static_cast<int>(u));
      for (std::int64_t i = 0; i < s.live(); ++i) {
        const float value = synthetic_grad(u, s.begin + i, step);
        if (g.dtype == DType::kF32) {
          g.as<float>()[i] = value;
        } else {
          g.as<bf16>()[i] = float_to_bf16(value);
        }
      }
    }
    optimizer.step(cfg.optim.adamw.lr / std::sqrt(1.0f + static_cast<float>(step)));
  }

  CheckpointMeta meta;
  meta.position.step = to;
  meta.model = model_json(cfg.model_spec());
  meta.config = cfg.to_json();
  const SaveResult saved = save_training_state(comm, folder, store, optimizer, meta, 0);
  fmt::print("rank {}/{}: saved step {} at stage {} in {:.3f} s, {} bytes (all ranks {})\n", rank, comm.world_size(),
             to, stage, saved.seconds, saved.rank_bytes, saved.total_bytes);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MemoryTracker tracker;
  std::unique_ptr<Communicator> comm = make_communicator(tracker, {});
  try {
    const int rc = run(argc, argv, *comm);
    comm.reset();
    return rc;
  } catch (const std::exception& e) {
    fmt::print(stderr, "rank {}: error: {}\n", comm->rank(), e.what());
    comm.reset();
    return 2;
  }
}
