// Token files on disk, memory-mapped read-only: llm.c's format (256 x int32 header: magic
// 20240520, version 1, token count; then uint16 tokens; the file size must match) and nanoGPT's
// raw uint16 .bin. Opening validates everything once (header, size, every token < vocab), so
// training never meets a bad token; errors are InputErrors naming the file and the fault.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace zt::data {

enum class TokenFileFormat { kAuto, kLlmc, kNanoGpt };

constexpr std::int32_t kLlmcTokenMagic = 20240520;
constexpr std::int32_t kLlmcTokenVersion = 1;
constexpr std::int64_t kLlmcHeaderBytes = 256 * 4;

// "auto", "llmc", "nanogpt" -> format; false if none matches.
bool parse_token_file_format(const std::string& text, TokenFileFormat* out);

class TokenFile {
 public:
  // kAuto picks llm.c when the file starts with its magic, raw uint16 otherwise.
  static TokenFile open(const std::string& path, TokenFileFormat format, int vocab_size);

  TokenFile(TokenFile&& o) noexcept;
  TokenFile& operator=(TokenFile&& o) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  ~TokenFile();

  std::span<const std::uint16_t> tokens() const { return {tokens_, static_cast<std::size_t>(count_)}; }
  TokenFileFormat format() const { return format_; }
  const std::string& path() const { return path_; }

 private:
  TokenFile() = default;
  std::string path_;
  TokenFileFormat format_ = TokenFileFormat::kLlmc;
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  const std::uint16_t* tokens_ = nullptr;
  std::int64_t count_ = 0;
};

// Writes tokens in llm.c's format to a temporary file renamed into place (never half-written).
void write_llmc_token_file(const std::string& path, std::span<const std::uint16_t> tokens);

}  // namespace zt::data
