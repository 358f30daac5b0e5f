// The one-process communicator: world size 1, every collective is a copy (an average over one
// rank is the value itself), so a single process runs the same code path as N ranks.
#pragma once

#include "engine/distributed/comm/communicator.h"

namespace zt {

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(MemoryTracker& tracker, const CommOptions& options);

  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend_name() const override { return "local"; }
  Work all_gather(TensorView send, TensorView recv) override;
  Work reduce_scatter(TensorView send, TensorView recv, ReduceOp op) override;
  Work all_reduce(TensorView buf, ReduceOp op) override;
  Work broadcast(TensorView buf, int root) override;
  Work all_to_all(TensorView send, TensorView recv) override { return all_gather(send, recv); }  // one slot
  void barrier() override {}
  // Another world of one (every color holds this one rank).
  std::unique_ptr<Communicator> split(int color, int key) override;

 private:
  MemoryTracker& tracker_;
};

}  // namespace zt
