// Entry point of the collective tests, run by mpirun on every rank (or alone as one rank). With
// ZT_COMM_TEST_SCENARIO=timeout it instead plays a rank that never arrives (see timeout_test.py).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
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

}  // namespace

int main(int argc, char** argv) {
  static zt::MemoryTracker tracker;
  zt::g_tracker = &tracker;
  const char* scenario = std::getenv("ZT_COMM_TEST_SCENARIO");
  zt::CommOptions options;
  options.timeout_s = scenario != nullptr ? 2.0 : 60.0;
  zt::g_comm = zt::make_communicator(tracker, options);
  options.deterministic = true;
  zt::g_det_comm = zt::make_communicator(tracker, options);
  if (scenario != nullptr && std::strcmp(scenario, "timeout") == 0) return run_timeout_scenario();

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
