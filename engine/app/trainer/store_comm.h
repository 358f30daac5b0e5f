// Which communicator carries the parameter store's collectives, decided once from the run config
// and the world size: the trainer builds it (TrainerState) and the memory prediction counts its
// staging (predict_run_memory), so the two cannot disagree.
#pragma once

#include "engine/app/config/run_config.h"
#include "engine/distributed/comm/communicator.h"
#include "engine/distributed/sharding/schedule_replay.h"

namespace zt {

struct StoreCommChoice {
  // The store gets a device communicator of its own (else the trainer's host communicator).
  bool device_comm = false;
  DeviceCommBackend backend = DeviceCommBackend::kNccl;  // which, when device_comm
  CollectiveBackend staging = CollectiveBackend::kHost;  // whose staging the prediction counts
  // zero.shard_group_size below the world: the store's collectives go through a
  // HybridCommunicator, whose world is one group of `group_size`: over the host communicator on
  // the CPU, over an NCCL communicator of its own (device_comm, kNccl) on CUDA.
  bool hybrid = false;
  int group_size = 1;  // the store's world: the group's size, or world_size
};

// CUDA, when the store calls collectives (several ranks, or zero.solo_path false): NCCL, or with
// comm.backend = "mpi" a StagedCommunicator through pinned host memory. The CPU: the host
// communicator, or with the ZT_TEST_STAGED_COLLECTIVES hook (docs/config.md, "Testing hooks") a
// StagedCommunicator over host "device" memory, so the CPU tests run the staged path end to end.
// zero.shard_group_size: hybrid sharding (on CUDA through NCCL only: ncclCommSplit); an InputError
// where it does not divide the ranks or meets what cannot split (comm.backend = "mpi" on CUDA, the
// staged test hook).
StoreCommChoice store_comm_choice(const RunConfig& config, int world_size);

}  // namespace zt
