// The asynchronous save's pieces (engine/app/checkpoint/async_checkpoint.h) on one rank:
// - its rank file (write_rank_image) is written in pieces of 64 MiB at their own offsets, so an
//   image past one piece reads back byte for byte, with one checksum a chunk of the bytes as they lie
//   on disk (the saves the tests train are far smaller than one piece: a piece written at the wrong
//   offset passed every test until this one);
// - the time the training thread spent in a save is the sum of its parts (the staging copy at
//   start, each poll, the final wait), never only the last of them (the end-to-end saves stage in
//   well under a millisecond, so one that kept only the last wait passed them; here the copy is
//   made slow).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/app/checkpoint/async_checkpoint.h"
#include "engine/app/checkpoint/checkpoint_manifest.h"
#include "engine/app/checkpoint/durable_file.h"
#include "engine/distributed/comm/local_communicator.h"
#include "kernels/exec_context.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/checkpoint/temp_folder_test.h"

namespace zt::ckpt {
namespace {

using RankImage = testing::TempFolderTest;

TEST_F(RankImage, AnImagePastOneWritePieceReadsBackByteForByteWithEachChunksChecksum) {
  // Two pieces and a short third: 64 MiB, 64 MiB, and a remainder that ends mid-chunk.
  const std::int64_t bytes = (std::int64_t{128} << 20) + 4096 + 3;
  std::vector<char> image(static_cast<std::size_t>(bytes));
  for (std::int64_t i = 0; i < bytes; ++i) {  // differs from piece to piece, and within each
    image[static_cast<std::size_t>(i)] = static_cast<char>((static_cast<std::uint64_t>(i) * 2654435761u) >> 13);
  }
  const RankFileWritten written = write_rank_image(folder_, 3, image.data(), bytes);

  std::ifstream in(std::filesystem::path(folder_) / rank_file_name(3), std::ios::binary);
  const std::vector<char> read((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(static_cast<std::int64_t>(read.size()), bytes);
  EXPECT_TRUE(read == image) << "the file is not the image";
  EXPECT_EQ(written.bytes, bytes);
  ASSERT_EQ(static_cast<std::int64_t>(written.chunk_crc32.size()),
            (bytes + kChecksumChunkBytes - 1) / kChecksumChunkBytes);
  for (std::size_t c = 0; c < written.chunk_crc32.size(); ++c) {
    const std::int64_t begin = static_cast<std::int64_t>(c) * kChecksumChunkBytes;
    const std::int64_t n = std::min(kChecksumChunkBytes, bytes - begin);
    ASSERT_EQ(written.chunk_crc32[c], crc32_update(0u, read.data() + begin, n)) << "chunk " << c;
  }
}

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
  const double staging = saver.start(folder_, table, state.source(), slow_copy, testing::simulated_meta(3), 0);
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
