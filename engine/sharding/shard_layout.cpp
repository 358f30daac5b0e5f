// ShardLayout: even, padded splits of every unit.
#include "engine/sharding/shard_layout.h"

#include <algorithm>

#include "engine/core/check.h"

namespace zt {

ShardLayout::ShardLayout(const ParamTable& table, int world_size, int rank) : world_(world_size), rank_(rank) {
  ZT_CHECK(world_size >= 1 && rank >= 0 && rank < world_size);
  for (const UnitSpec& u : table.units()) {
    UnitShard s;
    s.numel = u.numel;
    s.shard = (u.numel + world_size - 1) / world_size;
    s.padded = s.shard * world_size;
    s.begin = std::min(u.numel, s.shard * rank);
    s.end = std::min(u.numel, s.shard * (rank + 1));
    s.offset = s.shard * rank;
    units_.push_back(s);
  }
}

std::int64_t ShardLayout::live_numel() const {
  std::int64_t n = 0;
  for (const UnitShard& s : units_) n += s.live();
  return n;
}

}  // namespace zt
