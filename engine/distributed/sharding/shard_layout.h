// How each unit's flat buffer is split across ranks: shards of s = ceil(n / N) elements, rank r
// owning [r*s, min((r+1)*s, n)); the padded unit has s*N elements and the padding (on the last
// ranks) is never read as data. See docs/zero_memory.md for what each stage keeps of it.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/base/core/param_table.h"

namespace zt {

// One unit's flat buffer of `numel` elements split over `world_size` ranks (rank-independent).
struct ShardSizes {
  std::int64_t numel = 0;              // n: elements of the unit
  std::int64_t shard_numel = 0;        // s = ceil(n / N): elements every rank allocates
  std::int64_t padded_numel = 0;       // s * N: the unit as the collectives see it
  std::int64_t last_rank_padding = 0;  // elements of rank N-1's shard that hold no data (the most of any rank)
};

ShardSizes shard_sizes(std::int64_t numel, int world_size);

// The same split seen from one rank.
struct UnitShard {
  std::int64_t numel = 0;   // n: the unit's real elements
  std::int64_t shard = 0;   // s: elements per rank, padding included
  std::int64_t padded = 0;  // s * N
  std::int64_t begin = 0;   // this rank's first element (unit coordinates)
  std::int64_t end = 0;     // one past its last real element (begin when it holds only padding)
  // Where this rank's shard sits in the padded unit, r * s: the collectives' in-place position.
  // Equal to begin except on a rank past the unit's end (s * r > n), whose shard is all padding.
  std::int64_t offset = 0;
  std::int64_t live() const { return end - begin; }
};

class ShardLayout {
 public:
  ShardLayout(const ParamTable& table, int world_size, int rank);

  int world_size() const { return world_; }
  int rank() const { return rank_; }
  const UnitShard& unit(int u) const { return units_.at(static_cast<std::size_t>(u)); }
  std::size_t num_units() const { return units_.size(); }
  // Sum over units of this rank's real elements (what its optimizer updates).
  std::int64_t live_numel() const;

 private:
  int world_, rank_;
  std::vector<UnitShard> units_;
};

}  // namespace zt
