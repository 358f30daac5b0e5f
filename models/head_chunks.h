// The LM head in vocabulary chunks (train.head_chunks), for every model family: the columns of the
// logits, and rows of the head's table, in each chunk: the padded vocabulary Vp split in `chunks`,
// rounded up to a multiple of 64 (the last chunk takes the rest, so there may be fewer chunks than
// asked). Checks 1 <= chunks <= Vp / 64. Vp itself for one chunk.
#pragma once

#include <cstdint>

namespace zt {

std::int64_t head_chunk_columns(std::int64_t padded_vocab, int chunks);
// How many chunks that makes: ceil(Vp / head_chunk_columns).
int head_chunk_count(std::int64_t padded_vocab, int chunks);

}  // namespace zt
