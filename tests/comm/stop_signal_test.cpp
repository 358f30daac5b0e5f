// Stop requests (engine/distributed/launch/signals.h) in one process: a signal is recorded, not fatal; a repeated
// SIGUSR1 is harmless; a second SIGTERM or SIGINT ends the process at once (after a SIGUSR1 or a
// hang-up, the second of those); and a collective that
// stays blocked after a stop request gives up after the grace period, long before its timeout,
// naming the signal. ctest runs each test in a process of its own (gtest_discover_tests), so each
// starts with no request.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/base/core/check.h"
#include "engine/distributed/comm/collective_watchdog.h"
#include "engine/distributed/comm/communicator.h"
#include "engine/distributed/launch/signals.h"

namespace zt {
namespace {

// A collective that never completes; returns the error wait() ends with and how long it took.
std::pair<std::string, double> wait_on_dead_peer(double timeout_s) {
  const std::string context = "step 7 micro-batch 0";
  Work work([] { return false; }, "all-reduce of 4 f32", timeout_s, &context);
  const auto start = std::chrono::steady_clock::now();
  try {
    work.wait();
  } catch (const RuntimeError& e) {
    return {e.what(), std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
  }
  return {"", 0.0};
}

TEST(StopSignal, WithoutARequestAWaitRunsToItsTimeout) {
  install_stop_request_handlers("zerotrain", "a test's stop");
  ASSERT_EQ(stop_signal(), 0);
  EXPECT_EQ(seconds_since_stop_signal(), 0.0);
  const auto [error, seconds] = wait_on_dead_peer(0.3);
  EXPECT_NE(error.find("did not complete within 0.3 s (train.collective_timeout_s) at step 7 micro-batch 0"),
            std::string::npos)
      << error;
  EXPECT_GE(seconds, 0.3);
}

TEST(StopSignal, TheFirstSignalIsRecordedAndABlockedCollectiveGivesUpAfterTheGrace) {
  install_stop_request_handlers("zerotrain", "a test's stop");
  set_stop_grace_seconds(0.2);
  ASSERT_EQ(std::raise(SIGUSR1), 0);  // returns: the handler records, the process lives
  ASSERT_EQ(stop_signal(), SIGUSR1);
  ASSERT_EQ(std::raise(SIGUSR1), 0);  // mpirun may forward it twice: still alive, first one kept
  EXPECT_EQ(stop_signal(), SIGUSR1);
  EXPECT_GE(seconds_since_stop_signal(), 0.0);
  const auto [error, seconds] = wait_on_dead_peer(60.0);  // would wait a minute without the request
  EXPECT_NE(error.find("all-reduce of 4 f32 at step 7 micro-batch 0 was still blocked"), std::string::npos) << error;
  EXPECT_NE(error.find("after SIGUSR1 asked this rank to stop"), std::string::npos) << error;
  EXPECT_LT(seconds, 10.0);
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(SIGINT), "SIGINT");
}

// A device backend's collectives are watched from the watchdog's thread, while the host may be
// blocked in a device synchronisation behind them: the watchdog applies the grace too (it waited
// for the collective timeout, 300 s, and Slurm's SIGKILL came first, the failure unsaid), except
// while a wait known to outlast it is in progress (another group's checkpoint save).
// What a watchdog reports, read from the test's thread while the watchdog's adds to it.
struct Reports {
  std::mutex mutex;
  std::vector<std::string> messages;
  std::vector<std::string> now() {
    std::lock_guard<std::mutex> lock(mutex);
    return messages;
  }
  // Up to 5 s for the first report (the watchdog polls every 2 ms).
  std::vector<std::string> first() {
    for (int i = 0; i < 500 && now().empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return now();
  }
  std::unique_ptr<CollectiveWatchdog> watchdog() {
    return std::make_unique<CollectiveWatchdog>([] { return std::string(); },
                                                [this](const std::string& m) {
                                                  std::lock_guard<std::mutex> lock(mutex);
                                                  messages.push_back(m);
                                                });
  }
};

TEST(StopSignal, TheWatchdogFailsACollectiveStillInFlightAGraceAfterTheRequest) {
  install_stop_request_handlers("zerotrain", "a test's stop");
  set_stop_grace_seconds(0.2);
  Reports reports;
  const std::unique_ptr<CollectiveWatchdog> dog = reports.watchdog();
  {
    const StopGraceSuspended waiting_past_the_grace;
    dog->watch(
        "all_reduce of 1 f32", "step 3, another group's save", [] { return false; }, 60.0);
    ASSERT_EQ(std::raise(SIGUSR1), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    EXPECT_TRUE(reports.now().empty()) << reports.now().front();
  }
  ASSERT_EQ(reports.first().size(), 1u);
  EXPECT_EQ(reports.now().front(),
            "all_reduce of 1 f32 (step 3, another group's save) was still blocked 0.2 s after SIGUSR1 asked this rank "
            "to stop: another rank has failed or died; exiting without a checkpoint");
  // A collective launched after the request has its own grace (a live peer reaches it within it):
  // not failed at once, however old the request.
  Reports later;
  const std::unique_ptr<CollectiveWatchdog> young = later.watchdog();
  young->watch(
      "all_gather of 8 f32", "step 4 micro-batch 0", [] { return false; }, 60.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(later.now().empty());
  ASSERT_EQ(later.first().size(), 1u);
  EXPECT_NE(later.now().front().find("all_gather of 8 f32 (step 4 micro-batch 0) was still blocked 0.2 s"),
            std::string::npos);
}

TEST(StopSignalDeathTest, ASecondSigtermOrSigintEndsTheProcessAtOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (int sig : {SIGTERM, SIGINT}) {
    EXPECT_EXIT(
        {
          install_stop_request_handlers("zerotrain", "a test's stop");
          std::raise(sig);  // recorded
          std::raise(sig);  // ends the process
          std::exit(0);
        },
        testing::ExitedWithCode(128 + sig),
        "a second stop signal: exiting now \\(a checkpoint this stop was writing is left incomplete")
        << signal_name(sig);
  }
}

// After an early warning (SIGUSR1: Slurm's --signal=USR1@120) or a hang-up, the scheduler's SIGTERM
// at the time limit (or a first Ctrl-C) is its follow-up: said, the stop and its save go on (it
// ended the process without the save in progress); the next SIGTERM or SIGINT ends it.
TEST(StopSignalDeathTest, AfterSigusr1OrAHangUpTheSecondSigtermOrSigintEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const auto& [first, then] : {std::pair{SIGUSR1, SIGTERM}, std::pair{SIGHUP, SIGINT}}) {
    EXPECT_EXIT(
        {
          install_stop_request_handlers("zerotrain", "a test's stop");
          std::raise(first);
          std::raise(then);  // a follow-up: the process lives, the first request kept
          std::exit(stop_signal() == first ? 0 : 1);
        },
        testing::ExitedWithCode(0), "already stopping on the earlier request")
        << signal_name(first);
    EXPECT_EXIT(
        {
          install_stop_request_handlers("zerotrain", "a test's stop");
          std::raise(first);
          std::raise(then);
          std::raise(then);  // the second of those: ends the process
          std::exit(0);
        },
        testing::ExitedWithCode(128 + then),
        "a second stop signal: exiting now \\(a checkpoint this stop was writing is left incomplete")
        << signal_name(first);
  }
}

// The first request says at once that it was heard and what follows (a stop waits for a step and
// a save; a user who saw nothing pressed again and lost the checkpoint).
TEST(StopSignalDeathTest, TheFirstRequestIsAcknowledgedAtOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        install_stop_request_handlers("zerotrain", "a test's stop");
        std::raise(SIGINT);
        std::exit(stop_signal() == SIGINT ? 0 : 1);
      },
      testing::ExitedWithCode(0), "zerotrain: SIGINT received: a test's stop");
}

// A closed terminal (SIGHUP) requests a stop too, as SIGTERM does, and a second hang-up is not a
// second request; nohup's ignored SIGHUP stays ignored.
TEST(StopSignalDeathTest, AHangUpRequestsAStopUnlessIgnored) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        install_stop_request_handlers("zerotrain", "a test's stop");
        std::raise(SIGHUP);
        std::raise(SIGHUP);
        std::exit(stop_signal() == SIGHUP ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        std::signal(SIGHUP, SIG_IGN);
        install_stop_request_handlers("zerotrain", "a test's stop");
        std::raise(SIGHUP);
        std::exit(stop_signal() == 0 ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

// checkpoint.save_on_signal = false gives the signals back once the config is read; one that came
// before then ends the process as its default would have.
TEST(StopSignalDeathTest, RestoredDefaultsEndTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        install_stop_request_handlers("zerotrain", "a test's stop");
        restore_default_stop_handlers();
        std::raise(SIGUSR1);
        std::exit(0);
      },
      testing::KilledBySignal(SIGUSR1), "");
  EXPECT_EXIT(
      {
        install_stop_request_handlers("zerotrain", "a test's stop");
        std::raise(SIGTERM);              // recorded while the config is read
        restore_default_stop_handlers();  // raised again
        std::exit(0);
      },
      testing::KilledBySignal(SIGTERM), "");
}

// A SIGUSR1 that came inherited ignored, then a SIGTERM, before the config turned stops off: the
// SIGTERM is what the default does with it (both were swallowed: the run trained on).
TEST(StopSignalDeathTest, RestoredDefaultsRaiseAFollowUpToo) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::signal(SIGUSR1, SIG_IGN);
        install_stop_request_handlers("zerotrain", "a test's stop");
        std::raise(SIGUSR1);
        std::raise(SIGTERM);              // a follow-up
        restore_default_stop_handlers();  // SIGUSR1 back to ignored; the SIGTERM raised again
        std::exit(0);
      },
      testing::KilledBySignal(SIGTERM), "");
}

// GNU timeout sends its signal to the child and then to the child's process group: one request
// that arrives twice when the first was handled in between. The same signal from the same other
// process within 2 s is that request; the process lives and stops at its next step boundary.
TEST(StopSignalDeathTest, TheSameSignalFromTheSameSenderAtOnceIsOneRequest) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        install_stop_request_handlers("zerotrain", "a test's stop");
        const pid_t sender = fork();
        if (sender == 0) {  // timeout's two kill() calls, the first one handled before the second
          kill(getppid(), SIGINT);
          usleep(200'000);
          kill(getppid(), SIGINT);
          _exit(0);
        }
        int status = 0;
        while (waitpid(sender, &status, 0) < 0) {}
        std::exit(stop_signal() == SIGINT ? 7 : 8);
      },
      testing::ExitedWithCode(7), "");
}

// The launcher's SIGTERM (mpirun ending the job after another rank exited non-zero): a rank still
// in its work says where it was stopped and exits 1; a rank that has already printed its own error
// (ranks that all failed the same check, finalising MPI) exits with the code it reported and adds
// no line.
TEST(LauncherTerminationDeathTest, NamesTheWaitSiteUnlessTheRankAlreadyReportedItsError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string context = "start-up";
  EXPECT_EXIT(
      {
        install_launcher_termination_handler();
        record_wait_site(nullptr, &context);
        std::raise(SIGTERM);
        std::exit(0);
      },
      testing::ExitedWithCode(1), "the launcher stopped this rank at start-up \\(between collectives\\)");
  EXPECT_EXIT(
      {
        install_launcher_termination_handler();
        record_wait_site(nullptr, &context);
        note_error_reported(2);
        std::raise(SIGTERM);
        std::exit(0);
      },
      testing::ExitedWithCode(2), "^$");
}

// A rank stopped by the launcher (another died, mpirun interrupted) after a save committed: rank 0
// adds the run's checkpoint folder and the resume to its wait site (the lines named neither).
TEST(LauncherTerminationDeathTest, NamesTheLastCompleteCheckpoint) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string context = "step 110 micro-batch 2";
  EXPECT_EXIT(
      {
        install_launcher_termination_handler();
        note_checkpoint_complete("run/checkpoints");
        record_wait_site(nullptr, &context);
        std::raise(SIGTERM);
        std::exit(0);
      },
      testing::ExitedWithCode(1),
      "stopped this rank at step 110 micro-batch 2(.|\n)*the run's newest complete checkpoint in run/checkpoints "
      "continues it: the same command with --resume latest");
}

// Slurm's scancel signals mpirun and every rank at once: the ranks save their stop checkpoint, and
// mpirun's own SIGTERM reaches a rank whose save is whole. It says that and the resume, not the
// save's wait site as if the save had been cut.
TEST(LauncherTerminationDeathTest, AfterTheStopCheckpointIsSavedItSaysSo) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string context = "the checkpoint save of step 94";
  EXPECT_EXIT(
      {
        install_launcher_termination_handler();
        record_wait_site(nullptr, &context);
        note_stop_checkpoint_saved(94, "run/checkpoints");
        std::raise(SIGTERM);
        std::exit(0);
      },
      testing::ExitedWithCode(1),
      "note: the launcher ended this rank after its stop checkpoint, step 94 in run/checkpoints, was saved whole: "
      "continue with --resume latest");
}

// mpirun interrupted (a Slurm time limit, scancel) while the ranks finalise MPI after the run
// completed: the rank ends with 0 and says the run had completed, not the last wait site and a
// resume of a run with nothing left to train; a stop request then is acknowledged as coming after
// the end.
TEST(LauncherTerminationDeathTest, AfterTheRunCompletedItSaysSoAndExitsZero) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string context = "the sample after step 30";
  EXPECT_EXIT(
      {
        install_launcher_termination_handler();
        note_checkpoint_complete("run/checkpoints");
        record_wait_site(nullptr, &context);
        note_run_complete("run");
        std::raise(SIGTERM);
        std::exit(3);
      },
      testing::ExitedWithCode(0),
      "^zerotrain: note: the launcher stopped the job after the run had completed; its outputs are in run\n$");
  EXPECT_EXIT(
      {
        install_stop_request_handlers("zerotrain", "a test's stop");
        note_run_complete("run");
        std::raise(SIGUSR1);
        std::exit(stop_signal() == SIGUSR1 ? 0 : 1);
      },
      testing::ExitedWithCode(0),
      "^zerotrain: SIGUSR1 received after the run completed \\(its outputs are in run\\): "
      "nothing to stop\n$");
  // A request pending from the last step (Slurm's early SIGUSR1), then the scheduler's SIGTERM
  // after the end: nothing to wait for, so the process ends at once, with 0.
  EXPECT_EXIT(
      {
        install_stop_request_handlers("zerotrain", "a test's stop");
        std::raise(SIGUSR1);
        note_run_complete("run");
        std::raise(SIGTERM);
        std::exit(3);
      },
      testing::ExitedWithCode(0), "a second stop signal: exiting now \\(the run had completed\\)");
  // ... unless the rank failed after all (a peer lost in the gather after the run): its own code.
  EXPECT_EXIT(
      {
        install_stop_request_handlers("zerotrain", "a test's stop");
        std::raise(SIGUSR1);
        note_run_complete("run");
        note_error_reported(1);
        std::raise(SIGTERM);
        std::exit(3);
      },
      testing::ExitedWithCode(1), "");
}

}  // namespace
}  // namespace zt
