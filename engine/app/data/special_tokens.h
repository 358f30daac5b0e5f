// The special tokens' ids a Hugging Face config.json carries (bos_token_id, eos_token_id,
// pad_token_id), from a tokenizer folder: tokenizer_config.json names the tokens and tokenizer.json
// numbers them. transformers' generate stops at eos_token_id, so an export without it would run
// on past the end of text (LlamaConfig's defaults, 1 and 2, are not Llama 3's 128000 and 128001).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace zt::data {

// {"bos_token_id": id, ...} for each of bos_token, eos_token and pad_token that dir's
// tokenizer_config.json names (a string, or an added token's {"content": ...}) and dir's
// tokenizer.json holds (its added_tokens, then the model's vocabulary); a token not named or not
// held is left out. With tokenizer.json alone: bos and eos its document delimiter (<|endoftext|>;
// else <|begin_of_text|> / <|end_of_text|>, <s> / </s>); without it the object is empty.
// InputError naming the file, or the folder, when one is not JSON of that shape.
nlohmann::json special_token_ids(const std::string& dir);

// For dir's tokenizer.json alone (no tokenizer_config.json): {"bos_token": text, "eos_token":
// text}, its document delimiters as special_token_ids takes them, for the tokenizer_config.json an
// export writes beside it (without one transformers picks the model type's tokenizer class and its
// default special tokens, <s> and </s> for a Llama, which a byte-level BPE lacks: it adds them as
// new ids past the model's vocabulary). Empty where dir has no tokenizer.json.
nlohmann::json document_delimiter_tokens(const std::string& dir);

}  // namespace zt::data
