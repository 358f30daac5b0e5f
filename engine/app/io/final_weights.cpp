// Gathering, checking and writing the final weights (see the header).
#include "engine/app/io/final_weights.h"

#include <cmath>
#include <vector>

#include "engine/app/io/model_weights.h"
#include "engine/base/core/buffer.h"
#include "engine/base/core/check.h"

namespace zt {

void write_final_weights(const std::string& path, ShardedAdamW& optimizer, MemoryTracker& tracker, bool root,
                         const std::map<std::string, std::string>& metadata) {
  const ParamTable& table = optimizer.table();
  std::vector<Buffer> full;
  for (std::size_t u = 0; u < table.units().size(); ++u) {
    full.push_back(optimizer.gather_master(static_cast<int>(u), tracker));
    const float* p = full.back().as<float>();
    for (std::int64_t i = 0; i < table.units()[u].numel; ++i) {
      if (!std::isfinite(p[i])) throw_runtime_error("parameters became non-finite; final weights not written");
    }
  }
  if (!root) return;
  save_model_weights(
      path, table,
      [&](int u) {
        return full[static_cast<std::size_t>(u)].view().slice(0, table.units()[static_cast<std::size_t>(u)].numel);
      },
      metadata, /*views_outlive_writer=*/true);  // `full` lives until the file is written
}

}  // namespace zt
