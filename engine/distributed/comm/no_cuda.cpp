// The CUDA factories of engine/distributed/comm in a build without the CUDA backend (compiled instead of
// nccl_bootstrap.cpp and cuda_staging_device.cpp): each refuses with what to do instead, so
// communicator.cpp chooses backends without #ifdefs.
#include "engine/distributed/comm/nccl_communicator.h"
#include "engine/distributed/comm/staging_device.h"

#include "engine/base/core/check.h"

namespace zt {

std::unique_ptr<Communicator> make_nccl_communicator(Communicator&, MemoryTracker&, const ExecContext&) {
  throw_runtime_error("a device communicator was asked for in a build without CUDA");
}

std::unique_ptr<Communicator> make_launched_nccl_communicator(MemoryTracker&, const CommOptions&,
                                                              const LaunchInfo& launch) {
  throw_input_error(
      "launched as rank {} of {} ({}) without MPI: such ranks talk through NCCL, and this build has "
      "no CUDA backend (use mpirun for CPU ranks; for one process in a multi-task allocation, ZT_RANK=0 "
      "ZT_WORLD_SIZE=1 or srun -n 1)",
      launch.rank, launch.world_size, launch.source);
}

std::unique_ptr<StagingDevice> make_cuda_staging_device(const ExecContext&) {
  throw_runtime_error("a CUDA staging device was asked for in a build without CUDA");
}

}  // namespace zt
