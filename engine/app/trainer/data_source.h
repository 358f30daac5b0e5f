// Where a run's tokens come from: the embedded generated dataset, a directory made by `zerotrain
// prepare` (train.bin, val.bin, vocab.json), or explicit token files. Checked against the model
// (vocabulary size, sequence length) with errors naming the config key at fault.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/app/config/run_config.h"
#include "engine/app/data/token_file.h"
#include "engine/app/data/vocab.h"

namespace zt {

class DataSource {
 public:
  explicit DataSource(const RunConfig& config);

  data::TokenSpan train() const { return train_; }
  data::TokenSpan val() const { return val_; }
  // The vocabulary used to decode samples, when the dataset has one.
  const std::optional<data::Vocab>& vocab() const { return vocab_; }
  const std::string& description() const { return description_; }

 private:
  void open_files(const RunConfig& config, const std::string& train_path, const std::string& val_path);

  std::optional<data::Vocab> vocab_;
  std::vector<std::uint16_t> owned_train_, owned_val_;  // the embedded dataset
  std::optional<data::TokenFile> train_file_, val_file_;
  data::TokenSpan train_, val_;
  std::string description_;
};

}  // namespace zt
