// CheckpointPolicy's text form, shared by the config reader and the debug-state metadata, and the
// activation peak it leads to.
#include "models/checkpoint_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <string_view>

namespace zt {

std::string CheckpointPolicy::to_string() const {
  switch (kind) {
    case Kind::kNone: return "none";
    case Kind::kAll: return "all";
    case Kind::kSelective: return "selective";
    case Kind::kEvery: return fmt::format("every:{}", every_k);
  }
  return "?";
}

bool CheckpointPolicy::parse(const std::string& text, CheckpointPolicy* out) {
  if (text == "none") {
    *out = CheckpointPolicy{Kind::kNone, 1};
    return true;
  }
  if (text == "selective") {
    *out = CheckpointPolicy{Kind::kSelective, 1};
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

std::int64_t checkpointed_peak_bytes(const CheckpointPolicy& policy, int n_layer, std::int64_t resident,
                                     std::int64_t layer, std::int64_t head) {
  std::int64_t live = resident, peak = live;
  auto alloc = [&](std::int64_t n) {
    live += n;
    peak = std::max(peak, live);
  };
  for (int l = 0; l < n_layer; ++l) {
    alloc(layer);
    if (policy.is_checkpointed(l)) live -= layer;
  }
  alloc(head);
  live -= head;
  for (int l = n_layer - 1; l >= 0; --l) {
    if (policy.is_checkpointed(l)) alloc(layer);
    live -= layer;
  }
  return peak;
}

}  // namespace zt
