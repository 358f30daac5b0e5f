// ShardLayout: even, padded splits of every unit.
#include "engine/distributed/sharding/shard_layout.h"

#include <algorithm>

#include "engine/base/core/check.h"

namespace zt {

ShardSizes shard_sizes(std::int64_t numel, int world_size) {
  ZT_CHECK(numel >= 0 && world_size >= 1, "numel {} world_size {}", numel, world_size);
  ShardSizes s;
  s.numel = numel;
  s.shard_numel = (numel + world_size - 1) / world_size;
  s.padded_numel = s.shard_numel * world_size;
  // Rank N-1 holds elements [(N-1)s, n) when there are any; every rank before it is full.
  s.last_rank_padding = std::min(s.shard_numel, s.padded_numel - numel);
  return s;
}

ShardLayout::ShardLayout(const ParamTable& table, int world_size, int rank) : world_(world_size), rank_(rank) {
  ZT_CHECK(world_size >= 1 && rank >= 0 && rank < world_size);
  for (const UnitSpec& u : table.units()) {
    const ShardSizes sizes = shard_sizes(u.numel, world_size);
    UnitShard s;
    s.numel = u.numel;
    s.shard = sizes.shard_numel;
    s.padded = sizes.padded_numel;
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
