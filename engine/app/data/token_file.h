// Token files on disk, memory-mapped read-only: llm.c's format (256 x int32 header: magic, version,
// token count; then the tokens; the file size must match) in its two kinds, GPT-2's (magic
// 20240520, version 1, uint16 tokens) and Llama 3's (magic 20240801, version 7, uint32 tokens, for
// vocabularies above 65,535), and nanoGPT's raw uint16 .bin. Opening validates everything once
// (header, size, every token < vocab), so training never meets a bad token; errors are
// InputErrors naming the file and the fault.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/app/data/token_span.h"

namespace zt::data {

enum class TokenFileFormat { kAuto, kLlmc, kNanoGpt };

// Whether opening reads every token to check it against the vocabulary (kAll), or only the header
// and size (kHeader: the reader checks what it reads).
enum class TokenCheck { kAll, kHeader };

constexpr std::int32_t kLlmcTokenMagic = 20240520;  // GPT-2 tokens, uint16
constexpr std::int32_t kLlmcTokenVersion = 1;
constexpr std::int32_t kLlmcToken32Magic = 20240801;  // Llama 3 tokens, uint32
constexpr std::int32_t kLlmcToken32Version = 7;
constexpr std::int64_t kLlmcHeaderBytes = 256 * 4;

// The magic `path` starts with where it is one of llm.c's two token magics, else 0 (no such
// file, no regular file, a shorter one, or other contents): a corpus's shard, told apart from
// other .bin files.
std::int32_t llmc_token_magic(const std::string& path);

// "auto", "llmc", "nanogpt" -> format; false if none matches.
bool parse_token_file_format(const std::string& text, TokenFileFormat* out);

class TokenFile {
 public:
  // kAuto picks llm.c when the file starts with either magic, and refuses a file whose header is
  // llm.c's in all but the magic (version and token count matching its size) by naming the magic;
  // anything else is raw uint16.
  static TokenFile open(const std::string& path, TokenFileFormat format, int vocab_size,
                        TokenCheck check = TokenCheck::kAll);

  TokenFile(TokenFile&& o) noexcept;
  TokenFile& operator=(TokenFile&& o) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  ~TokenFile();

  TokenSpan tokens() const;
  int bytes_per_token() const { return bytes_per_token_; }
  TokenFileFormat format() const { return format_; }
  const std::string& path() const { return path_; }
  // "llm.c uint16", "llm.c uint32" or "nanoGPT raw uint16": what a list of shards must share.
  std::string kind() const;
  // Drops the mapped pages that hold tokens [begin, begin + count) from this process's resident
  // set (the page cache keeps them; a later read maps them again), so reading a corpus larger than
  // memory leaves the resident size where it was.
  void release_pages(std::int64_t begin, std::int64_t count) const;

 private:
  TokenFile() = default;
  std::string path_;
  TokenFileFormat format_ = TokenFileFormat::kLlmc;
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  const void* tokens_ = nullptr;
  std::int64_t count_ = 0;
  int bytes_per_token_ = 2;
};

// The one error for a token id at or past the vocabulary: "<file>: token T at position P is outside
// the vocabulary (size V)". Thrown by a file checked whole and by shards checked as they are read.
[[noreturn]] void throw_token_outside_vocab(const std::string& file, std::uint32_t token, std::int64_t position,
                                            int vocab_size);

// Writes tokens in llm.c's format to a temporary file, synced and renamed into place (never
// half-written).
void write_llmc_token_file(const std::string& path, std::span<const std::uint16_t> tokens);
// The same bytes into `path` itself, synced: for a name that is already a staging one (StagedFiles).
void write_llmc_tokens_at(const std::string& path, std::span<const std::uint16_t> tokens);

}  // namespace zt::data
