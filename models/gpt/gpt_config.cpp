// GPT's head chunks: the family-neutral rule (models/head_chunks.h) on its padded vocabulary.
#include "models/gpt/gpt_config.h"

#include "models/head_chunks.h"

namespace zt::gpt {

std::int64_t head_chunk_columns(const GptConfig& c, int chunks) {
  return zt::head_chunk_columns(c.padded_vocab_size(), chunks);
}

int head_chunk_count(const GptConfig& c, int chunks) { return zt::head_chunk_count(c.padded_vocab_size(), chunks); }

}  // namespace zt::gpt
