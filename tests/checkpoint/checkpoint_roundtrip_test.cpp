// Save with N ranks at a ZeRO stage, load on M ranks under any layout: every value byte-exact,
// and each loading rank reads only (about) the bytes it needs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "engine/app/checkpoint/checkpoint_folder.h"
#include "engine/distributed/comm/local_communicator.h"
#include "tests/checkpoint/checkpoint_test_util.h"

namespace zt::ckpt {
namespace {

using testing::RankState;

std::string fresh_dir(const std::string& tag) {
  std::string tmpl = (std::filesystem::temp_directory_path() / ("zt_ckpt_" + tag + "_XXXXXX")).string();
  return mkdtemp(tmpl.data());
}

TEST(CheckpointRoundTrip, EveryNToEveryMIsByteExact) {
  const ParamTable table = testing::odd_table();
  for (int stage : {0, 1}) {
    for (int n = 1; n <= 4; ++n) {
      const std::string folder = fresh_dir("nm");
      const std::string dir = testing::save_simulated(folder, table, n, stage, 3);
      const CheckpointReader reader(dir);
      EXPECT_EQ(reader.manifest().world_size, n);
      for (int m = 1; m <= 5; ++m) {
        for (int q = 0; q < m; ++q) {
          RankState loaded(table, m, q);
          load_optimizer_state(reader, table, loaded.target());
          EXPECT_EQ(loaded.mismatches(), 0)
              << "saved by " << n << " ranks at stage " << stage << ", loaded on rank " << q << " of " << m;
        }
      }
      RankState whole(table, 1, 0);  // a stage-0 loader: every unit whole
      load_optimizer_state(reader, table, whole.target());
      EXPECT_EQ(whole.mismatches(), 0) << "saved by " << n << " ranks, loaded whole";
      std::filesystem::remove_all(folder);
    }
  }
}

TEST(CheckpointRoundTrip, RankFilesHoldTheNWaySplitWithoutDuplicates) {
  const ParamTable table = testing::odd_table();
  const std::string folder = fresh_dir("split");
  const CheckpointReader reader(testing::save_simulated(folder, table, 3, /*stage=*/0, 1));
  std::int64_t bytes = 0;
  for (const RankFile& f : reader.manifest().files) bytes += f.bytes;
  EXPECT_EQ(bytes, table.total_numel() * 4 * kNumStateKinds);  // stage 0 replicas: each element once
  EXPECT_EQ(reader.manifest().files[0].segments[0].end, 14);   // unit 0: 41 elements, s = 14
  std::filesystem::remove_all(folder);
}

TEST(CheckpointRoundTrip, SameLayoutReadsOnlyItsOwnFile) {
  const ParamTable table = testing::odd_table();
  const std::string folder = fresh_dir("own");
  const std::string dir = testing::save_simulated(folder, table, 3, 2, 1);
  for (int q = 0; q < 3; ++q) {
    const CheckpointReader reader(dir);
    RankState loaded(table, 3, q);
    load_optimizer_state(reader, table, loaded.target());
    EXPECT_EQ(loaded.mismatches(), 0);
    // Its own file, each chunk read and verified once, and nothing else.
    EXPECT_EQ(reader.bytes_read(), reader.manifest().files[static_cast<std::size_t>(q)].bytes);
  }
  std::filesystem::remove_all(folder);
}

TEST(CheckpointRoundTrip, MultiChunkFilesReshardExactlyAndReadBoundedBytes) {
  const ParamTable table = testing::big_table();
  const std::string folder = fresh_dir("big");
  const std::string dir = testing::save_simulated(folder, table, 2, 3, 9);
  const CheckpointReader whole_reader(dir);
  whole_reader.verify_checksums();
  EXPECT_GT(whole_reader.manifest().files[0].chunk_crc32.size(), 2u);
  std::int64_t total = 0;
  for (const RankFile& f : whole_reader.manifest().files) total += f.bytes;
  for (int m : {1, 3, 4}) {
    for (int q = 0; q < m; ++q) {
      const CheckpointReader reader(dir);
      RankState loaded(table, m, q);
      load_optimizer_state(reader, table, loaded.target());
      EXPECT_EQ(loaded.mismatches(), 0) << "rank " << q << " of " << m;
      // What it needs, plus at most one chunk at each end of each (file, segment) piece it reads.
      const std::int64_t needed = loaded.layout.live_numel() * 4 * kNumStateKinds;
      const std::int64_t pieces = 2 * kNumStateKinds * static_cast<std::int64_t>(table.units().size());
      EXPECT_LE(reader.bytes_read(), needed + 2 * pieces * kChecksumChunkBytes);
      if (m == 1) {
        EXPECT_EQ(reader.bytes_read(), total);  // everything, each chunk once
      }
    }
  }
  std::filesystem::remove_all(folder);
}

TEST(CheckpointSave, CollectiveSaveOnOneRankWritesManifestAndLatest) {
  const ParamTable table = testing::odd_table();
  const std::string folder = fresh_dir("local") + "/checkpoints";  // created by the save
  MemoryTracker tracker;
  LocalCommunicator comm(tracker, {});
  RankState state(table, 1, 0);
  state.fill();
  CheckpointMeta meta;
  meta.position = {42, 4200, 168, 40};
  meta.zero_stage = 0;
  meta.param_dtype = "bf16";
  meta.model = {{"n_layer", 2}};
  meta.config = {{"train", {{"seed", 5}}}};
  meta.extra = {{"skipped_steps", 2}};
  const SaveResult saved = save_checkpoint(comm, folder, table, state.source(), meta, 0);
  EXPECT_EQ(saved.path, folder + "/step_00000042");
  EXPECT_EQ(saved.rank_bytes, table.total_numel() * 12);
  EXPECT_EQ(read_latest(folder), "step_00000042");
  const CheckpointReader reader(saved.path);
  reader.verify_checksums();
  const Manifest& m = reader.manifest();
  EXPECT_EQ(m.position.step, 42);
  EXPECT_EQ(m.position.tokens_seen, 4200);
  EXPECT_EQ(m.position.next_sample_index, 168);
  EXPECT_EQ(m.position.optimizer_step, 40);
  EXPECT_EQ(m.param_dtype, "bf16");
  EXPECT_EQ(m.config["train"]["seed"], 5);
  EXPECT_EQ(m.extra["skipped_steps"], 2);
  EXPECT_EQ(table_difference(m.table, table), "");
  EXPECT_FALSE(std::filesystem::exists(temp_dir_for(folder, 42)));
  std::filesystem::remove_all(std::filesystem::path(folder).parent_path());
}

// Another model is refused naming the first difference: the weight-decay flags too (a manifest
// edited to decay a LayerNorm gain was taken, the model's own flags used in silence).
TEST(TableDifference, NamesADifferentWeightDecayFlag) {
  auto table = [](bool gain_decays) {
    ParamTable t;
    t.add_unit("h.0");
    t.add_param("w", {4, 3}, {4, 3}, true);
    t.add_param("ln.weight", {3}, {3}, gain_decays);
    return t;
  };
  EXPECT_EQ(table_difference(table(false), table(false)), "");
  EXPECT_EQ(table_difference(table(true), table(false)), "'ln.weight' takes weight decay vs takes none");
}

}  // namespace
}  // namespace zt::ckpt
