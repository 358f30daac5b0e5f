// One split of a run's tokens (training or validation) as the batch sampler reads it: one span in
// memory (the embedded dataset, a single token file) or a list of shards on disk (llm.c's
// fineweb_train_*.bin: data.train_files), each memory-mapped and never read whole.
//
// [Note: windows over shards]
// A sample is a window of T + 1 tokens (T inputs, the targets shifted by one) inside one shard: a
// window never spans two files, as in llm.c's loader. Sample g's window depends on nothing but
// (order, seed, stream, g, T) and the shards' sizes, so a run resumes at exactly its position on
// any number of ranks (ranks read disjoint ranges of g):
// - kRandom: a start drawn uniformly (Philox at (seed, stream, g)) among every shard's n - T
//   possible starts, numbered shard after shard. With one shard it is the single file's draw.
// - kSequential (llm.c's order): shard i holds floor((n_i - 1) / T) windows back to back, starting
//   at 0, T, 2T, ...; sample g is window g mod W of the shards in order (W: their sum), so an epoch
//   reads each token once, as an input or the last target, leaving at most T - 1 tokens unread at
//   the end of each shard.
// Shards are opened from their headers alone (100 shards open in milliseconds). Their tokens are
// checked against the vocabulary as windows are read, and a bad one is an InputError naming the
// file and the position; the pages a read touched are released again (TokenFile::release_pages),
// so the resident size does not grow with the corpus.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/app/data/token_file.h"
#include "engine/app/data/token_span.h"

namespace zt::data {

enum class SampleOrder { kRandom, kSequential };

// "random", "sequential" -> order; false if neither.
bool parse_sample_order(const std::string& text, SampleOrder* out);

// Where sample g's window lies: its shard and its first token there.
struct WindowPlace {
  int shard = 0;
  std::int64_t start = 0;
};

// The files a data.train_files / val_files pattern names: itself when it has no wildcard (opening
// reports a missing file) or names an existing file (a name holding "[1]"), else its glob matches
// sorted by name; InputError naming `key` when a glob matches nothing, or when an existing file's
// name also matches other files as a pattern.
std::vector<std::string> expand_pattern(const std::string& pattern, const std::string& key);

class TokenCorpus {
 public:
  // One span held in memory and already checked (the embedded dataset, a file checked whole).
  explicit TokenCorpus(TokenSpan tokens);
  // The files the patterns name, in order: each pattern a path or a glob (its matches sorted by
  // name). One file format for all of them. `key` names the setting in errors
  // ("data.train_files"). Refuses, naming the pattern or the file: a pattern that matches nothing,
  // a file listed twice, a mix of formats, and every fault TokenFile::open finds in a header.
  static TokenCorpus open_shards(const std::vector<std::string>& patterns, TokenFileFormat format, int vocab_size,
                                 const std::string& key);

  int shard_count() const { return static_cast<int>(shards_.size()); }
  std::int64_t token_count() const { return token_count_; }
  // Whether tokens are checked as they are read (shards), rather than already checked.
  bool checks_on_read() const { return vocab_size_ > 0; }
  const std::string& shard_name(int shard) const { return shards_[static_cast<std::size_t>(shard)].name; }
  TokenSpan shard_tokens(int shard) const { return shards_[static_cast<std::size_t>(shard)].tokens; }
  // "1 shard, 1,003,854 tokens" or "3 shards (llm.c uint16), 300,000,000 tokens".
  std::string describe() const;

  // The windows of T + 1 tokens an order chooses from: every start (kRandom) or one epoch's
  // windows (kSequential). Zero when no shard holds T + 1 tokens.
  std::int64_t window_count(SampleOrder order, int T) const;
  WindowPlace place(SampleOrder order, std::uint64_t seed, std::uint32_t stream, std::int64_t sample, int T) const;
  // The window's T inputs and T targets as int32 (either pointer may be null: only checked). Throws
  // InputError naming the shard for a token outside the vocabulary.
  void read_window(WindowPlace w, int T, std::int32_t* inputs, std::int32_t* targets) const;

  // Token counts over the corpus, or over 64 blocks spread evenly across it when it holds more
  // than `max_tokens` (the unigram entropy's sample): counts[t] for t < vocab_size.
  std::vector<std::int64_t> token_counts(int vocab_size, std::int64_t max_tokens) const;

 private:
  struct Shard {
    std::string name;  // the file's path; empty for a span in memory
    TokenSpan tokens;
    int file = -1;  // index into files_, or -1
  };
  TokenCorpus() = default;
  // Counts tokens [begin, begin + n) of a shard into counts, checking them when the shard is lazy.
  void count_range(int shard, std::int64_t begin, std::int64_t n, std::vector<std::int64_t>& counts) const;
  // Prefix sums of each shard's windows for (order, T), cached for the last T asked.
  const std::vector<std::int64_t>& prefix(SampleOrder order, int T) const;

  std::vector<TokenFile> files_;
  std::vector<Shard> shards_;
  std::int64_t token_count_ = 0;
  int vocab_size_ = 0;  // > 0: tokens are checked as they are read
  std::string kind_;    // the shards' file format, for describe()
  mutable int cached_T_[2] = {-1, -1};
  mutable std::vector<std::int64_t> cached_prefix_[2];
};

// Sample g's window start in one span of n_tokens: uniform in [0, n_tokens - T - 1]. Requires
// n_tokens > T. (TokenCorpus::place with one shard and kRandom.)
std::int64_t sample_window_start(std::uint64_t seed, std::uint32_t stream, std::int64_t sample, std::int64_t n_tokens,
                                 int T);

}  // namespace zt::data
