// The NCCL communicator's watchdog, on the CPU with plain-function probes: completed collectives
// retire without a report; one past its deadline, a backend error, or a probe that finds its
// collective failed is reported once with the collective and the rank's context named; nothing is
// reported after a clean shutdown.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "engine/distributed/comm/collective_watchdog.h"

namespace zt {
namespace {

using namespace std::chrono_literals;

struct Reports {
  std::mutex mutex;
  std::vector<std::string> messages;
  void add(const std::string& m) {
    std::lock_guard<std::mutex> lock(mutex);
    messages.push_back(m);
  }
  std::size_t size() {
    std::lock_guard<std::mutex> lock(mutex);
    return messages.size();
  }
};

// Polls `condition` for up to 5 s (the watchdog polls every 2 ms).
template <typename F>
bool eventually(F condition) {
  for (int i = 0; i < 5000; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return condition();
}

TEST(CollectiveWatchdog, CompletedCollectivesRetireInAnyOrderWithoutAReport) {
  Reports reports;
  std::atomic<bool> a{false}, b{false}, c{false};
  CollectiveWatchdog dog([] { return std::string(); }, [&](const std::string& m) { reports.add(m); });
  dog.watch(
      "all_gather A", "step 1", [&] { return a.load(); }, 30.0);
  dog.watch(
      "reduce_scatter B", "step 1", [&] { return b.load(); }, 30.0);
  dog.watch(
      "all_reduce C", "step 1", [&] { return c.load(); }, 30.0);
  EXPECT_EQ(dog.in_flight(), 3u);
  b = true;  // the second finishes first (another stream)
  ASSERT_TRUE(eventually([&] { return dog.in_flight() == 2; }));
  a = true;
  c = true;
  ASSERT_TRUE(eventually([&] { return dog.in_flight() == 0; }));
  EXPECT_EQ(reports.size(), 0u);
  EXPECT_FALSE(dog.failed());
}

TEST(CollectiveWatchdog, ACollectivePastItsDeadlineIsReportedOnceWithItsContext) {
  Reports reports;
  CollectiveWatchdog dog([] { return std::string(); }, [&](const std::string& m) { reports.add(m); });
  dog.watch(
      "NCCL all_gather of 4096 bf16 elements", "step 7 micro-batch 1", [] { return false; }, 0.05);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually([&] { return reports.size() == 1; }));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 0.04);
  EXPECT_LT(waited, 2.0);
  const std::string& m = reports.messages[0];
  EXPECT_NE(m.find("NCCL all_gather of 4096 bf16 elements"), std::string::npos) << m;
  EXPECT_NE(m.find("step 7 micro-batch 1"), std::string::npos) << m;
  EXPECT_NE(m.find("0.05 s"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << "one line";
  EXPECT_TRUE(dog.failed());
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(reports.size(), 1u) << "reported once";
}

TEST(CollectiveWatchdog, ABackendErrorIsReportedNamingTheOldestCollective) {
  Reports reports;
  std::atomic<bool> broken{false};
  CollectiveWatchdog dog([&] { return broken ? std::string("remote process exited") : std::string(); },
                         [&](const std::string& m) { reports.add(m); });
  dog.watch(
      "NCCL reduce_scatter of 10 f32 elements", "step 3 micro-batch 0", [] { return false; }, 60.0);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(reports.size(), 0u) << "no error yet, deadline far";
  broken = true;
  ASSERT_TRUE(eventually([&] { return reports.size() == 1; }));
  EXPECT_NE(reports.messages[0].find("NCCL reduce_scatter of 10 f32 elements (step 3 micro-batch 0) failed: "
                                     "remote process exited"),
            std::string::npos)
      << reports.messages[0];
}

// A probe that can tell its collective failed (a CUDA error on the collective's event) throws: that
// is a failure reported at once, never a completion that retires the collective silently.
TEST(CollectiveWatchdog, AProbeThatThrowsIsAFailureNotACompletion) {
  Reports reports;
  std::atomic<bool> faulted{false};
  CollectiveWatchdog dog([] { return std::string(); }, [&](const std::string& m) { reports.add(m); });
  dog.watch(
      "NCCL all_gather of 64 bf16 elements", "step 2 micro-batch 0",
      [&]() -> bool {
        if (faulted) throw std::runtime_error("CUDA error on its completion event: an illegal memory access");
        return false;
      },
      60.0);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(reports.size(), 0u) << "in flight, deadline far";
  EXPECT_EQ(dog.in_flight(), 1u);
  faulted = true;
  ASSERT_TRUE(eventually([&] { return reports.size() == 1; }));
  EXPECT_NE(reports.messages[0].find("NCCL all_gather of 64 bf16 elements (step 2 micro-batch 0) failed: CUDA error on "
                                     "its completion event: an illegal memory access"),
            std::string::npos)
      << reports.messages[0];
  EXPECT_TRUE(dog.failed());
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(reports.size(), 1u) << "reported once";
}

TEST(CollectiveWatchdog, StartHookRunsOnTheWatchdogThreadAndShutdownIsSilent) {
  Reports reports;
  std::atomic<bool> hook_ran_elsewhere{false};
  const auto main_id = std::this_thread::get_id();
  {
    CollectiveWatchdog dog([] { return std::string(); }, [&](const std::string& m) { reports.add(m); },
                           [&] { hook_ran_elsewhere = std::this_thread::get_id() != main_id; });
    dog.watch(
        "NCCL broadcast", "start-up", [] { return false; }, 60.0);  // still in flight at shutdown
    ASSERT_TRUE(eventually([&] { return hook_ran_elsewhere.load(); }));
  }
  EXPECT_EQ(reports.size(), 0u);
}

// The timeouts count the time the process ran (running_clock.h): a gap between two polls as long as
// a suspend (SIGSTOP, a scheduler's suspend, a paused VM) is left out, the polls' own gaps are not.
TEST(RunningClock, CountsThePollsGapsButNotASuspend) {
  const auto t0 = RunningClock::Clock::now();
  RunningClock clock(t0);
  EXPECT_DOUBLE_EQ(clock.seconds(t0 + 10ms), 0.01);
  EXPECT_DOUBLE_EQ(clock.seconds(t0 + 10ms + 300s), 1.01) << "a suspend of 5 minutes counts a second";
  EXPECT_DOUBLE_EQ(clock.seconds(t0 + 30ms + 300s), 1.03);
  EXPECT_DOUBLE_EQ(clock.seconds(t0 + 20ms + 300s), 1.03) << "an earlier time counts nothing";
  EXPECT_DOUBLE_EQ(clock.seconds(t0 + 40ms + 300s), 1.04);
  EXPECT_DOUBLE_EQ(clock.seconds(t0 + 40ms + 301500ms), 2.04) << "a slow poll still counts its second";
}

// A watchdog thread that did not run for longer than the timeout (its process stopped; here a probe
// that blocks 2.5 s, past the 1.5 s timeout) does not report the collective on continuing: the gap
// counts one second, and the collective completes after.
TEST(CollectiveWatchdog, ATimeTheProcessDidNotRunIsNotCountedTowardsTheDeadline) {
  Reports reports;
  std::atomic<int> probes{0};
  CollectiveWatchdog dog([] { return std::string(); }, [&](const std::string& m) { reports.add(m); });
  dog.watch(
      "NCCL all_reduce of 2 f32 elements", "step 4 micro-batch 0",
      [&] {
        const int n = ++probes;
        if (n == 1) std::this_thread::sleep_for(2500ms);
        return n >= 3;  // in flight when polled again after the gap, then complete
      },
      1.5);
  ASSERT_TRUE(eventually([&] { return dog.in_flight() == 0 || reports.size() > 0; }));
  EXPECT_EQ(reports.size(), 0u) << (reports.size() > 0 ? reports.messages[0] : "");
  EXPECT_FALSE(dog.failed());
}

}  // namespace
}  // namespace zt
