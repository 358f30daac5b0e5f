// Accounts every byte the engine allocates to a category, with current and peak bytes each.
// ZeRO stages are compared through these figures, so every allocation goes through Buffer,
// which charges this tracker; nothing in the engine allocates model memory around it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace zt {

enum class MemCategory : int {
  kParameters = 0,   // working parameters (bf16 or fp32) the model computes with
  kMasterWeights,    // fp32 master copy kept by the optimizer in mixed precision
  kGradients,        // parameter gradients (bf16 or fp32)
  kOptimizerStates,  // AdamW first and second moments
  kActivations,      // forward activations kept for backward (and recompute scratch)
  kCommBuffers,      // collective send/receive buffers
  kWorkspace,        // transient scratch: fp32 unit copies, activation gradients
  kCount
};

constexpr int kNumMemCategories = static_cast<int>(MemCategory::kCount);

std::string_view mem_category_name(MemCategory c);

struct MemorySnapshot {
  std::array<std::int64_t, kNumMemCategories> current_bytes{};
  std::array<std::int64_t, kNumMemCategories> peak_bytes{};
  std::int64_t total_current_bytes = 0;
  std::int64_t total_peak_bytes = 0;  // peak of the sum, not the sum of peaks

  std::int64_t current(MemCategory c) const { return current_bytes[static_cast<int>(c)]; }
  std::int64_t peak(MemCategory c) const { return peak_bytes[static_cast<int>(c)]; }
};

class MemoryTracker {
 public:
  void charge(MemCategory c, std::int64_t bytes);
  void release(MemCategory c, std::int64_t bytes);
  // Starts a new peak window: peaks drop to the current figures.
  void reset_peaks();
  MemorySnapshot snapshot() const;

 private:
  static void raise_peak(std::atomic<std::int64_t>& peak, std::int64_t value);

  std::array<std::atomic<std::int64_t>, kNumMemCategories> current_{};
  std::array<std::atomic<std::int64_t>, kNumMemCategories> peak_{};
  std::atomic<std::int64_t> total_current_{0};
  std::atomic<std::int64_t> total_peak_{0};
};

// "1.50 MiB" style rendering used in every memory table.
std::string format_bytes(std::int64_t bytes);
// Two sizes set side by side (needed, offered): format_bytes each, with the exact bytes after each
// where they round alike ("11.02 MiB (11554816 bytes)"), so the line says which is larger.
std::pair<std::string, std::string> format_bytes_apart(std::int64_t a, std::int64_t b);

// A table with one row per category: current and peak bytes.
std::string format_memory_table(const MemorySnapshot& s);

}  // namespace zt
