// Multiple-choice evaluation sets in llm.c's eval file format (dev/data/data_common.py's
// write_evalfile; HellaSwag's validation split is 10,042 examples in 3.6 MB): a header of 256
// int32 (magic 20240522, version 1, the number of examples, the longest example's bytes), then
// each example as uint16 words: 65535, the example's bytes, its index, the label, the number of
// completions, the context's length and tokens, and each completion's length and tokens. A model
// scores each completion by its mean cross-entropy given the context (HellaSwag's acc_norm, as
// llm.c reports it); the lowest is its answer.
//
// Read whole and checked once (structure, lengths, label, every token below the vocabulary), so an
// evaluation never meets a bad example; errors are InputErrors naming the file, the example and
// the fault.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zt::data {

constexpr std::int32_t kChoiceFileMagic = 20240522;
constexpr std::int32_t kChoiceFileVersion = 1;

struct ChoiceExample {
  int label = 0;  // the index of the right completion
  std::vector<std::int32_t> context;
  std::vector<std::vector<std::int32_t>> completions;
};

class ChoiceFile {
 public:
  // Throws InputError for a missing or damaged file, or a token at or above `vocab_size`.
  static ChoiceFile load(const std::string& path, int vocab_size);

  const std::string& path() const { return path_; }
  const std::vector<ChoiceExample>& examples() const { return examples_; }
  // Completions over all examples: the rows an evaluation scores.
  std::int64_t rows() const { return rows_; }
  // The most tokens a row needs as input: its context and completion but the last token (which is
  // only predicted).
  int longest_input() const { return longest_input_; }

 private:
  std::string path_;
  std::vector<ChoiceExample> examples_;
  std::int64_t rows_ = 0;
  int longest_input_ = 0;
};

}  // namespace zt::data
