// The head chunks' widths (see the header).
#include "models/head_chunks.h"

#include <algorithm>

#include "engine/base/core/check.h"

namespace zt {

std::int64_t head_chunk_columns(std::int64_t Vp, int chunks) {
  ZT_CHECK(chunks >= 1 && chunks <= Vp / 64, "head_chunks {} outside [1, {}] (the padded vocabulary {} / 64)", chunks,
           Vp / 64, Vp);
  const std::int64_t columns = (Vp + chunks - 1) / chunks;
  return std::min(Vp, (columns + 63) / 64 * 64);
}

int head_chunk_count(std::int64_t Vp, int chunks) {
  const std::int64_t Vc = head_chunk_columns(Vp, chunks);
  return static_cast<int>((Vp + Vc - 1) / Vc);
}

}  // namespace zt
