// The embedded default dataset: text the project generates itself (deterministic from a seed, no
// download) with structure a small model can learn, so the quickstart shows real learning: the
// loss falls well below the unigram entropy of the data, which the run prints beside it.
#pragma once

#include <cstdint>
#include <string>

namespace zt::data {

// About n_chars characters of generated text (ASCII), the same for the same (seed, n_chars).
std::string generate_embedded_text(std::uint64_t seed, std::int64_t n_chars);

}  // namespace zt::data
