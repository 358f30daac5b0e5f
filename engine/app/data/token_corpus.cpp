// TokenCorpus: shards opened from patterns, windows placed over them, read and checked lazily (see
// [Note: windows over shards] in the header).
#include "engine/app/data/token_corpus.h"

#include <fmt/format.h>
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "engine/base/core/check.h"
#include "engine/base/core/config_text.h"
#include "engine/base/core/philox.h"

namespace zt::data {

namespace {

// 64 uniform bits for sample g of a stream: the draw behind every random window.
std::uint64_t draw_bits(std::uint64_t seed, std::uint32_t stream, std::int64_t sample) {
  const auto g = static_cast<std::uint64_t>(sample);
  const auto r = philox4x32({static_cast<std::uint32_t>(g), static_cast<std::uint32_t>(g >> 32), stream, 0u},
                            {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
  return static_cast<std::uint64_t>(r[0]) | (static_cast<std::uint64_t>(r[1]) << 32);
}

bool has_wildcard(const std::string& pattern) { return pattern.find_first_of("*?[") != std::string::npos; }

std::string with_commas(std::int64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

std::vector<std::string> expand_pattern(const std::string& pattern, const std::string& key) {
  if (!has_wildcard(pattern)) return {pattern};
  // A file whose name holds a wildcard character ("shard[1].bin") is meant as named: glob would
  // read "[1]" as a class and match "shard1.bin" instead. Where the glob also matches other files,
  // neither reading is sure.
  std::error_code ec;
  const bool literal = std::filesystem::exists(pattern, ec);
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &g);
  std::vector<std::string> paths;
  if (rc == 0) paths.assign(g.gl_pathv, g.gl_pathv + g.gl_pathc);
  ::globfree(&g);
  if (literal) {
    // "v*.bin" matches the file "v*.bin" itself: only other files make it ambiguous.
    std::erase_if(paths, [&](const std::string& p) { return std::filesystem::equivalent(p, pattern, ec); });
    if (rc == 0 && !paths.empty()) {
      throw_input_error(
          "{}: '{}' names a file, and as a pattern also matches {} other file(s) ('{}' first); escape its wildcard "
          "characters with a backslash (\\*, \\?, \\[) to mean the file, or rename it",
          key, pattern, paths.size(), paths.front());
    }
    return {pattern};
  }
  if (rc == GLOB_NOMATCH || (rc == 0 && paths.empty())) {
    // A list meant and broken (["a.bin",]) is read as one pattern: its JSON's fault said too (not
    // of a glob such as "[0-9]*.bin", which holds no quote).
    throw_input_error(
        "{}: pattern '{}' matches no file{}", key, pattern,
        pattern.starts_with('[') && pattern.find('"') != std::string::npos ? json_word_hint(pattern) : "");
  }
  if (rc != 0) {
    // The folder before the first wildcard: a typo there is the usual cause, and says which.
    const std::size_t wild = pattern.find_first_of("*?[");
    const std::size_t slash = pattern.rfind('/', wild);
    const std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : pattern.substr(0, slash);
    if (!std::filesystem::is_directory(folder, ec)) {
      throw_input_error("{}: pattern '{}': no folder {}", key, pattern, folder);
    }
    throw_input_error("{}: cannot read the folders of pattern '{}'", key, pattern);
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

bool parse_sample_order(const std::string& text, SampleOrder* out) {
  if (text == "random") {
    *out = SampleOrder::kRandom;
  } else if (text == "sequential") {
    *out = SampleOrder::kSequential;
  } else {
    return false;
  }
  return true;
}

std::int64_t sample_window_start(std::uint64_t seed, std::uint32_t stream, std::int64_t sample, std::int64_t n_tokens,
                                 int T) {
  ZT_CHECK(T > 0 && n_tokens > T, "n_tokens {} T {}", n_tokens, T);
  ZT_CHECK(sample >= 0, "sample {}", sample);
  // The modulo bias is below (n_tokens - T) / 2^64: negligible for any real corpus.
  return static_cast<std::int64_t>(draw_bits(seed, stream, sample) % static_cast<std::uint64_t>(n_tokens - T));
}

TokenCorpus::TokenCorpus(TokenSpan tokens) : token_count_(tokens.size()) { shards_.push_back({"", tokens, -1}); }

TokenCorpus TokenCorpus::open_shards(const std::vector<std::string>& patterns, TokenFileFormat format, int vocab_size,
                                     const std::string& key) {
  ZT_CHECK(!patterns.empty() && vocab_size > 0, "{} patterns, vocab {}", patterns.size(), vocab_size);
  std::vector<std::string> paths;
  // One file under two names (./a.bin and a.bin, an absolute path beside a pattern, a symlink)
  // would be read as two shards, drawn twice as often: the same file is the same device and inode.
  std::map<std::pair<dev_t, ino_t>, std::string> seen_files;
  std::set<std::string> seen_names;
  for (const std::string& pattern : patterns) {
    for (std::string& path : expand_pattern(pattern, key)) {
      if (!seen_names.insert(path).second) throw_input_error("{}: {} is listed twice", key, path);
      struct stat st {};
      if (::stat(path.c_str(), &st) == 0) {
        const auto [it, added] = seen_files.emplace(std::pair{st.st_dev, st.st_ino}, path);
        if (!added) throw_input_error("{}: {} is listed twice (as {} too: the same file)", key, path, it->second);
      }
      paths.push_back(std::move(path));
    }
  }
  TokenCorpus c;
  c.vocab_size_ = vocab_size;
  c.files_.reserve(paths.size());
  for (const std::string& path : paths) {
    TokenFile f = TokenFile::open(path, format, vocab_size, TokenCheck::kHeader);
    if (!c.files_.empty() && f.kind() != c.files_.front().kind()) {
      throw_input_error("{}: {} holds {} tokens but {} holds {}: one format per split", key, path, f.kind(),
                        c.files_.front().path(), c.files_.front().kind());
    }
    c.files_.push_back(std::move(f));
  }
  for (std::size_t i = 0; i < c.files_.size(); ++i) {
    c.shards_.push_back({c.files_[i].path(), c.files_[i].tokens(), static_cast<int>(i)});
    c.token_count_ += c.files_[i].tokens().size();
  }
  c.kind_ = c.files_.front().kind();
  return c;
}

std::string TokenCorpus::describe() const {
  const int n = shard_count();
  return fmt::format("{} shard{}{}, {} tokens", n, n == 1 ? "" : "s", kind_.empty() ? "" : " (" + kind_ + ")",
                     with_commas(token_count_));
}

const std::vector<std::int64_t>& TokenCorpus::prefix(SampleOrder order, int T) const {
  const int k = order == SampleOrder::kRandom ? 0 : 1;
  if (cached_T_[k] != T) {
    std::vector<std::int64_t>& p = cached_prefix_[k];
    p.assign(1, 0);
    for (const Shard& s : shards_) {
      const std::int64_t n = s.tokens.size();
      const std::int64_t windows = order == SampleOrder::kRandom ? std::max<std::int64_t>(0, n - T) : (n - 1) / T;
      p.push_back(p.back() + windows);
    }
    cached_T_[k] = T;
  }
  return cached_prefix_[k];
}

std::int64_t TokenCorpus::window_count(SampleOrder order, int T) const {
  ZT_CHECK(T > 0, "T {}", T);
  return prefix(order, T).back();
}

WindowPlace TokenCorpus::place(SampleOrder order, std::uint64_t seed, std::uint32_t stream, std::int64_t sample,
                               int T) const {
  ZT_CHECK(sample >= 0, "sample {}", sample);
  const std::vector<std::int64_t>& p = prefix(order, T);
  const std::int64_t windows = p.back();
  ZT_CHECK(windows > 0, "no shard holds a window of {} tokens", T + 1);
  const std::int64_t index =
      order == SampleOrder::kRandom
          ? static_cast<std::int64_t>(draw_bits(seed, stream, sample) % static_cast<std::uint64_t>(windows))
          : sample % windows;
  // The shard whose windows [p[i], p[i + 1]) hold index (shards without a window are skipped).
  const auto shard = static_cast<int>(std::upper_bound(p.begin(), p.end(), index) - p.begin()) - 1;
  const std::int64_t offset = index - p[static_cast<std::size_t>(shard)];
  return {shard, order == SampleOrder::kRandom ? offset : offset * T};
}

void TokenCorpus::read_window(WindowPlace w, int T, std::int32_t* inputs, std::int32_t* targets) const {
  const Shard& s = shards_.at(static_cast<std::size_t>(w.shard));
  ZT_CHECK(w.start >= 0 && w.start + T + 1 <= s.tokens.size(), "window [{}, +{}] in a shard of {}", w.start, T + 1,
           s.tokens.size());
  const TokenSpan t = s.tokens;
  if (vocab_size_ > 0) {
    for (std::int64_t i = w.start; i <= w.start + T; ++i) {
      if (t[i] >= static_cast<std::uint32_t>(vocab_size_)) {
        throw_token_outside_vocab(s.name, t[i], i, vocab_size_);
      }
    }
  }
  for (int i = 0; i < T; ++i) {
    if (inputs != nullptr) inputs[i] = static_cast<std::int32_t>(t[w.start + i]);
    if (targets != nullptr) targets[i] = static_cast<std::int32_t>(t[w.start + i + 1]);
  }
  if (s.file >= 0) files_[static_cast<std::size_t>(s.file)].release_pages(w.start, T + 1);
}

void TokenCorpus::count_range(int shard, std::int64_t begin, std::int64_t n, std::vector<std::int64_t>& counts) const {
  const Shard& s = shards_[static_cast<std::size_t>(shard)];
  const auto vocab = static_cast<std::uint32_t>(counts.size());
  for (std::int64_t i = begin; i < begin + n; ++i) {
    const std::uint32_t tok = s.tokens[i];
    if (tok >= vocab) {
      if (vocab_size_ > 0) {
        throw_token_outside_vocab(s.name, tok, i, vocab_size_);
      }
      throw InternalError(fmt::format("token {} outside vocabulary of {}", tok, vocab));
    }
    ++counts[tok];
  }
  if (s.file >= 0) files_[static_cast<std::size_t>(s.file)].release_pages(begin, n);
}

std::vector<std::int64_t> TokenCorpus::token_counts(int vocab_size, std::int64_t max_tokens) const {
  ZT_CHECK(vocab_size > 0 && max_tokens > 0, "vocab {} max_tokens {}", vocab_size, max_tokens);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(vocab_size), 0);
  if (token_count_ <= max_tokens) {
    for (int i = 0; i < shard_count(); ++i)
      count_range(i, 0, shards_[static_cast<std::size_t>(i)].tokens.size(), counts);
    return counts;
  }
  // 64 blocks at evenly spaced global positions, each cut where it crosses into the next shard.
  constexpr int kBlocks = 64;
  const std::int64_t block = max_tokens / kBlocks, stride = token_count_ / kBlocks;
  int shard = 0;
  std::int64_t shard_first = 0;  // global position of the shard's token 0
  for (int b = 0; b < kBlocks; ++b) {
    const std::int64_t pos = b * stride;
    while (pos >= shard_first + shards_[static_cast<std::size_t>(shard)].tokens.size()) {
      shard_first += shards_[static_cast<std::size_t>(shard)].tokens.size();
      ++shard;
    }
    const std::int64_t begin = pos - shard_first;
    count_range(shard, begin, std::min(block, shards_[static_cast<std::size_t>(shard)].tokens.size() - begin), counts);
  }
  return counts;
}

}  // namespace zt::data
