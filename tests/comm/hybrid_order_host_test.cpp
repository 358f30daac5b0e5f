// When HybridCommunicator starts its hop across the groups ([Note: the second hop, queued at once on
// the device] in engine/distributed/comm/hybrid_communicator.cpp), on one process with recording
// stand-ins for the two hops' communicators: where both order their collectives on the device (as
// NCCL's do) the all-reduce across the groups is queued with the first hop, before any wait; on the
// host backends, and for a result in host memory, it starts only inside the wait, once the first hop
// is done. NCCL itself needs GPUs: what its ordering on the device then does with the two hops has
// not run.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/distributed/comm/hybrid_communicator.h"

namespace zt {
namespace {

using Log = std::vector<std::string>;

// Records each collective it is asked for, as "<name> <collective>"; each completes at its second
// test (in flight at the first, as a host collective may be).
class RecordingComm final : public Communicator {
 public:
  RecordingComm(std::shared_ptr<Log> log, std::string name, int rank, int world, bool on_device,
                std::vector<std::pair<std::string, int>> splits = {})
      : Communicator(CommOptions{}),
        log_(std::move(log)),
        name_(std::move(name)),
        rank_(rank),
        world_(world),
        on_device_(on_device),
        splits_(std::move(splits)) {}

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string backend_name() const override { return "recording"; }
  bool orders_on_device() const override { return on_device_; }
  Work all_gather(TensorView, TensorView) override { return record("all_gather"); }
  Work reduce_scatter(TensorView, TensorView, ReduceOp) override { return record("reduce_scatter"); }
  Work all_reduce(TensorView, ReduceOp) override { return record("all_reduce"); }
  Work broadcast(TensorView, int) override { return record("broadcast"); }
  void barrier() override {}
  // The world's splits, in the order HybridCommunicator asks for them: its group, then the replicas.
  std::unique_ptr<Communicator> split(int, int) override {
    auto [name, world] = splits_.at(next_split_++);
    return std::make_unique<RecordingComm>(log_, name, 0, world, on_device_);
  }

 private:
  Work record(const char* what) {
    log_->push_back(name_ + " " + what);
    auto tests = std::make_shared<int>(0);
    return Work([tests] { return ++*tests >= 2; }, what, 10.0, nullptr);  // done at its second test
  }

  std::shared_ptr<Log> log_;
  std::string name_;
  int rank_, world_;
  bool on_device_;
  std::vector<std::pair<std::string, int>> splits_;
  std::size_t next_split_ = 0;
};

// Rank 0 of 4 in groups of 2: its group and its replica set, two ranks each. The buffers are labelled
// as on `result_device` (the stand-ins never touch them).
Log reduce_scatter_then(bool on_device, const std::function<void(Work&, Log&)>& after_start,
                        Device result_device = Device::kCUDA) {
  auto log = std::make_shared<Log>();
  RecordingComm world(log, "world", 0, 4, on_device, {{"group", 2}, {"across", 2}});
  HybridCommunicator hybrid(world, 2);
  std::vector<float> send(8), recv(4);
  Work w = hybrid.reduce_scatter(TensorView{send.data(), DType::kF32, result_device, Shape{8}},
                                 TensorView{recv.data(), DType::kF32, result_device, Shape{4}}, ReduceOp::kSum);
  after_start(w, *log);
  return *log;
}

TEST(HybridOrder, OnTheDeviceTheHopAcrossIsQueuedWithTheFirst) {
  const Log log = reduce_scatter_then(true, [](Work& w, Log& at_start) {
    EXPECT_EQ(at_start, (Log{"group reduce_scatter", "across all_reduce"})) << "before any wait";
    w.wait();
  });
  EXPECT_EQ(log, (Log{"group reduce_scatter", "across all_reduce"})) << "and no second all-reduce in the wait";
}

TEST(HybridOrder, OnTheHostTheHopAcrossStartsInTheWaitOnceTheFirstIsDone) {
  const Log log = reduce_scatter_then(false, [](Work& w, Log& at_start) {
    EXPECT_EQ(at_start, (Log{"group reduce_scatter"})) << "before any wait";
    EXPECT_FALSE(w.test());  // the first hop still in flight: nothing across yet
    EXPECT_EQ(at_start, (Log{"group reduce_scatter"}));
    w.wait();
  });
  EXPECT_EQ(log, (Log{"group reduce_scatter", "across all_reduce"}));
}

TEST(HybridOrder, AHostResultWaitsForTheFirstHopEvenOnTheDevice) {
  // A host buffer gets the first hop's result only when its wait copies it back.
  const Log log = reduce_scatter_then(
      true,
      [](Work& w, Log& at_start) {
        EXPECT_EQ(at_start, (Log{"group reduce_scatter"})) << "before any wait";
        w.wait();
      },
      Device::kCPU);
  EXPECT_EQ(log, (Log{"group reduce_scatter", "across all_reduce"}));
}

}  // namespace
}  // namespace zt
