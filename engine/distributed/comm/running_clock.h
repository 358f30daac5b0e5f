// RunningClock: the seconds a wait has had to run, which the collective timeouts count.
//
// A process that is stopped (SIGSTOP, Ctrl-Z, a scheduler's suspend of the job, a paused VM) sees,
// once continued, the whole stop pass at once on the steady clock: a job suspended past
// train.collective_timeout_s timed out the collective each rank was waiting in as it continued,
// although no rank had died (a user trial: 9 of 23 suspends of 2 ranks, one a segfault). A wait reads
// this clock at each poll, every few microseconds to milliseconds, so a gap between two reads longer
// than kSuspendedGap is mostly time the process did not run: it counts as kSuspendedGap, no more.
// (Not as nothing: a poll that is itself slow, a thrashing host's, still moves the deadline on.) A
// peer that died or hangs leaves the waiting rank running and polling: its time counts, and the
// timeout still fires.
#pragma once

#include <algorithm>
#include <chrono>

namespace zt {

class RunningClock {
 public:
  using Clock = std::chrono::steady_clock;
  // Far past a poll loop's interval (2 ms for the watchdog, 50 us for a wait) and a busy machine's
  // scheduling delays.
  static constexpr Clock::duration kSuspendedGap = std::chrono::seconds(1);

  explicit RunningClock(Clock::time_point start = Clock::now()) : last_(start) {}

  // The seconds counted from the start to `now` (no earlier than the last read): every gap between
  // two reads, each at most kSuspendedGap.
  double seconds(Clock::time_point now = Clock::now()) {
    const Clock::duration gap = now - last_;
    if (gap > Clock::duration::zero()) counted_ += std::min(gap, kSuspendedGap);
    if (now > last_) last_ = now;
    return std::chrono::duration<double>(counted_).count();
  }

 private:
  Clock::time_point last_;
  Clock::duration counted_{0};
};

}  // namespace zt
