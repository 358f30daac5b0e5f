// The head chunks' widths.
#include "models/gpt/gpt_config.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/core/check.h"

namespace zt::gpt {

std::int64_t head_chunk_columns(const GptConfig& c, int chunks) {
  const std::int64_t Vp = c.padded_vocab_size();
  ZT_CHECK(chunks >= 1 && chunks <= Vp / 64, "head_chunks {} outside [1, {}] (the padded vocabulary {} / 64)", chunks,
           Vp / 64, Vp);
  const std::int64_t columns = (Vp + chunks - 1) / chunks;
  return std::min(Vp, (columns + 63) / 64 * 64);
}

int head_chunk_count(const GptConfig& c, int chunks) {
  const std::int64_t Vc = head_chunk_columns(c, chunks);
  return static_cast<int>((c.padded_vocab_size() + Vc - 1) / Vc);
}

}  // namespace zt::gpt
