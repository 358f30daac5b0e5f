// CheckpointPolicy's text form, shared by the config reader and the debug-state metadata.
#include "models/gpt/gpt_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

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

std::string CheckpointPolicy::to_string() const {
  switch (kind) {
    case Kind::kNone: return "none";
    case Kind::kAll: return "all";
    case Kind::kEvery: return fmt::format("every:{}", every_k);
  }
  return "?";
}

bool CheckpointPolicy::parse(const std::string& text, CheckpointPolicy* out) {
  if (text == "none") {
    *out = CheckpointPolicy{Kind::kNone, 1};
    return true;
  }
  if (text == "all") {
    *out = CheckpointPolicy{Kind::kAll, 1};
    return true;
  }
  constexpr std::string_view kPrefix = "every:";
  if (text.starts_with(kPrefix)) {
    int k = 0;
    const char* first = text.data() + kPrefix.size();
    const char* last = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(first, last, k);
    if (ec == std::errc() && ptr == last && k >= 1) {
      *out = CheckpointPolicy{Kind::kEvery, k};
      return true;
    }
  }
  return false;
}

}  // namespace zt::gpt
