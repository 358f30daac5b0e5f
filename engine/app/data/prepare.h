// `zerotrain prepare`: a text file becomes a vocabulary plus train/val token files in llm.c's
// format (the first 90% of the text trains, the rest validates, as nanoGPT's shakespeare_char).
#pragma once

#include <cstdint>
#include <string>

#include "engine/app/data/vocab.h"

namespace zt::data {

struct PrepareSummary {
  int vocab_size = 0;
  std::int64_t train_tokens = 0;
  std::int64_t val_tokens = 0;
};

// Writes out_dir/vocab.json, out_dir/train.bin, out_dir/val.bin (creating out_dir). Throws
// InputError for an unreadable/empty/invalid text or a text too short to split.
PrepareSummary prepare_text_dataset(const std::string& text_path, const std::string& out_dir, Vocab::Kind kind,
                                    double val_fraction = 0.1);

}  // namespace zt::data
