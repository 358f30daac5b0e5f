// A zerotrain vocabulary (vocab.json, data/vocab.h) written as a Hugging Face tokenizer.json, so
// that the export of a character- or byte-level run loads with AutoTokenizer and decodes as the
// run did; and read back, so that `sample --from` such an export prints text, not ids.
//
// Character level: a BPE model without merges over the characters, no normalizer and no
// pre-tokenizer (the library cuts the text into characters and maps each to its id; one outside
// the vocabulary is dropped there, where zerotrain refuses it), decoded by Fuse (the tokens joined
// as they are). Byte level: GPT-2's byte-level BPE without merges, token b = byte b, which
// data/tokenizer.h reads as any byte-level BPE.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "engine/app/data/vocab.h"

namespace zt::data {

nlohmann::ordered_json tokenizer_json_of_vocab(const Vocab& vocab);

// tokenizer_config.json beside it, or beside a tokenizer.json that came without one: the generic
// PreTrainedTokenizerFast (AutoTokenizer otherwise takes the model type's class, whose GPT-2 one
// demands a pre-tokenizer and whose Llama one adds <s> and </s>), and the model's context.
nlohmann::ordered_json fast_tokenizer_config(int model_max_length);

// The character vocabulary of a tokenizer.json in tokenizer_json_of_vocab's character form;
// nullopt for any other tokenizer (read by data/tokenizer.h, or refused there).
std::optional<Vocab> char_vocab_of_tokenizer_json(const nlohmann::json& tokenizer, const std::string& path);

}  // namespace zt::data
