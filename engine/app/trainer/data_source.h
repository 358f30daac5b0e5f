// Where a run's tokens come from: the embedded generated dataset, a directory made by `zerotrain
// prepare` (train.bin, val.bin, vocab.json), explicit token files, or lists of shards
// (data.train_files: read lazily, engine/app/data/token_corpus.h). Checked against the model
// (vocabulary size, sequence length) with errors naming the config key at fault.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/app/config/run_config.h"
#include "engine/app/data/batch_sampler.h"
#include "engine/app/data/choice_file.h"
#include "engine/app/data/token_corpus.h"
#include "engine/app/data/token_file.h"
#include "engine/app/data/token_text.h"
#include "engine/app/data/vocab.h"

namespace zt {

class Communicator;

class DataSource {
 public:
  // The splits opened: both for a run; the validation split alone for `eval --val`, which scores
  // the run's validation data where its training files are not (another machine). Without the
  // training split there is no train() and no training entropy; the rest is as for a run.
  enum class Splits { kBoth, kValidationOnly };
  explicit DataSource(const RunConfig& config, Splits splits = Splits::kBoth);
  // The same on every rank of `world` (collective): an error in the data, the same on each, is
  // the job's, printed once (on_every_rank).
  DataSource(const RunConfig& config, Communicator& world);

  const data::TokenCorpus& train() const;
  const data::TokenCorpus& val() const { return *val_; }
  // How the run's windows are read (data.order), for the training and the validation stream.
  data::SampleStream train_stream() const { return {order_, seed_, data::kTrainStream}; }
  data::SampleStream val_stream() const { return {order_, seed_, data::kValStream}; }
  // The vocabulary used to decode samples, when the dataset has one.
  const std::optional<data::Vocab>& vocab() const { return vocab_; }
  // The tokenizer.json the run's text goes through (data.tokenizer_file, the dataset's, or the one
  // beside its first training shard), "" for none; and the prompt/sample codec: it, else the vocab.
  const std::string& tokenizer_path() const { return tokenizer_path_; }
  const data::TokenText& text() const { return text_; }
  // data.choice_file's examples, scored at each evaluation, when the config names one.
  const std::optional<data::ChoiceFile>& choices() const { return choices_; }
  // The source and each split's shards and tokens, for the run's header.
  const std::string& description() const { return description_; }
  // The unigram entropy of the training split, in nats (what a model that ignores context achieves),
  // from the counts of the sample of it the constructor read (data::unigram_entropy_nats).
  double unigram_entropy_nats() const { return data::unigram_entropy_nats(train_counts_); }
  // The least any model that ignores context scores on the targets of the evaluation's windows:
  // their own frequencies' entropy (a context-free model predicts one distribution q for every
  // target, and its loss, the cross-entropy of the targets' frequencies p with q, is at least p's
  // entropy). A validation loss below it shows context use; one above it shows nothing either way.
  // Not the training split's entropy, nor a unigram model fit to it: either can score above the
  // validation targets' floor, and a model that ignores context below them (an untrained model's
  // ln V fell below an add-one smoothed fit where the data was small beside the vocabulary).
  double context_free_val_loss_nats() const { return data::unigram_entropy_nats(val_counts_); }

 private:
  void open(const RunConfig& config);
  // The splits opened, each with its name ("training" where opened, then "validation").
  std::vector<std::pair<const char*, const data::TokenCorpus*>> opened_splits() const;
  void open_files(const RunConfig& config, const std::string& train_path, const std::string& val_path,
                  const std::string& train_key, const std::string& val_key);
  // Where data.tokenizer_file names no tokenizer: every shard folder that has one (its
  // tokenizer.json, else, `with_vocab_files` (no data.vocab_file named), its zerotrain vocab.json)
  // has the same file's bytes (InputError naming the two otherwise).
  void check_shards_share_vocabulary(const RunConfig& config, bool with_vocab_files) const;

  std::vector<std::int64_t> train_counts_;  // per token id, over the sample the entropy reads
  std::vector<std::int64_t> val_counts_;    // per token id, over the evaluation's targets
  std::optional<data::Vocab> vocab_;
  std::string tokenizer_path_;
  data::TokenText text_;
  std::vector<std::uint16_t> owned_train_, owned_val_;  // the embedded dataset
  std::optional<data::TokenFile> train_file_, val_file_;
  std::optional<data::TokenCorpus> train_, val_;
  std::optional<data::ChoiceFile> choices_;
  Splits splits_ = Splits::kBoth;
  data::SampleOrder order_ = data::SampleOrder::kRandom;
  std::uint64_t seed_ = 0;
  std::string description_;
};

}  // namespace zt
