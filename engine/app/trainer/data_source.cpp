// DataSource: opening and checking the run's train/val tokens and vocabulary.
#include "engine/app/trainer/data_source.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "engine/app/data/batch_sampler.h"
#include "engine/app/data/embedded_dataset.h"
#include "engine/app/io/input_file.h"
#include "engine/app/io/output_file.h"
#include "engine/base/core/check.h"
#include "engine/distributed/comm/communicator.h"

namespace zt {

namespace fs = std::filesystem;

namespace {

// data.format, which the config admitted only as one of the formats' names.
data::TokenFileFormat token_file_format(const DataConfig& d) {
  data::TokenFileFormat format = data::TokenFileFormat::kAuto;
  data::parse_token_file_format(d.format, &format);
  return format;
}

}  // namespace

void DataSource::check_shards_share_vocabulary(const RunConfig& c, bool with_vocab_files) const {
  // Shards from folders of other vocabularies (two prepare_tokens.py corpora, two zerotrain prepare
  // datasets of other texts, one of each) would train on ids that mean other text, and every sample
  // and export decode them through the first's. A folder's vocabulary is its tokenizer.json, else
  // its zerotrain vocab.json (not a Hugging Face one beside merges.txt: the same tokenizer in
  // another form); a folder of neither says nothing.
  struct Vocabulary {
    fs::path file;
    std::string content;
    bool tokenizer() const { return file.filename() == "tokenizer.json"; }
  };
  const auto vocabulary_of = [&](const fs::path& folder) -> std::optional<Vocabulary> {
    std::error_code ec;
    if (const fs::path t = folder / "tokenizer.json"; fs::exists(t, ec)) {
      return Vocabulary{t, read_whole_input(t.string(), "tokenizer")};
    }
    const fs::path v = folder / "vocab.json";
    if (!with_vocab_files || !fs::exists(v, ec)) return std::nullopt;
    std::string content = read_whole_input(v.string(), "vocabulary");
    const nlohmann::json j = nlohmann::json::parse(content, nullptr, /*allow_exceptions=*/false);
    if (!data::Vocab::is_own_format(j)) return std::nullopt;
    return Vocabulary{v, std::move(content)};
  };
  std::optional<Vocabulary> first;
  std::vector<fs::path> seen;
  for (const auto& [name, split] : opened_splits()) {
    for (int i = 0; i < split->shard_count(); ++i) {
      const fs::path folder = fs::path(split->shard_name(i)).parent_path();
      if (std::find(seen.begin(), seen.end(), folder) != seen.end()) continue;
      seen.push_back(folder);
      std::optional<Vocabulary> here = vocabulary_of(folder);
      if (!here) continue;
      if (!first) {
        first = std::move(here);
        continue;
      }
      if (here->tokenizer() == first->tokenizer() && here->content == first->content) continue;
      // Where both are of one kind, the two may be one saved twice: the key that names the one to read.
      const std::string kind = here->tokenizer() && first->tokenizer()     ? "tokenizer"
                               : !here->tokenizer() && !first->tokenizer() ? "vocabulary"
                                                                           : "";
      throw_input_error(
          "config error in {}: the shards come from folders of different {} ({} and {} differ): one set's ids would "
          "be read as another's tokens; train on shards of one {}",
          c.sources_of({"data.train_files", "data.val_files"}), kind == "tokenizer" ? "tokenizers" : "vocabularies",
          first->file.string(), here->file.string(),
          kind == "tokenizer"    ? "tokenizer (where the two files are one tokenizer saved twice, name it with "
                                   "data.tokenizer_file)"
          : kind == "vocabulary" ? "vocabulary (where the two files are one vocabulary saved twice, name it with "
                                   "data.vocab_file)"
                                 : "vocabulary");
    }
  }
}

DataSource::DataSource(const RunConfig& config, Splits splits) : splits_(splits) { open(config); }

const data::TokenCorpus& DataSource::train() const {
  ZT_CHECK(train_.has_value(), "the training split was not opened (DataSource::Splits::kValidationOnly)");
  return *train_;
}

std::vector<std::pair<const char*, const data::TokenCorpus*>> DataSource::opened_splits() const {
  std::vector<std::pair<const char*, const data::TokenCorpus*>> splits;
  if (train_) splits.emplace_back("training", &*train_);
  splits.emplace_back("validation", &*val_);
  return splits;
}

DataSource::DataSource(const RunConfig& config, Communicator& world) {
  on_every_rank(world, [&] { open(config); });
}

void DataSource::open(const RunConfig& c) {
  const DataConfig& d = c.data;
  // A vocabulary larger than the model's: its ids past the model's would be unlearnable.
  auto check_vocab_fits = [&] {
    if (!vocab_ || vocab_->size() <= c.model.vocab_size) return;
    throw_input_error("config error in {}: model.vocab_size = {} is smaller than {}'s vocabulary ({} tokens)",
                      c.sources_of({"model.vocab_size", "data.vocab_file", "data.dataset"}), c.model.vocab_size,
                      !d.vocab_file.empty()     ? d.vocab_file
                      : d.dataset == "embedded" ? std::string("the embedded text")
                                                : (fs::path(d.dataset) / "vocab.json").string(),
                      vocab_->size());
  };
  data::parse_sample_order(d.order, &order_);
  seed_ = c.train.seed;
  // The validation split alone reads no vocabulary, tokenizer or multiple-choice file (eval --val
  // decodes and scores none), but the embedded text's, which makes its tokens.
  const bool reads_text = splits_ == Splits::kBoth || d.reads_embedded_text();
  // Files both splits read, as the user named them (a shard named in both lists, data.val_file the
  // data.train_file): noted below, since validation then measures the fit to trained tokens.
  std::vector<std::string> validated_on_training;
  if (!d.vocab_file.empty() && reads_text) {
    vocab_ = read_naming_key(c, "data.vocab_file", [&] { return data::Vocab::load(d.vocab_file); });
  }
  if (!d.train_files.empty()) {
    const data::TokenFileFormat format = token_file_format(d);
    if (splits_ == Splits::kBoth) {
      train_.emplace(read_naming_key(c, "data.train_files", [&] {
        return data::TokenCorpus::open_shards(d.train_files, format, c.model.vocab_size, "data.train_files");
      }));
    }
    val_.emplace(read_naming_key(c, "data.val_files", [&] {
      return data::TokenCorpus::open_shards(d.val_files, format, c.model.vocab_size, "data.val_files");
    }));
    // A glob such as "d/*" taking d/val.bin into training, or d/train.bin into validation, would
    // score trained tokens; a file named in both lists is the user's choice (a memorisation check).
    const auto named_in = [&](const std::vector<std::string>& patterns, const std::string& path) {
      return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& pattern) {
        std::error_code ec;
        return pattern.find_first_of("*?[") == std::string::npos && fs::equivalent(pattern, path, ec);
      });
    };
    for (int v = 0; v < val_->shard_count(); ++v) {
      for (int t = 0; train_ && t < train_->shard_count(); ++t) {
        std::error_code ec;
        const std::string& shard = val_->shard_name(v);
        if (!fs::equivalent(shard, train_->shard_name(t), ec)) continue;
        const bool in_training = named_in(d.train_files, shard), in_validation = named_in(d.val_files, shard);
        if (in_training && in_validation) {
          validated_on_training.push_back(shard);
          continue;
        }
        // Which side is at fault where one list names the file itself; patterns on both sides: both.
        const std::string how =
            in_training ? fmt::format("a data.val_files pattern takes {} of data.train_files into validation", shard)
            : in_validation ? fmt::format("a data.train_files pattern takes {} of data.val_files into training", shard)
                            : fmt::format("a data.train_files and a data.val_files pattern both take {}", shard);
        throw_input_error(
            "config error in {}: {} (the validation loss would score tokens the run trains on; name the file "
            "itself in both lists to validate on what the run trains on)",
            c.sources_of({"data.train_files", "data.val_files"}), how);
      }
    }
    description_ = "token shards";
  } else if (!d.train_file.empty()) {
    open_files(c, splits_ == Splits::kBoth ? d.train_file : "", d.val_file, "data.train_file", "data.val_file");
    description_ = fmt::format("token files {} / {}", d.train_file, d.val_file);
    if (std::error_code ec; splits_ == Splits::kBoth && fs::equivalent(d.train_file, d.val_file, ec)) {
      validated_on_training.push_back(d.val_file);
    }
  } else if (d.dataset == "embedded") {
    const std::string text = data::generate_embedded_text(c.train.seed, d.embedded_chars);
    const bool given = vocab_.has_value();  // data.vocab_file's
    if (!given) vocab_ = data::Vocab::build_char(text);
    std::vector<std::uint16_t> tokens;
    try {
      tokens = vocab_->encode(text);
    } catch (const InputError& e) {  // the vocabulary's words alone named neither the key nor its file
      if (!given) throw;
      throw_input_error("config error in {}: data.vocab_file = {} cannot encode the embedded text: {}",
                        c.sources_of({"data.vocab_file"}), d.vocab_file, e.what());
    }
    const std::size_t split = tokens.size() * 9 / 10;  // 90% train, 10% validation, as prepare
    owned_train_.assign(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(split));
    owned_val_.assign(tokens.begin() + static_cast<std::ptrdiff_t>(split), tokens.end());
    train_.emplace(data::TokenSpan(owned_train_));
    val_.emplace(data::TokenSpan(owned_val_));
    description_ = fmt::format("embedded generated text ({} characters)", text.size());
  } else {
    const fs::path dir(d.dataset);
    if (!fs::is_directory(dir)) {
      // zerotrain prepare makes character or byte vocabularies (a text's characters, 256 bytes): for
      // a model of a tokenizer's vocabulary (GPT-2's 50257) its folder would train on the wrong
      // tokens, so the tokenizer's files come first there.
      const std::string make =
          c.model.vocab_size <= 256
              ? fmt::format("make one with: zerotrain prepare --text FILE --out {}", d.dataset)
              : fmt::format(
                    "for model.vocab_size = {}, a tokenizer's token files: train.bin and val.bin there (llm.c's "
                    "format), or tools/prepare_tokens.py's shards named by data.train_files and data.val_files; "
                    "for a character vocabulary, zerotrain prepare --text FILE --out {}",
                    c.model.vocab_size, d.dataset);
      throw_input_error("config error in {}: data.dataset = \"{}\" is neither \"embedded\" nor a directory ({})",
                        c.sources_of({"data.dataset"}), d.dataset, make);
    }
    // A prepare cut between its renames left token files of the new text beside the old ones, and
    // its vocab.json still staged: a run there would train on the mix and decode nothing.
    std::string cut;
    if (fs::exists(dir / kIncompleteOutputMarker)) cut = (dir / kIncompleteOutputMarker).string() + " is there";
    for (const char* name : {"vocab.json", "train.bin", "val.bin"}) {
      const std::string staged = staging_path((dir / name).string());
      if (cut.empty() && !fs::exists(dir / "vocab.json") && fs::exists(staged)) cut = staged + " is still staged";
    }
    if (!cut.empty()) {
      throw_input_error(
          "config error in {}: data.dataset = \"{}\": a prepare into it was cut before it ended ({}): run the "
          "prepare again",
          c.sources_of({"data.dataset"}), d.dataset, cut);
    }
    // A link that leads nowhere is read too, and refused naming it (it was taken for no vocabulary:
    // the run's samples printed token ids).
    if (std::error_code ec; reads_text && fs::exists(fs::symlink_status(dir / "vocab.json", ec))) {
      data::Vocab own = data::Vocab::load((dir / "vocab.json").string());
      // Another vocabulary than the one the dataset was made with would decode its ids as other text.
      if (vocab_ && vocab_->size() != own.size()) {
        throw_input_error(
            "config error in {}: data.vocab_file = {} has {} tokens, but the dataset was made with {} ({} tokens): "
            "its samples would decode through another vocabulary; drop data.vocab_file",
            c.sources_of({"data.vocab_file", "data.dataset"}), d.vocab_file, vocab_->size(),
            (dir / "vocab.json").string(), own.size());
      }
      if (!vocab_) vocab_ = std::move(own);
    }
    check_vocab_fits();  // before the token files, whose first id past the model's would be named instead
    open_files(c, splits_ == Splits::kBoth ? (dir / "train.bin").string() : "", (dir / "val.bin").string(),
               "data.dataset", "data.dataset");
    description_ = fmt::format("prepared dataset {}", d.dataset);
  }
  // The tokenizer: named, the dataset folder's, or the one beside the first training shard.
  tokenizer_path_ = reads_text ? d.tokenizer_file : "";
  if (tokenizer_path_.empty() && reads_text) {
    const fs::path beside = !d.train_files.empty() ? fs::path(train().shard_name(0)).parent_path() / "tokenizer.json"
                            : d.dataset != "embedded" && d.train_file.empty() ? fs::path(d.dataset) / "tokenizer.json"
                                                                              : fs::path();
    if (!beside.empty() && fs::exists(beside)) tokenizer_path_ = beside.string();
    if (!d.train_files.empty()) check_shards_share_vocabulary(c, /*with_vocab_files=*/d.vocab_file.empty());
  }
  if (!tokenizer_path_.empty()) {
    // A byte-level BPE, or the character vocabulary an export writes as a tokenizer.json.
    text_ = d.tokenizer_file.empty() ? data::TokenText::from_tokenizer_file(tokenizer_path_)
                                     : read_naming_key(c, "data.tokenizer_file", [&] {
                                         return data::TokenText::from_tokenizer_file(tokenizer_path_);
                                       });
    if (text_.size() > c.model.vocab_size) {
      throw_input_error("config error in {}: model.vocab_size = {} is smaller than {}'s vocabulary ({} tokens)",
                        c.sources_of({"model.vocab_size", "data.tokenizer_file", "data.dataset"}), c.model.vocab_size,
                        tokenizer_path_, text_.size());
    }
  } else if (vocab_) {
    text_ = data::TokenText(*vocab_);
  }
  check_vocab_fits();
  // The training split's token counts, once: the unigram entropy's and the check below's.
  // ZT_TEST_ENTROPY_SAMPLE_TOKENS (docs/config.md, "Testing hooks"): a small corpus sampled as a
  // large one is, so a test's bad token lies outside the sample and is met by a step.
  const char* sample_hook = std::getenv("ZT_TEST_ENTROPY_SAMPLE_TOKENS");
  if (train_) {
    train_counts_ = train_->token_counts(c.model.vocab_size, sample_hook != nullptr && std::atoll(sample_hook) > 0
                                                                 ? std::atoll(sample_hook)
                                                                 : data::kEntropySampleTokens);
  }
  // The vocabulary samples decode through (a tokenizer, data.vocab_file, a prepared dataset's
  // vocab.json) must hold the data's ids where it is smaller than the model's, or samples decode
  // the others as another text's tokens or as nothing: plain token files carry no vocabulary, a
  // tokenizer may be named beside any data, and a dataset folder's vocab.json may not be the one
  // its tokens were made with. Checked on the sample of the training split the unigram entropy
  // reads.
  if (train_ && text_.has() && text_.size() < c.model.vocab_size) {
    const std::string decoder = !tokenizer_path_.empty()  ? tokenizer_path_
                                : !d.vocab_file.empty()   ? d.vocab_file
                                : d.dataset != "embedded" ? (fs::path(d.dataset) / "vocab.json").string()
                                                          : std::string("the embedded text's vocabulary");
    for (int id = c.model.vocab_size - 1; id >= text_.size(); --id) {
      if (train_counts_[static_cast<std::size_t>(id)] == 0) continue;
      throw_input_error(
          "config error in {}: the training data holds token id {}, past the {} tokens of {}: samples would decode "
          "its ids through another vocabulary (name the vocabulary the data was made with)",
          c.sources_of(
              {"data.vocab_file", "data.tokenizer_file", "data.train_file", "data.train_files", "data.dataset"}),
          id, text_.size(), decoder);
    }
  }
  for (const auto& [name, split] : opened_splits()) {
    // A window is seq_len inputs and the token after the last: seq_len + 1 tokens make one, inside
    // one shard.
    if (split->window_count(order_, c.train.seq_len) == 0) {
      throw_input_error("{}: the {} split ({}) has no {}, too few for train.seq_len = {} (a window needs {})",
                        description_, name, split->describe(),
                        split->shard_count() == 1 ? "window" : "shard with a window", c.train.seq_len,
                        c.train.seq_len + 1);
    }
  }
  description_ += fmt::format("; train: {}; val: {}; {} windows", train_ ? train_->describe() : "not opened",
                              val_->describe(), d.order);
  // Every evaluation reads the same windows, the validation stream's first eval_batches x
  // micro_batch, read here once: their targets counted (what a model ignoring context is scored
  // on), and, where the split's tokens are checked as they are read, a token there outside the
  // vocabulary (a split made with another tokenizer) ends the run now, not at its first
  // evaluation, which by default follows its last step.
  {
    const int B = c.train.micro_batch, T = c.train.seq_len;
    std::vector<std::int32_t> inputs(static_cast<std::size_t>(B) * T), targets(inputs.size());
    val_counts_.assign(static_cast<std::size_t>(c.model.vocab_size), 0);
    for (int b = 0; b < c.train.eval_batches; ++b) {
      data::fill_batch(*val_, val_stream(), B, T, std::int64_t{b} * B, inputs.data(), targets.data());
      for (const std::int32_t t : targets) ++val_counts_[static_cast<std::size_t>(t)];
    }
  }
  {  // a split smaller than what one read asks: said, not hidden (in random order, at least that many)
    const std::int64_t evaluated = std::int64_t{c.train.eval_batches} * c.train.micro_batch;
    const std::int64_t stepped = std::int64_t{c.train.micro_batch} * c.train.grad_accum * c.world_size;
    for (const auto& [what, split, asked] :
         {std::tuple{"an evaluation", &*val_, evaluated}, std::tuple{"a step", train_ ? &*train_ : nullptr, stepped}}) {
      if (split == nullptr) continue;
      const std::int64_t held = split->window_count(order_, c.train.seq_len);
      if (asked > held) {
        description_ +=
            fmt::format("; note: {} reads {} windows of a split of {}, so {}{} of those reads repeat a window", what,
                        asked, held, order_ == data::SampleOrder::kRandom ? "at least " : "", asked - held);
      }
    }
  }
  if (!validated_on_training.empty()) {
    description_ += fmt::format(
        "; note: validation reads {} training reads too ({}{}): its losses measure the fit to the training tokens, "
        "not how the model generalises",
        validated_on_training.size() == 1 ? "a file" : fmt::format("{} files", validated_on_training.size()),
        validated_on_training.front(), validated_on_training.size() > 1 ? ", ..." : "");
  }
  // Shards too short for one window hold tokens no step or evaluation reads.
  for (const auto& [name, split] : opened_splits()) {
    std::vector<std::string> unread;
    for (int i = 0; i < split->shard_count(); ++i) {
      if (split->shard_tokens(i).size() <= c.train.seq_len) unread.push_back(split->shard_name(i));
    }
    if (!unread.empty()) {
      description_ +=
          fmt::format("; note: {} {} shard(s) shorter than a window ({} tokens) are never read ({}{})", unread.size(),
                      name, c.train.seq_len + 1, unread.front(), unread.size() > 1 ? ", ..." : "");
    }
  }
  if (!d.choice_file.empty() && reads_text) {
    choices_.emplace(read_naming_key(c, "data.choice_file",
                                     [&] { return data::ChoiceFile::load(d.choice_file, c.model.vocab_size); }));
    // A row's inputs are its context and completion but the last token: the model must hold them.
    if (choices_->longest_input() > c.model.block_size) {
      throw_input_error(
          "config error in {}: data.choice_file {}: its longest example needs {} positions, over model.block_size = "
          "{}",
          c.sources_of({"data.choice_file", "model.block_size"}), d.choice_file, choices_->longest_input(),
          c.model.block_size);
    }
    const std::size_t examples = choices_->examples().size();
    description_ += fmt::format("; multiple choice: {} ({} example{}, {} completions)", d.choice_file, examples,
                                examples == 1 ? "" : "s", choices_->rows());
  }
}

void DataSource::open_files(const RunConfig& c, const std::string& train_path, const std::string& val_path,
                            const std::string& train_key, const std::string& val_key) {
  const data::TokenFileFormat format = token_file_format(c.data);
  // Opening validates every token against the model's vocabulary. No training path: the
  // validation split alone (Splits::kValidationOnly).
  if (!train_path.empty()) {
    train_file_.emplace(
        read_naming_key(c, train_key, [&] { return data::TokenFile::open(train_path, format, c.model.vocab_size); }));
    train_.emplace(train_file_->tokens());
  }
  val_file_.emplace(
      read_naming_key(c, val_key, [&] { return data::TokenFile::open(val_path, format, c.model.vocab_size); }));
  val_.emplace(val_file_->tokens());
}

}  // namespace zt
