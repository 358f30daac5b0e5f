// llm.c's multiple-choice eval files, read whole and checked (see the header). Every error is one
// line that starts with the file's path.
#include "engine/app/data/choice_file.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>

#include "engine/app/io/input_file.h"
#include "engine/base/core/check.h"

namespace zt::data {

namespace {

constexpr std::int64_t kHeaderBytes = 256 * 4;
constexpr std::uint16_t kStartExample = 65535;

// The uint16 words after the header, read in order; each read names what it reads, so a file that
// ends early says where and what it lacked.
class WordReader {
 public:
  WordReader(const std::string& path, const std::vector<std::uint16_t>& words) : path_(path), words_(words) {}

  std::uint16_t next(std::int64_t example, const char* what) {
    if (at_ >= words_.size()) {
      throw_input_error("{}: example {}: the file ends where its {} should be (truncated?)", path_, example, what);
    }
    return words_[at_++];
  }
  std::size_t at() const { return at_; }
  bool done() const { return at_ == words_.size(); }

 private:
  const std::string& path_;
  const std::vector<std::uint16_t>& words_;
  std::size_t at_ = 0;
};

// A length, then that many tokens, all within the example's `example_bytes` from its start mark
// at word `start`: a length past them (a damaged length word) is named as such, not as the first
// word of the next example read as a token.
std::vector<std::int32_t> read_tokens(WordReader& in, const std::string& path, std::int64_t example, const char* what,
                                      int vocab_size, std::size_t start, int example_bytes) {
  const int n = in.next(example, what);
  if (n == 0) throw_input_error("{}: example {}: its {} has no tokens", path, example, what);
  if (2 * (in.at() + static_cast<std::size_t>(n) - start) > static_cast<std::size_t>(example_bytes)) {
    throw_input_error(
        "{}: example {}: its {} of {} tokens runs past the {} bytes the example says it holds (a damaged length "
        "or byte count)",
        path, example, what, n, example_bytes);
  }
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(n));
  for (auto& t : tokens) {
    t = in.next(example, what);
    if (t >= vocab_size) {
      throw_input_error("{}: example {}: token {} in its {} is not below the model's vocabulary ({})", path, example, t,
                        what, vocab_size);
    }
  }
  return tokens;
}

}  // namespace

ChoiceFile ChoiceFile::load(const std::string& path, int vocab_size) {
  require_regular_file(path, "multiple-choice file");  // a directory, a FIFO: named as what it is
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw_input_error("{}: no such multiple-choice file", path);
  // A read error is named with the file (an ifstream's iterator threw the library's own words).
  const std::string bytes = read_whole_input(path, "multiple-choice file");
  if (static_cast<std::int64_t>(bytes.size()) < kHeaderBytes) {
    throw_input_error("{}: {} bytes, shorter than the 1024-byte header of llm.c's eval files", path, bytes.size());
  }
  std::int32_t header[4];
  std::memcpy(header, bytes.data(), sizeof(header));
  if (header[0] != kChoiceFileMagic) {
    throw_input_error(
        "{}: magic {} is not llm.c's eval file magic {} (a token file? those go in data.train_file, or zerotrain eval "
        "--tokens)",
        path, header[0], kChoiceFileMagic);
  }
  if (header[1] != kChoiceFileVersion) {
    throw_input_error("{}: version {} of llm.c's eval file format; this reader knows version {}", path, header[1],
                      kChoiceFileVersion);
  }
  if (header[2] <= 0) throw_input_error("{}: the header says {} examples", path, header[2]);
  if ((bytes.size() - kHeaderBytes) % 2 != 0) throw_input_error("{}: an odd number of bytes after the header", path);
  std::vector<std::uint16_t> words((bytes.size() - kHeaderBytes) / 2);
  if (!words.empty()) std::memcpy(words.data(), bytes.data() + kHeaderBytes, words.size() * 2);  // else null

  ChoiceFile file;
  file.path_ = path;
  WordReader in(path, words);
  int longest_bytes = 0;  // llm.c's reader sizes its buffer by the header's longest example
  for (std::int64_t e = 0; e < header[2]; ++e) {
    const std::size_t start = in.at();
    if (in.next(e, "start mark") != kStartExample) {
      throw_input_error("{}: example {} does not start with the mark 65535 (at byte {})", path, e,
                        kHeaderBytes + 2 * static_cast<std::int64_t>(start));
    }
    const int example_bytes = in.next(e, "byte count");
    // llm.c's reader asserts it; a file whose examples are out of order or repeated is not one.
    // A uint16: past 65535 examples it wraps.
    if (const int index = in.next(e, "index"); index != (e & 0xFFFF)) {
      throw_input_error("{}: example {} carries the index {} (llm.c's files number their examples in order)", path, e,
                        index);
    }
    ChoiceExample x;
    x.label = in.next(e, "label");
    const int n_completions = in.next(e, "number of completions");
    if (n_completions < 2)
      throw_input_error("{}: example {} has {} completion(s), not a choice", path, e, n_completions);
    if (x.label >= n_completions) {
      throw_input_error("{}: example {}: label {} is not below its {} completions", path, e, x.label, n_completions);
    }
    x.context = read_tokens(in, path, e, "context", vocab_size, start, example_bytes);
    for (int k = 0; k < n_completions; ++k) {
      x.completions.push_back(read_tokens(in, path, e, "completion", vocab_size, start, example_bytes));
      const int input = static_cast<int>(x.context.size() + x.completions.back().size()) - 1;
      file.longest_input_ = std::max(file.longest_input_, input);
    }
    if (2 * (in.at() - start) != static_cast<std::size_t>(example_bytes)) {
      throw_input_error("{}: example {} says it is {} bytes but holds {}", path, e, example_bytes,
                        2 * (in.at() - start));
    }
    longest_bytes = std::max(longest_bytes, example_bytes);
    file.rows_ += n_completions;
    file.examples_.push_back(std::move(x));
  }
  if (!in.done()) {
    throw_input_error("{}: {} bytes after its {} examples (the header's count is short?)", path,
                      2 * (words.size() - in.at()), header[2]);
  }
  // Shorter than an example, llm.c's reader would overrun the buffer it sizes by the figure (its
  // writer puts the longest example's bytes there; a larger figure harms nothing).
  if (header[3] < longest_bytes) {
    throw_input_error(
        "{}: the header says its longest example is {} bytes, but one is {} (llm.c sizes its buffer by the header's "
        "figure)",
        path, header[3], longest_bytes);
  }
  return file;
}

}  // namespace zt::data
