// llm.c's model file header: a file whose size matches its header is read; dimensions past the
// model keys' ranges are refused from the header alone, before anything is sized by them (a layer
// count of 10^9 built a tensor list until memory ran out), and in range the expected size does not
// overflow.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <string>
#include <vector>

#include "engine/app/io/llmc_model_file.h"
#include "engine/base/core/check.h"

namespace zt {
namespace {

std::string write_llmc(const char* name, const LlmcModelHeader& h, std::int64_t payload_bytes) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream out(path, std::ios::binary);
  const std::vector<std::int32_t> words = llmc_header_words(h);
  out.write(reinterpret_cast<const char*>(words.data()), static_cast<std::streamsize>(words.size() * 4));
  const std::vector<char> zeros(static_cast<std::size_t>(payload_bytes), 0);
  out.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  return path;
}

std::string llmc_read_error(const std::string& path) {
  try {
    (void)read_llmc_model_header(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(LlmcModelFile, AFileOfItsHeadersSizeIsRead) {
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    const LlmcModelHeader h{16, 10, 2, 2, 8, 64, dtype};
    std::int64_t elements = 0;
    for (const LlmcTensor& t : llmc_model_tensors(h)) elements += t.rows * t.cols;
    const std::int64_t bytes = elements * static_cast<std::int64_t>(dtype_size_bytes(dtype));
    const LlmcModelHeader read = read_llmc_model_header(write_llmc("model_ok.bin", h, bytes));
    EXPECT_EQ(read.n_layer, 2);
    EXPECT_EQ(read.padded_vocab, 64);
    EXPECT_NE(llmc_read_error(write_llmc("model_short.bin", h, bytes - 2)).find("needs"), std::string::npos);
  }
}

TEST(LlmcModelFile, DimensionsPastTheModelKeysRangesAreRefusedFromTheHeader) {
  const LlmcModelHeader fine{16, 10, 2, 2, 8, 64, DType::kF32};
  for (const auto& [what, h] : {std::pair{"layers", LlmcModelHeader{16, 10, 1000000000, 2, 8, 64, DType::kF32}},
                                std::pair{"width", LlmcModelHeader{16, 10, 2, 2, 1000000000, 64, DType::kF32}},
                                std::pair{"positions", LlmcModelHeader{1 << 21, 10, 2, 2, 8, 64, DType::kF32}},
                                std::pair{"heads", LlmcModelHeader{16, 10, 2, 2048, 2048, 64, DType::kF32}},
                                std::pair{"vocabulary", LlmcModelHeader{16, 10, 2, 2, 8, 1 << 25, DType::kF32}}}) {
    SCOPED_TRACE(what);
    EXPECT_NE(llmc_read_error(write_llmc("model_huge.bin", h, 64)).find("dimensions out of range"), std::string::npos);
  }
  // The largest header in range: its expected size is computed, not overflowed, and refused.
  const LlmcModelHeader largest{1 << 20, 1 << 24, 1024, 1024, 1 << 20, (1 << 24) + 64, DType::kF32};
  const std::string error = llmc_read_error(write_llmc("model_largest.bin", largest, 64));
  const std::int64_t C = std::int64_t{1} << 20;
  const std::int64_t elements = ((std::int64_t{1} << 24) + 64 + C) * C + 1024 * (12 * C * C + 13 * C) + 2 * C;
  EXPECT_NE(error.find(fmt::format("needs {}", 1024 + 4 * elements)), std::string::npos) << error;
  EXPECT_EQ(llmc_read_error(write_llmc("model_fine.bin", fine, 0)).find("dimensions"), std::string::npos);
  // A padded vocabulary below the vocabulary, in a file of the size its header gives: read, its
  // tensors would lie at offsets shifted from a real file's (the weights loaded wrong, exit 0).
  const LlmcModelHeader short_padding{16, 10, 2, 2, 8, 9, DType::kF32};
  const std::int64_t short_elements = (9 + 16) * 8 + 2 * (12 * 8 * 8 + 13 * 8) + 2 * 8;
  EXPECT_NE(llmc_read_error(write_llmc("model_short_padding.bin", short_padding, 4 * short_elements))
                .find("dimensions out of range"),
            std::string::npos);
}

}  // namespace
}  // namespace zt
