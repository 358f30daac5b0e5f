// Parameter initialisation into the optimizer's shard and the store.
#include "engine/app/trainer/model_setup.h"

#include <omp.h>

#include <algorithm>

#include "engine/app/io/pretrained.h"

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
                                        MemoryTracker& tracker) {
  const ParamTable& table = store.table();
  const std::unique_ptr<PretrainedReader> reader = PretrainedReader::open(path, table);
  Buffer full(tracker, MemCategory::kWorkspace, DType::kF32, table.max_unit_numel(), Device::kCPU, false);
  for (std::size_t u = 0; u < table.units().size(); ++u) {
    const UnitShard& s = store.optimizer_layout().unit(static_cast<int>(u));
    read_pretrained_unit(*reader, table, static_cast<int>(u), s.begin, s.end, full.as<float>());
    optimizer.load_unit(static_cast<int>(u), full.as<float>());  // reads [s.begin, s.end) only
  }
  store.publish_updated_params();
  return reader->bytes_read();
}

}  // namespace zt
