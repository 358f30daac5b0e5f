// The optimizer's decay runs: every parameter element of a unit's shard in exactly one run, with
// its parameter's decay flag, adjacent parameters of equal flag merged, and nothing else (no
// padding), for whole units and for shards that cut parameters anywhere (1-5 ranks).
#include <gtest/gtest.h>

#include <vector>

#include "engine/distributed/optim/sharded_adamw.h"
#include "engine/distributed/sharding/shard_layout.h"
#include "models/gpt/gpt_params.h"

namespace zt {
namespace {

gpt::GptConfig small_gpt() {
  gpt::GptConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 12;
  c.block_size = 8;
  c.vocab_size = 10;
  return c;
}

TEST(DecayRuns, WholeBlockMergesAdjacentParametersOfEqualFlag) {
  const ParamTable table = gpt::build_param_table(small_gpt());
  const ShardLayout whole(table, 1, 0);
  const std::vector<DecayRun> runs = decay_runs(table, gpt::block_unit(0), whole.unit(gpt::block_unit(0)));
  // ln_1.{w,b} | c_attn.w | c_attn.b | c_proj.w | c_proj.b, ln_2.{w,b} | c_fc.w | c_fc.b | c_proj.w | c_proj.b
  ASSERT_EQ(runs.size(), 9u);
  for (std::size_t i = 1; i < runs.size(); ++i) {
    EXPECT_NE(runs[i].decays, runs[i - 1].decays) << "adjacent runs of one flag were not merged";
    EXPECT_EQ(runs[i].at, runs[i - 1].at + runs[i - 1].n) << "a block's parameters are contiguous";
  }
  EXPECT_EQ(runs.front().at, 0);
  EXPECT_EQ(runs.back().at + runs.back().n, whole.unit(gpt::block_unit(0)).numel);
}

TEST(DecayRuns, EveryShardElementOnceWithItsParametersFlag) {
  const ParamTable table = gpt::build_param_table(small_gpt());
  for (int world = 1; world <= 5; ++world) {
    for (std::size_t u = 0; u < table.units().size(); ++u) {
      const int unit = static_cast<int>(u);
      // The flag each element of the unit must get, from the table; -1 where no parameter lies.
      std::vector<int> want(static_cast<std::size_t>(ShardLayout(table, world, 0).unit(unit).padded), -1);
      for (int index : table.units()[u].params) {
        const ParamSpec& p = table.param(index);
        for (std::int64_t i = p.offset; i < p.offset + p.numel; ++i) want[static_cast<std::size_t>(i)] = p.decays;
      }
      std::vector<int> covered(want.size(), 0);
      for (int rank = 0; rank < world; ++rank) {
        const UnitShard s = ShardLayout(table, world, rank).unit(unit);
        for (const DecayRun& r : decay_runs(table, unit, s)) {
          ASSERT_GT(r.n, 0);
          for (std::int64_t i = s.begin + r.at; i < s.begin + r.at + r.n; ++i) {
            ASSERT_LT(i, s.end) << "a run reaches past the shard's real elements";
            ++covered[static_cast<std::size_t>(i)];
            ASSERT_EQ(want[static_cast<std::size_t>(i)], r.decays ? 1 : 0) << "world " << world << " unit " << unit;
          }
        }
      }
      for (std::size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(covered[i], want[i] >= 0 ? 1 : 0) << "world " << world << " unit " << unit << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace zt
