// Which GPU a rank takes and what memory it is offered, as the launcher's environment says (label
// gpu; needs a device, since both depend on how many CUDA shows): with comm.backend = "mpi" local
// ranks take the GPUs round robin and each rank sharing one is offered its share of the free
// memory; on NCCL each rank is offered all of its GPU; and the memory check leaves the rank's own
// GPU current (it used to switch back to device 0, making a context there).
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "engine/app/trainer/memory_check.h"
#include "engine/app/trainer/trainer_state.h"
#include "tests/gpu/gpu_test_util.h"

namespace zt::test {
namespace {

// OpenMPI's variables for (rank, world size, local rank, local size), unset again at the end.
class LauncherEnv {
 public:
  LauncherEnv(int rank, int world, int local_rank, int local_size) {
    set("OMPI_COMM_WORLD_RANK", rank);
    set("OMPI_COMM_WORLD_SIZE", world);
    set("OMPI_COMM_WORLD_LOCAL_RANK", local_rank);
    set("OMPI_COMM_WORLD_LOCAL_SIZE", local_size);
  }
  ~LauncherEnv() {
    for (const char* name : kNames) unsetenv(name);
  }

 private:
  static constexpr const char* kNames[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                                           "OMPI_COMM_WORLD_LOCAL_SIZE"};
  static void set(const char* name, int value) { setenv(name, std::to_string(value).c_str(), 1); }
};

RunConfig cuda_config(int world, CommBackend backend) {
  RunConfig c;
  c.device = Device::kCUDA;
  c.world_size = world;
  c.comm_backend = backend;
  return c;
}

TEST(RankDevice, MpiRanksShareTheGpusMemoryAndNcclRanksEachHaveTheirs) {
  ZT_SKIP_WITHOUT_GPU();
  unsetenv("ZT_TEST_AVAILABLE_BYTES");
  const int gpus = cuda::device_count();
  const int world = 2 * gpus;
  {
    const LauncherEnv env(world - 1, world, world - 1, world);  // one node, twice as many ranks as GPUs
    const RunConfig mpi = cuda_config(world, CommBackend::kMpi);
    EXPECT_EQ(rank_device_index(mpi), (world - 1) % gpus);
    const MemoryOffer shared = memory_offered(mpi, rank_device_index(mpi));
    EXPECT_NE(shared.what.find("each of the 2 ranks sharing cuda:"), std::string::npos) << shared.what;
    int current = -1;
    ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
    EXPECT_EQ(current, (world - 1) % gpus) << "the rank's GPU stays current after the memory check";
    // NCCL runs one rank a GPU (a rank may see only its own GPU): the whole of it is offered.
    const MemoryOffer whole = memory_offered(cuda_config(world, CommBackend::kAuto), 0);
    EXPECT_NE(whole.what.find("the free memory of cuda:0"), std::string::npos) << whole.what;
    EXPECT_GT(whole.bytes, 0);
  }
}

}  // namespace
}  // namespace zt::test
