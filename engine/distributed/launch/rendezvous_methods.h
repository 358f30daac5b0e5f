// Internal to the rendezvous (engine/distributed/launch/rendezvous*.cpp, launch_env.cpp): the environment's
// values, the deadline every wait counts down to,
// the error-text helpers more than one method uses, and the per-method functions that
// share_from_rank0 dispatches to. Not a public header: callers include engine/distributed/launch/rendezvous.h.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/distributed/launch/rendezvous.h"

namespace zt::detail {

using Clock = std::chrono::steady_clock;

// The point in time every wait of one rendezvous counts down to.
struct Deadline {
  Clock::time_point end;
  explicit Deadline(double seconds)
      : end(Clock::now() +
            std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::min(seconds, 1e9)))) {}
  bool passed() const { return Clock::now() >= end; }
  int remaining_ms(int cap_ms = INT_MAX) const {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(ms, 0, cap_ms));
  }
  void sleep(int ms) const { std::this_thread::sleep_for(std::chrono::milliseconds(remaining_ms(ms))); }
};

inline std::string errno_text() { return std::strerror(errno); }

// An environment variable's value, or nullptr where it is unset or empty.
inline const char* env_value(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// A non-negative int, or -1 when `text` is anything else (a sign, spaces, letters, overflow).
inline int parse_count(std::string_view text) {
  int value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && ptr == text.data() + text.size() && value >= 0 ? value : -1;
}

// Up to eight ranks, comma-separated, then "and N more": for the errors naming who never arrived.
inline std::string list_ranks(const std::set<int>& ranks) {
  std::string text;
  int shown = 0;
  for (int r : ranks) {
    if (shown++ == 8) return fmt::format("{} and {} more", text, ranks.size() - 8);
    text += (text.empty() ? "" : ", ") + std::to_string(r);
  }
  return text;
}

// A 32-bit digest of options.job (0 for none) that the TCP hello and the rendezvous file carry.
inline std::uint32_t job_key(const RendezvousOptions& options) {
  std::uint32_t h = 2166136261u;  // FNV-1a
  for (const char c : options.job) h = (h ^ static_cast<std::uint8_t>(c)) * 16777619u;
  return options.job.empty() ? 0 : h;
}

// The shared-file method ([Note: file rendezvous] in rendezvous_file.cpp): rank 0 writes
// options.file_path and waits until every rank has acknowledged it, then removes it; returns `blob`.
std::vector<std::uint8_t> share_by_file_rank0(const LaunchInfo& launch, const RendezvousOptions& options,
                                              const std::vector<std::uint8_t>& blob);

// The shared-file method, on rank 1..N-1: waits for rank 0's file, checks its world size and blob
// size (`size` bytes), acknowledges it and returns the blob once rank 0 has removed the file.
std::vector<std::uint8_t> share_by_file_other(const LaunchInfo& launch, const RendezvousOptions& options,
                                              std::size_t size);

// The TCP method: rank 0 listens on options.port (every interface of options.host's family) and
// hands `blob` to each rank that connects, until all have acknowledged it; returns `blob`.
std::vector<std::uint8_t> share_by_tcp_rank0(const LaunchInfo& launch, const RendezvousOptions& options,
                                             const std::vector<std::uint8_t>& blob);

// The TCP method, on rank 1..N-1: connects to options.host:options.port (retrying until the
// deadline, since rank 0 may start later) and returns the `size`-byte blob rank 0 sends.
std::vector<std::uint8_t> share_by_tcp_other(const LaunchInfo& launch, const RendezvousOptions& options,
                                             std::size_t size);

}  // namespace zt::detail
