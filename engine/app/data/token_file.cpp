// Token files: memory-mapped reading with full validation (llm.c header and size, nanoGPT raw
// size, every token inside the vocabulary) and atomic writing in llm.c's format. Every error is
// one line that starts with the file's path.
#include "engine/app/data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "engine/app/data/choice_file.h"
#include "engine/app/data/mapped_files.h"
#include "engine/app/io/input_file.h"
#include "engine/app/io/llmc_model_file.h"
#include "engine/app/io/output_file.h"
#include "engine/base/core/check.h"

namespace zt::data {

namespace {

const char* format_name(TokenFileFormat f) {
  switch (f) {
    case TokenFileFormat::kAuto: return "auto";
    case TokenFileFormat::kLlmc: return "llm.c";
    case TokenFileFormat::kNanoGpt: return "nanoGPT raw uint16";
  }
  return "?";
}

// Closes a file descriptor on every path out of a scope.
struct FdGuard {
  int fd = -1;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

// Writes all of `bytes`, retrying short writes; false on error (errno set).
bool write_all(int fd, const void* data, std::size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

bool parse_token_file_format(const std::string& text, TokenFileFormat* out) {
  if (text == "auto")
    *out = TokenFileFormat::kAuto;
  else if (text == "llmc")
    *out = TokenFileFormat::kLlmc;
  else if (text == "nanogpt")
    *out = TokenFileFormat::kNanoGpt;
  else
    return false;
  return true;
}

namespace {

// An llm.c token file's kind: its magic, version and token width.
struct LlmcKind {
  std::int32_t magic, version;
  int bytes_per_token;
};
constexpr LlmcKind kLlmcKinds[] = {{kLlmcTokenMagic, kLlmcTokenVersion, 2},
                                   {kLlmcToken32Magic, kLlmcToken32Version, 4}};

const LlmcKind* llmc_kind(std::int32_t magic) {
  for (const LlmcKind& k : kLlmcKinds) {
    if (k.magic == magic) return &k;
  }
  return nullptr;
}

}  // namespace

std::int32_t llmc_token_magic(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return 0;  // a FIFO's open would wait for a writer
  std::ifstream in(path, std::ios::binary);
  std::int32_t magic = 0;
  if (!in.read(reinterpret_cast<char*>(&magic), sizeof(magic))) return 0;
  return llmc_kind(magic) != nullptr ? magic : 0;
}

namespace {

// Whether a header is llm.c's in all but the magic: a small version and a token count that, at 2 or
// 4 bytes a token, is exactly the rest of the file. Raw uint16 tokens almost never look so.
bool looks_like_llmc_header(const std::array<std::int32_t, 3>& h, std::int64_t size_bytes) {
  if (h[1] < 1 || h[1] > 255 || h[2] <= 0) return false;
  const std::int64_t rest = size_bytes - kLlmcHeaderBytes;
  return rest == 2 * std::int64_t{h[2]} || rest == 4 * std::int64_t{h[2]};
}

// Whether the header is llm.c's in its shape: a small version word and the words past magic,
// version and count zero, as llm.c writes them. A damaged llm.c file (another magic, the file cut
// or grown, or the header wiped) keeps that shape, where raw uint16 tokens would be a third token
// pair whose second is 0 and 506 tokens of id 0 in a row (padded data with a pad id of 0 still
// reads as raw tokens).
bool has_llmc_header_padding(const std::array<std::int32_t, 3>& h, const unsigned char* bytes,
                             std::int64_t size_bytes) {
  if (size_bytes < kLlmcHeaderBytes || h[1] < 0 || h[1] > 255) return false;
  return std::all_of(bytes + 3 * sizeof(std::int32_t), bytes + kLlmcHeaderBytes,
                     [](unsigned char b) { return b == 0; });
}

}  // namespace

TokenFile TokenFile::open(const std::string& path, TokenFileFormat format, int vocab_size, TokenCheck check) {
  ZT_CHECK(vocab_size > 0, "vocab_size {}", vocab_size);
  TokenFile f;
  f.path_ = path;

  require_regular_file(path, "token file");  // a FIFO would block the open below
  // A prepare cut between its renames (zerotrain prepare's, tools/prepare_tokens.py's) left the
  // folder's token files of two preparations mixed, and its marker: refused by whichever key names
  // them (data.dataset said so already; data.train_files and data.train_file read them as whole).
  // The folder that holds the file, and through a symlink the one that holds its target.
  std::error_code ec;
  for (const std::filesystem::path& file : {std::filesystem::path(path), std::filesystem::canonical(path, ec)}) {
    if (file.empty()) continue;  // a path canonical() could not resolve: the open below names it
    const std::filesystem::path marker = file.parent_path() / kIncompleteOutputMarker;
    std::error_code marker_ec;
    if (std::filesystem::exists(marker, marker_ec)) {
      throw_input_error(
          "{}: {} is there: a prepare into that folder was cut before it ended, so its token files may "
          "be of two preparations mixed; run the prepare again",
          path, marker.string());
    }
  }
  FdGuard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) throw_input_error("{}: cannot open token file: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) throw_input_error("{}: cannot stat token file: {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw_input_error("{}: not a regular file", path);
  const auto size_bytes = static_cast<std::int64_t>(st.st_size);
  if (size_bytes == 0) throw_input_error("{}: token file is empty", path);

  void* map = ::mmap(nullptr, static_cast<std::size_t>(size_bytes), PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (map == MAP_FAILED) {
    // One map a shard: past the kernel's vm.max_map_count (65530 by default) the next map fails
    // with ENOMEM, which read as the machine out of memory, naming an innocent shard.
    const int err = errno;
    throw_input_error("{}: cannot map token file: {}{}", path, std::strerror(err),
                      err == ENOMEM ? " (each shard is one memory map: with tens of thousands of shards, the kernel's "
                                      "vm.max_map_count may be reached; use fewer, larger shards or raise it)"
                                    : "");
  }
  f.map_ = map;  // from here on, f's destructor unmaps if validation throws
  f.map_bytes_ = static_cast<std::size_t>(size_bytes);
  register_mapped_file(map, f.map_bytes_, path);  // a fault in it (the file cut under the run) names it
  const auto* bytes = static_cast<const unsigned char*>(map);

  std::array<std::int32_t, 3> header{};  // magic, version, count: as much of them as the file holds
  std::memcpy(header.data(), bytes, static_cast<std::size_t>(std::min<std::int64_t>(size_bytes, sizeof(header))));
  if (format == TokenFileFormat::kAuto) {
    if (size_bytes >= 4 && llmc_kind(header[0]) != nullptr) {
      format = TokenFileFormat::kLlmc;
    } else if (size_bytes >= 4 && (header[0] == kChoiceFileMagic || header[0] == kLlmcModelMagic)) {
      // llm.c's other files: read as raw tokens they scored (or trained on) their headers and
      // numbers, exit 0, where the vocabulary was wide enough.
      throw_input_error(
          "{}: magic {} is llm.c's {}, not a token file{}; set data.format = \"nanogpt\" (zerotrain eval: --format "
          "nanogpt) if it is raw uint16",
          path, header[0], header[0] == kChoiceFileMagic ? "multiple-choice eval file" : "model file",
          header[0] == kChoiceFileMagic ? " (it goes in data.choice_file, or zerotrain eval --choices)"
                                        : " (it goes in train.init_from, or --from)");
    } else if (const bool counted = size_bytes >= kLlmcHeaderBytes && looks_like_llmc_header(header, size_bytes);
               counted || has_llmc_header_padding(header, bytes, size_bytes)) {
      throw_input_error(
          "{}: unknown magic {} in an llm.c-style token file header{} (known: {} for uint16 GPT-2 tokens, "
          "{} for uint32 Llama 3 tokens); set data.format = \"nanogpt\" (zerotrain eval: --format nanogpt) if it "
          "is raw uint16",
          path, header[0], counted ? "" : " (zero past its third word, as llm.c pads it)", kLlmcTokenMagic,
          kLlmcToken32Magic);
    } else if (std::filesystem::path(path).extension() != ".bin") {
      // Raw tokens have no header to recognise them by: a glob's text or JSON file beside the .bin
      // files (nanoGPT's input.txt) would otherwise train as tokens.
      throw_input_error(
          "{}: no llm.c token file header, and not a .bin file: not read as raw uint16 tokens (set data.format = "
          "\"nanogpt\", or zerotrain eval's --format nanogpt, to read it so)",
          path);
    } else {
      format = TokenFileFormat::kNanoGpt;
    }
  }
  f.format_ = format;

  if (format == TokenFileFormat::kLlmc) {
    if (size_bytes < kLlmcHeaderBytes) {
      throw_input_error("{}: file is {} bytes, smaller than llm.c's {}-byte token file header", path, size_bytes,
                        kLlmcHeaderBytes);
    }
    const LlmcKind* kind = llmc_kind(header[0]);
    if (kind == nullptr) {
      throw_input_error("{}: bad magic {} in llm.c token file header (expected {} or {})", path, header[0],
                        kLlmcTokenMagic, kLlmcToken32Magic);
    }
    if (header[1] != kind->version) {
      throw_input_error("{}: unsupported version {} in llm.c token file header (magic {} has version {})", path,
                        header[1], kind->magic, kind->version);
    }
    if (header[2] < 0) throw_input_error("{}: negative token count {} in llm.c header", path, header[2]);
    const std::int64_t expected_bytes = kLlmcHeaderBytes + kind->bytes_per_token * static_cast<std::int64_t>(header[2]);
    if (size_bytes != expected_bytes) {
      throw_input_error("{}: file is {} bytes but the header's token count ({}) implies {}", path, size_bytes,
                        header[2], expected_bytes);
    }
    f.tokens_ = bytes + kLlmcHeaderBytes;
    f.count_ = header[2];
    f.bytes_per_token_ = kind->bytes_per_token;
  } else {
    // Asked for raw tokens (data.format "nanogpt"), a whole llm.c token file would train on its
    // 1024-byte header as 512 tokens: refused, as the auto format reads it (and a resume that
    // changed the format would have moved every window).
    if (const LlmcKind* kind = llmc_kind(header[0]);
        kind != nullptr && size_bytes == kLlmcHeaderBytes + kind->bytes_per_token * std::int64_t{header[2]}) {
      throw_input_error(
          "{}: an llm.c token file (magic {}, {} tokens), not raw uint16 tokens: read as those, its header would be "
          "512 tokens; leave data.format \"auto\" (zerotrain eval: --format auto) to read it",
          path, header[0], header[2]);
    }
    if (size_bytes % 2 != 0) {
      throw_input_error("{}: raw uint16 token file has an odd size ({} bytes)", path, size_bytes);
    }
    f.tokens_ = bytes;
    f.count_ = size_bytes / 2;
  }
  if (f.count_ == 0) throw_input_error("{}: {} token file holds no tokens", path, format_name(format));
  if (f.bytes_per_token_ == 2 && vocab_size > 65536) {  // an id past 65,535 wrapped when it was written
    throw_input_error(
        "{}: {} tokens cannot hold ids of a vocabulary of {} (above 65,535 they wrap): tokenize into llm.c's "
        "uint32 shards (tools/prepare_tokens.py writes them where the tokenizer's ids pass 65,535)",
        path, f.kind(), vocab_size);
  }

  if (check == TokenCheck::kHeader) return f;
  // One pass over every token, so that training can index the embedding without checks.
  const TokenSpan t = f.tokens();
  for (std::int64_t i = 0; i < f.count_; ++i) {
    if (t[i] >= static_cast<std::uint32_t>(vocab_size)) {
      throw_token_outside_vocab(path, t[i], i, vocab_size);
    }
  }
  return f;
}

std::string TokenFile::kind() const {
  if (format_ == TokenFileFormat::kNanoGpt) return "nanoGPT raw uint16";
  return bytes_per_token_ == 4 ? "llm.c uint32" : "llm.c uint16";
}

void TokenFile::release_pages(std::int64_t begin, std::int64_t count) const {
  if (map_ == nullptr || count <= 0) return;
  // A fault maps the pages around the one asked for ("fault-around": an aligned block of up to one
  // page table, 2 MiB), so a read maps pages it never touched. Dropping only the window's pages
  // would leave those, and the next fault in the block would map the dropped ones again: drop the
  // whole 2 MiB blocks the window lies in (a later read there faults them back from the page cache).
  constexpr std::uintptr_t kBlock = std::uintptr_t{2} << 20;
  const auto base = reinterpret_cast<std::uintptr_t>(map_);
  const auto first = reinterpret_cast<std::uintptr_t>(tokens_) + static_cast<std::uintptr_t>(begin * bytes_per_token_);
  const std::uintptr_t last = first + static_cast<std::uintptr_t>(count * bytes_per_token_);
  const std::uintptr_t from = std::max(base, first / kBlock * kBlock);
  const std::uintptr_t to = std::min(base + map_bytes_, (last + kBlock - 1) / kBlock * kBlock);
  // Advice only: a failure leaves the pages resident, which costs memory, not correctness.
  if (to > from) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
}

TokenSpan TokenFile::tokens() const {
  const auto n = static_cast<std::size_t>(count_);
  if (bytes_per_token_ == 4) return std::span<const std::uint32_t>(static_cast<const std::uint32_t*>(tokens_), n);
  return std::span<const std::uint16_t>(static_cast<const std::uint16_t*>(tokens_), n);
}

TokenFile::TokenFile(TokenFile&& o) noexcept
    : path_(std::move(o.path_)),
      format_(o.format_),
      map_(std::exchange(o.map_, nullptr)),
      map_bytes_(std::exchange(o.map_bytes_, 0)),
      tokens_(std::exchange(o.tokens_, nullptr)),
      count_(std::exchange(o.count_, 0)),
      bytes_per_token_(o.bytes_per_token_) {}

TokenFile& TokenFile::operator=(TokenFile&& o) noexcept {
  if (this != &o) {
    if (map_ != nullptr) {
      unregister_mapped_file(map_);
      ::munmap(map_, map_bytes_);
    }
    path_ = std::move(o.path_);
    format_ = o.format_;
    map_ = std::exchange(o.map_, nullptr);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    tokens_ = std::exchange(o.tokens_, nullptr);
    count_ = std::exchange(o.count_, 0);
    bytes_per_token_ = o.bytes_per_token_;
  }
  return *this;
}

TokenFile::~TokenFile() {
  if (map_ != nullptr) {
    unregister_mapped_file(map_);
    ::munmap(map_, map_bytes_);
  }
}

void throw_token_outside_vocab(const std::string& file, std::uint32_t token, std::int64_t position, int vocab_size) {
  throw_input_error("{}: token {} at position {} is outside the vocabulary (size {})", file, token, position,
                    vocab_size);
}

void write_llmc_tokens_at(const std::string& path, std::span<const std::uint16_t> tokens) {
  if (tokens.size() > static_cast<std::size_t>(INT32_MAX)) {
    throw_input_error("{}: {} tokens do not fit llm.c's int32 token count", path, tokens.size());
  }
  std::array<std::int32_t, kLlmcHeaderBytes / 4> header{};
  header[0] = kLlmcTokenMagic;
  header[1] = kLlmcTokenVersion;
  header[2] = static_cast<std::int32_t>(tokens.size());
  FdGuard fd{::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  if (fd.fd < 0) throw_runtime_error("{}: cannot open for writing: {}", path, std::strerror(errno));
  if (!write_all(fd.fd, header.data(), sizeof(header)) || !write_all(fd.fd, tokens.data(), tokens.size_bytes()) ||
      ::fsync(fd.fd) != 0) {
    const int err = errno;
    std::remove(path.c_str());
    throw_runtime_error("{}: write failed: {}", path, std::strerror(err));
  }
}

void write_llmc_token_file(const std::string& path, std::span<const std::uint16_t> tokens) {
  const std::string tmp = staging_path(path);
  const PartialOutput partial(tmp);  // a Ctrl-C while it is written leaves no .tmp
  write_llmc_tokens_at(tmp, tokens);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw_runtime_error("{}: cannot rename '{}' into place: {}", path, tmp, std::strerror(err));
  }
}

}  // namespace zt::data
