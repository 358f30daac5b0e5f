// The predicted volume of a step of many micro-batches (predict_step_volume): the micro-batches
// between the first and the last repeat each other's counts, which the prediction adds instead of
// replaying. Here the counts at 4..9 micro-batches and at a billion follow the increment from 3 to
// 4 exactly, over the ZeRO options that change what a micro-batch sends. (Against a real run's
// counted bytes at grad_accum 4: tests/sharding/rank_count_invariance_test.py.)
#include <gtest/gtest.h>

#include <string>

#include "engine/distributed/sharding/schedule_replay.h"
#include "models/gpt/gpt_footprint.h"
#include "models/gpt/gpt_params.h"

namespace zt {
namespace {

const gpt::GptConfig kVolumeModel{/*n_layer=*/2, /*n_head=*/2, /*n_embd=*/32, /*block_size=*/16, /*vocab_size=*/65};

// `v` + `times` x (`to` - `from`), field by field.
StepVolume extrapolate(const StepVolume& v, const StepVolume& from, const StepVolume& to, std::int64_t times) {
  StepVolume out = v;
  for (auto field :
       {&StepVolume::in_group, &StepVolume::across_groups, &StepVolume::bytes_in_group,
        &StepVolume::bytes_across_groups, &StepVolume::collectives_in_group, &StepVolume::collectives_across_groups,
        &StepVolume::exposed_gather_bytes, &StepVolume::exposed_gathers}) {
    out.*field += times * (to.*field - from.*field);
  }
  return out;
}

void expect_equal(const StepVolume& got, const StepVolume& want, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(got.in_group, want.in_group);
  EXPECT_EQ(got.across_groups, want.across_groups);
  EXPECT_EQ(got.bytes_in_group, want.bytes_in_group);
  EXPECT_EQ(got.bytes_across_groups, want.bytes_across_groups);
  EXPECT_EQ(got.collectives_in_group, want.collectives_in_group);
  EXPECT_EQ(got.collectives_across_groups, want.collectives_across_groups);
  EXPECT_EQ(got.exposed_gather_bytes, want.exposed_gather_bytes);
  EXPECT_EQ(got.exposed_gathers, want.exposed_gathers);
}

struct Case {
  std::string name;
  ZeroOptions zero;
  int world = 4, replica_groups = 1;
  DType dtype = DType::kF32;
  UnitLayout layout;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int stage = 0; stage < 4; ++stage) {
    Case c{"stage " + std::to_string(stage)};
    c.zero.stage = stage;
    out.push_back(c);
    Case no_overlap = c;
    no_overlap.name += ", no overlap, bf16";
    no_overlap.zero.overlap_comm = false;
    no_overlap.dtype = DType::kBF16;
    out.push_back(no_overlap);
    Case every = c;
    every.name += ", reduce every micro-batch, head in 2 rounds, 3 ranks";
    every.zero.reduce_every_micro_batch = true;
    every.layout.head_chunks = 2;
    every.world = 3;
    out.push_back(every);
    Case hybrid = c;
    hybrid.name += ", hybrid 2 x 2, int8 wires";
    hybrid.world = 2;
    hybrid.replica_groups = 2;
    hybrid.zero.cross_group_grad_wire = WireDType::kInt8;
    if (stage > 0) hybrid.zero.gather_wire = WireDType::kInt8;
    out.push_back(hybrid);
  }
  Case kept{"stage 3, units kept gathered, no prefetch, half-block units"};
  kept.zero.stage = 3;
  kept.zero.reshard_after_forward = false;
  kept.zero.prefetch_units = 0;
  kept.layout.block_units = 2;
  out.push_back(kept);
  Case folded{"stage 2, folded in global order"};
  folded.zero.stage = 2;
  folded.zero.fold_in_global_order = true;
  out.push_back(folded);
  Case one{"stage 3, one rank, collectives kept"};
  one.zero.stage = 3;
  one.zero.solo_path = false;
  one.world = 1;
  out.push_back(one);
  return out;
}

TEST(StepVolume, MicroBatchesBetweenTheFirstAndTheLastAddTheSameCounts) {
  for (const Case& c : cases()) {
    const ParamTable table = gpt::build_param_table(kVolumeModel, c.layout);
    const StepSchedule schedule = gpt::step_schedule(kVolumeModel, c.layout);
    auto volume = [&](int grad_accum) {
      return predict_step_volume(table, c.dtype, c.zero, c.world, schedule, grad_accum, c.replica_groups);
    };
    const StepVolume three = volume(3), four = volume(4);
    if (c.zero.stage >= 2 && c.world > 1) {  // a micro-batch's reduce-scatters
      EXPECT_GT(four.in_group + four.across_groups, three.in_group + three.across_groups) << c.name;
    }
    for (int g : {5, 6, 9})
      expect_equal(volume(g), extrapolate(four, three, four, g - 4), c.name + ", " + std::to_string(g));
    // Added, not replayed: a billion micro-batches count at once.
    const int billion = 1'000'000'000;
    expect_equal(volume(billion), extrapolate(four, three, four, billion - 4), c.name + ", a billion");
  }
}

}  // namespace
}  // namespace zt
