// Memory tracker: per-category current/peak byte counters (lock-free) and their rendering.
#include "engine/base/core/memory_tracker.h"

#include <fmt/format.h>

#include "engine/base/core/check.h"

namespace zt {

std::string_view mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::kParameters: return "parameters";
    case MemCategory::kMasterWeights: return "master_weights";
    case MemCategory::kGradients: return "gradients";
    case MemCategory::kOptimizerStates: return "optimizer_states";
    case MemCategory::kActivations: return "activations";
    case MemCategory::kCommBuffers: return "comm_buffers";
    case MemCategory::kWorkspace: return "workspace";
    case MemCategory::kCount: break;
  }
  return "?";
}

void MemoryTracker::raise_peak(std::atomic<std::int64_t>& peak, std::int64_t value) {
  std::int64_t old = peak.load(std::memory_order_relaxed);
  while (value > old && !peak.compare_exchange_weak(old, value, std::memory_order_relaxed)) {}
}

void MemoryTracker::charge(MemCategory c, std::int64_t bytes) {
  ZT_CHECK(bytes >= 0);
  const int i = static_cast<int>(c);
  ZT_CHECK(i >= 0 && i < kNumMemCategories);
  raise_peak(peak_[i], current_[i].fetch_add(bytes, std::memory_order_relaxed) + bytes);
  raise_peak(total_peak_, total_current_.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

void MemoryTracker::release(MemCategory c, std::int64_t bytes) {
  const int i = static_cast<int>(c);
  ZT_CHECK(i >= 0 && i < kNumMemCategories);
  const std::int64_t left = current_[i].fetch_sub(bytes, std::memory_order_relaxed) - bytes;
  ZT_CHECK(left >= 0, "released more {} bytes than were charged", mem_category_name(c));
  total_current_.fetch_sub(bytes, std::memory_order_relaxed);
}

void MemoryTracker::reset_peaks() {
  for (int i = 0; i < kNumMemCategories; ++i) peak_[i].store(current_[i].load());
  total_peak_.store(total_current_.load());
}

MemorySnapshot MemoryTracker::snapshot() const {
  MemorySnapshot s;
  for (int i = 0; i < kNumMemCategories; ++i) {
    s.current_bytes[i] = current_[i].load();
    s.peak_bytes[i] = peak_[i].load();
  }
  s.total_current_bytes = total_current_.load();
  s.total_peak_bytes = total_peak_.load();
  return s;
}

std::string format_bytes(std::int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < (1 << 20)) return fmt::format("{:.2f} KiB", b / 1024.0);
  if (bytes < (1ll << 30)) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024.0));
  // Beyond: a model no machine holds still prints in a table's column ("16782132.00 GiB" ran into the next).
  if (bytes < (1ll << 40)) return fmt::format("{:.2f} GiB", b / static_cast<double>(1ll << 30));
  if (bytes < (1ll << 50)) return fmt::format("{:.2f} TiB", b / static_cast<double>(1ll << 40));
  return fmt::format("{:.2f} PiB", b / static_cast<double>(1ll << 50));
}

std::pair<std::string, std::string> format_bytes_apart(std::int64_t a, std::int64_t b) {
  std::pair<std::string, std::string> out{format_bytes(a), format_bytes(b)};
  if (out.first == out.second) {
    out.first += fmt::format(" ({} bytes)", a);
    out.second += fmt::format(" ({} bytes)", b);
  }
  return out;
}

std::string format_memory_table(const MemorySnapshot& s) {
  std::string out = fmt::format("{:<18} {:>14} {:>14}\n", "category", "current", "peak");
  for (int i = 0; i < kNumMemCategories; ++i) {
    const auto c = static_cast<MemCategory>(i);
    out += fmt::format("{:<18} {:>14} {:>14}\n", mem_category_name(c), format_bytes(s.current_bytes[i]),
                       format_bytes(s.peak_bytes[i]));
  }
  out += fmt::format("{:<18} {:>14} {:>14}\n", "total", format_bytes(s.total_current_bytes),
                     format_bytes(s.total_peak_bytes));
  return out;
}

}  // namespace zt
