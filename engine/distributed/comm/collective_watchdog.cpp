// CollectiveWatchdog: a polling thread. Probes run on it without the lock held where they may be
// slow (the error query), and entries are retired in any order: collectives on one stream finish
// in order, but a backend may use several streams.
#include "engine/distributed/comm/collective_watchdog.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>

#include "engine/distributed/launch/signals.h"

namespace zt {

CollectiveWatchdog::CollectiveWatchdog(ErrorProbe error_probe, FailureHandler on_failure,
                                       std::function<void()> on_thread_start, std::chrono::milliseconds poll_interval)
    : error_probe_(std::move(error_probe)),
      on_failure_(std::move(on_failure)),
      on_thread_start_(std::move(on_thread_start)),
      poll_interval_(poll_interval),
      thread_([this] { run(); }) {}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void CollectiveWatchdog::watch(std::string description, std::string context, DoneProbe done, double timeout_s) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_back(
        Entry{std::move(description), std::move(context), std::move(done), timeout_s, running_.seconds()});
  }
  wake_.notify_all();
}

std::size_t CollectiveWatchdog::in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

bool CollectiveWatchdog::failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_;
}

std::string CollectiveWatchdog::poll_once() {
  std::lock_guard<std::mutex> lock(mutex_);
  const double now = running_.seconds();
  for (auto it = entries_.begin(); it != entries_.end();) {
    bool done = false;
    try {
      done = it->done();
    } catch (const std::exception& e) {
      return fmt::format("{} ({}) failed: {}", it->description, it->context, e.what());
    }
    if (done) {
      it = entries_.erase(it);
      continue;
    }
    if (now - it->start_s > it->timeout_s) {
      return fmt::format("{} ({}) did not complete within {:g} s: a rank died, hangs, or never called it",
                         it->description, it->context, it->timeout_s);
    }
    const double grace = std::min(it->timeout_s, stop_grace_seconds());
    if (seconds_since_stop_signal() > grace && now - it->start_s > grace && !stop_grace_suspended()) {
      return fmt::format(
          "{} ({}) was still blocked {:g} s after {} asked this rank to stop: another rank has failed or died; "
          "exiting without a checkpoint",
          it->description, it->context, grace, signal_name(stop_signal()));
    }
    ++it;
  }
  return {};
}

void CollectiveWatchdog::run() {
  if (on_thread_start_) on_thread_start_();
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Idle until there is something to watch; then poll at the interval.
      wake_.wait(lock, [this] { return stopping_ || !entries_.empty(); });
      if (stopping_) return;
    }
    std::string failure = poll_once();
    if (failure.empty() && error_probe_) {
      const std::string error = error_probe_();
      if (!error.empty()) {
        std::lock_guard<std::mutex> lock(mutex_);
        const std::string what = entries_.empty()
                                     ? std::string("a collective")
                                     : fmt::format("{} ({})", entries_.front().description, entries_.front().context);
        failure = fmt::format("{} failed: {}", what, error);
      }
    }
    if (!failure.empty()) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        failed_ = true;
        entries_.clear();
      }
      on_failure_(failure);
      return;  // one failure ends the watch: the communicator is unusable after it
    }
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait_for(lock, poll_interval_, [this] { return stopping_; });
    if (stopping_) return;
  }
}

}  // namespace zt
