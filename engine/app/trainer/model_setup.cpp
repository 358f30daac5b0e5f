// Parameter initialisation into the optimizer's shard and the store.
#include "engine/app/trainer/model_setup.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "engine/app/io/pretrained.h"
#include "engine/base/core/check.h"

namespace zt {

void initialize_parameters(const ModelSpec& spec, std::uint64_t seed, ZeroParamStore& store, ShardedAdamW& optimizer,
                           MemoryTracker& tracker, int num_threads) {
  // The families' draws run in OpenMP regions of the default size: the run's threads for their
  // duration (ranks sharing a node's cores would otherwise each start one a core).
  struct DefaultThreads {
    int outer = omp_get_max_threads();
    explicit DefaultThreads(int n) { omp_set_num_threads(std::max(1, n)); }
    ~DefaultThreads() { omp_set_num_threads(outer); }
  } const threads(num_threads);
  const ParamTable& table = store.table();
  Buffer full(tracker, MemCategory::kWorkspace, DType::kF32, table.max_unit_numel(), Device::kCPU, false);
  for (std::size_t u = 0; u < table.units().size(); ++u) {
    // Only this rank's optimizer shard is drawn: load_unit reads no more, and each element is a
    // function of its index alone (the same values as drawing the whole unit).
    const UnitShard& s = store.optimizer_layout().unit(static_cast<int>(u));
    init_unit_params(spec, table, static_cast<int>(u), seed, full.as<float>(), s.begin, s.begin + s.live());
    optimizer.load_unit(static_cast<int>(u), full.as<float>());
  }
  store.publish_updated_params();
}

std::int64_t load_pretrained_parameters(const std::string& path, ZeroParamStore& store, ShardedAdamW& optimizer,
                                        MemoryTracker& tracker, Communicator& world) {
  const ParamTable& table = store.table();
  std::int64_t bytes_read = 0;
  // Each rank reads, and checks, only its shard: a NaN one rank finds ends every rank with its line.
  on_every_rank(world, [&] {
    const std::unique_ptr<PretrainedReader> reader = PretrainedReader::open(path, table);
    Buffer full(tracker, MemCategory::kWorkspace, DType::kF32, table.max_unit_numel(), Device::kCPU, false);
    for (std::size_t u = 0; u < table.units().size(); ++u) {
      const UnitShard& s = store.optimizer_layout().unit(static_cast<int>(u));
      read_pretrained_unit(*reader, table, static_cast<int>(u), s.begin, s.end, full.as<float>());
      // Weights holding NaN or infinity would train on NaN from the first step.
      const float* values = full.as<float>();
      const float* bad =
          std::find_if(values + s.begin, values + s.begin + s.live(), [](float v) { return !std::isfinite(v); });
      if (bad != values + s.begin + s.live()) {
        throw_input_error("{}: {} is {}: weights that hold NaN or infinity cannot be trained from", path,
                          table.describe_element(static_cast<int>(u), bad - values), *bad);
      }
      optimizer.load_unit(static_cast<int>(u), full.as<float>());  // reads [s.begin, s.end) only
    }
    bytes_read = reader->bytes_read();
  });
  store.publish_updated_params();
  return bytes_read;
}

}  // namespace zt
