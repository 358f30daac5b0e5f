// Watches collectives that complete on a device, from a thread of its own. A device backend (NCCL)
// enqueues a collective and returns; the host only learns of a dead or missing peer when something
// waits, and a device synchronisation would then wait forever. So each collective is registered
// here with a completion probe and a deadline, and the backend's asynchronous-error query is polled
// beside them: a deadline passed or an error reported calls `on_failure` once, with one line naming
// the collective and what the rank was doing (the backend then aborts its communicator and exits
// the process, as the MPI backend does on a timeout). After a stop request, a collective still in
// flight the stop rule's grace period after it and after its own start is failed as Work::wait
// fails one (signals.h: a live peer reaches the step boundary within the grace, a dead one never
// does): the host may be blocked in a device synchronisation behind it, where nothing else looks.
// Host logic only: tested on the CPU with probes that are plain functions.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <thread>

#include "engine/distributed/comm/running_clock.h"

namespace zt {

class CollectiveWatchdog {
 public:
  // True once the collective has completed, false while it is in flight; throws (std::exception)
  // where it can tell the collective failed (a CUDA error on its event): reported as a failure,
  // never taken for a completion.
  using DoneProbe = std::function<bool()>;
  using ErrorProbe = std::function<std::string()>;  // non-empty: the backend's asynchronous error
  using FailureHandler = std::function<void(const std::string& message)>;

  // `on_thread_start` runs first on the watchdog thread (e.g. selecting the CUDA device there).
  CollectiveWatchdog(ErrorProbe error_probe, FailureHandler on_failure, std::function<void()> on_thread_start = {},
                     std::chrono::milliseconds poll_interval = std::chrono::milliseconds(2));
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // `description` names the collective ("all_gather of 1024 bf16 elements"), `context` what the
  // rank was doing ("step 12 micro-batch 0"); both are copied.
  void watch(std::string description, std::string context, DoneProbe done, double timeout_s);
  // Collectives registered and not yet seen complete.
  std::size_t in_flight() const;
  bool failed() const;

 private:
  struct Entry {
    std::string description, context;
    DoneProbe done;
    double timeout_s;
    double start_s;  // running_'s seconds when it was registered
  };
  void run();
  // One pass over the entries; returns the failure message, or empty.
  std::string poll_once();

  ErrorProbe error_probe_;
  FailureHandler on_failure_;
  std::function<void()> on_thread_start_;
  std::chrono::milliseconds poll_interval_;
  mutable std::mutex mutex_;
  RunningClock running_;  // under mutex_: the time the deadlines count, a suspend's left out
  std::condition_variable wake_;
  std::list<Entry> entries_;
  bool stopping_ = false;
  bool failed_ = false;
  std::thread thread_;  // last: started once everything it reads exists
};

}  // namespace zt
