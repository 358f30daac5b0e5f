// AsyncCheckpointer on one rank: the time the training thread spent in a save is the sum of its
// parts (the staging copy at start, each poll, the final wait), never only the last of them. The
// end-to-end tests' saves stage in well under a millisecond, so a blocked time that kept only the
// last wait passed them; here the copy is made slow.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include "engine/app/checkpoint/async_checkpoint.h"
#include "engine/distributed/comm/local_communicator.h"
#include "kernels/exec_context.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/checkpoint/temp_folder_test.h"

namespace zt::ckpt {
namespace {

using AsyncCheckpointerOneRank = testing::TempFolderTest;

TEST_F(AsyncCheckpointerOneRank, BlockedTimeCountsTheStagingAndEveryWait) {
  const ParamTable table = testing::odd_table();
  MemoryTracker tracker;
  LocalCommunicator world(tracker, CommOptions{});
  const ExecContext ctx;
  AsyncCheckpointer saver(world, &world, ctx, rank_file_bytes(table, 1, 0));
  testing::RankState state(table, 1, 0);
  state.fill();
  const StateCopy slow_copy = [](TensorView dst, TensorView src) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // each segment's copy
    std::memcpy(dst.data, src.data, static_cast<std::size_t>(src.numel()) * 4);
  };
  CheckpointMeta meta;
  meta.position = {3, 300, 12, 3};
  meta.model = {{"kind", "test"}};
  meta.config = {{"train", {{"seed", 7}}}};
  const double staging = saver.start(folder_, table, state.source(), slow_copy, meta, 0);
  EXPECT_GE(staging, 0.1) << "the staging copy blocks the caller";
  // A step boundary: at most the files written and the commit started, never the result yet.
  EXPECT_FALSE(saver.poll().has_value());
  const std::optional<SaveResult> result = saver.finish();
  ASSERT_TRUE(result.has_value());
  EXPECT_GE(result->blocked_seconds, staging) << "the save's blocked time left out its staging";
  EXPECT_LE(result->blocked_seconds, result->seconds);
  EXPECT_EQ(result->step, 3);
}

}  // namespace
}  // namespace zt::ckpt
