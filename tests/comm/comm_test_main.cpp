// Entry point of the collective tests, run by mpirun on every rank (or alone as one rank). With
// ZT_COMM_TEST_SCENARIO=timeout it instead plays a rank that never arrives, and with =suspended a job
// stopped past its timeout while a rank waits (see timeout_test.py).
#include <gtest/gtest.h>

#include <unistd.h>
#include <chrono>
#include <cstdlib>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/comm/comm_test_env.h"

namespace zt {
namespace {
MemoryTracker* g_tracker = nullptr;
std::unique_ptr<Communicator> g_comm;
std::unique_ptr<Communicator> g_det_comm;
}  // namespace

Communicator& test_comm() { return *g_comm; }
Communicator& deterministic_test_comm() { return *g_det_comm; }
MemoryTracker& test_tracker() { return *g_tracker; }

}  // namespace zt

namespace {

// Rank 1 sleeps past the others' timeout; they must fail with a message naming the collective
// and the step, and abort the job, instead of waiting forever.
int run_timeout_scenario() {
  zt::Communicator& c = zt::test_comm();
  if (c.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(20));
    return 0;
  }
  c.set_context("step 7");
  std::vector<float> buf(16, 1.0f);
  c.all_reduce(zt::TensorView{buf.data(), zt::DType::kF32, zt::Device::kCPU, zt::Shape{16}}, zt::ReduceOp::kSum).wait();
  return 0;  // not reached: wait() aborts the job
}

// Each rank writes its pid into ZT_COMM_TEST_PID_DIR; rank 0 then waits in a collective that rank
// 1 joins once timeout_test.py, having stopped every rank (SIGSTOP) for twice the 3 s timeout and
// continued them, writes the folder's "go" file. The stop counts a second of the wait, not its
// length: the collective completes on every rank; rank 0 prints how long its wait took.
int run_suspended_scenario() {
  zt::Communicator& c = zt::test_comm();
  const char* dir = std::getenv("ZT_COMM_TEST_PID_DIR");
  if (dir == nullptr) return 2;
  const std::string path = std::string(dir) + "/rank" + std::to_string(c.rank());
  std::ofstream(path + ".tmp") << getpid() << "\n";
  std::rename((path + ".tmp").c_str(), path.c_str());
  c.barrier();
  if (c.rank() == 1) {  // outside any collective until the job has been stopped and continued
    const std::string go = std::string(dir) + "/go";
    for (int i = 0; i < 6000 && !std::filesystem::exists(go); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  c.set_context("step 3");
  std::vector<float> buf(16, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  c.all_reduce(zt::TensorView{buf.data(), zt::DType::kF32, zt::Device::kCPU, zt::Shape{16}}, zt::ReduceOp::kSum).wait();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const bool summed = buf[0] == static_cast<float>(c.world_size());
  std::printf("rank %d: the collective completed after the suspend%s (waited %.1f s)\n", c.rank(),
              summed ? "" : ", wrong sum", waited);
  std::fflush(stdout);
  return summed ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  static zt::MemoryTracker tracker;
  zt::g_tracker = &tracker;
  const char* scenario = std::getenv("ZT_COMM_TEST_SCENARIO");
  zt::CommOptions options;
  options.timeout_s = scenario == nullptr ? 60.0 : std::strcmp(scenario, "suspended") == 0 ? 3.0 : 2.0;
  zt::g_comm = zt::make_communicator(tracker, options);
  options.deterministic = true;
  zt::g_det_comm = zt::make_communicator(tracker, options);
  if (scenario != nullptr && std::strcmp(scenario, "timeout") == 0) return run_timeout_scenario();
  if (scenario != nullptr && std::strcmp(scenario, "suspended") == 0) {
    const int rc = run_suspended_scenario();
    zt::g_det_comm.reset();  // before MPI_Finalize at exit
    zt::g_comm.reset();
    return rc;
  }

  ::testing::InitGoogleTest(&argc, argv);
  if (zt::g_comm->rank() != 0) {  // one report, from rank 0; failures still set every rank's exit code
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  zt::g_det_comm.reset();
  zt::g_comm.reset();
  return rc;
}
