// Work::wait's timeout: the collective's own state (the advance function and the staging buffers
// it holds) outlives the on_timeout call that stops the collective's progress (the MPI backend's
// abort halts its worker), found by a ThreadSanitizer sweep: the buffers were freed first, while
// the progress thread could still complete the collective into them.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/base/core/check.h"
#include "engine/distributed/comm/communicator.h"

namespace zt {
namespace {

TEST(WorkTimeout, TheCollectivesBuffersLiveUntilOnTimeoutHasRun) {
  std::vector<std::string> events;
  // Stands in for a collective's staging: says when it is freed.
  struct Staging {
    explicit Staging(std::vector<std::string>* e) : events(e) {}
    ~Staging() { events->push_back("staging freed"); }
    std::vector<std::string>* events;
  };
  auto staging = std::make_shared<Staging>(&events);
  Work work([staging] { return false; }, "all_reduce (4 x F32)", 0.05, nullptr,
            [&events](const std::string& message) { events.push_back("on_timeout: " + message); });
  staging.reset();  // the Work's advance function holds the only reference now
  std::string error;
  try {
    work.wait();
  } catch (const RuntimeError& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("all_reduce (4 x F32) did not complete within 0.05 s"), std::string::npos) << error;
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].rfind("on_timeout: all_reduce (4 x F32)", 0), 0u) << events[0];
  EXPECT_EQ(events[1], "staging freed");
  EXPECT_TRUE(work.done());  // nothing left for a second wait (or the destructor) to wait on
}

}  // namespace
}  // namespace zt
