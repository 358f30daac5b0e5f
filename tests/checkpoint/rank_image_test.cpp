// An asynchronous save's rank file (write_rank_image): written in pieces of 64 MiB at their own
// offsets, so an image past one piece reads back byte for byte, with one checksum a chunk of the
// bytes as they lie on disk. The saves the tests train are far smaller than one piece: a piece
// written at the wrong offset passed every test until this one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/app/checkpoint/async_checkpoint.h"
#include "engine/app/checkpoint/checkpoint_manifest.h"
#include "engine/app/checkpoint/durable_file.h"
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

}  // namespace
}  // namespace zt::ckpt
