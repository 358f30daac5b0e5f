// ranks_sharing_a_gpu: the refusal the NCCL bootstrap gives, on every rank, before ncclCommInitRank,
// when ranks land on one GPU (engine/distributed/comm/gpu_sharing.h). Device keys are made up here:
// the bootstrap's own gathering needs GPUs and has not run.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/distributed/comm/gpu_sharing.h"

namespace zt {
namespace {

TEST(GpuSharing, EachRankOnItsOwnGpuIsFine) {
  EXPECT_EQ(ranks_sharing_a_gpu({}), "");
  EXPECT_EQ(ranks_sharing_a_gpu({GpuIdentity{"boot-1", "00000000:1A:00.0", "node1"}}), "");
  EXPECT_EQ(ranks_sharing_a_gpu({GpuIdentity{"boot-1", "00000000:1A:00.0", "node1"},
                                 GpuIdentity{"boot-1", "00000000:2B:00.0", "node1"}}),
            "");
}

TEST(GpuSharing, TheSameBusIdOnTwoHostsIsTwoGpus) {
  EXPECT_EQ(ranks_sharing_a_gpu({GpuIdentity{"boot-1", "00000000:1A:00.0", "node1"},
                                 GpuIdentity{"boot-2", "00000000:1A:00.0", "node2"}}),
            "");
}

TEST(GpuSharing, HostNamesDoNotTellMachinesApart) {
  // Containers started with one --hostname on two machines: their boot ids differ.
  EXPECT_EQ(ranks_sharing_a_gpu({GpuIdentity{"boot-1", "00000000:1A:00.0", "worker"},
                                 GpuIdentity{"boot-2", "00000000:1A:00.0", "worker"}}),
            "");
  // Two containers on one machine, named apart, given the same GPU: one boot id.
  EXPECT_NE(ranks_sharing_a_gpu(
                {GpuIdentity{"boot-1", "00000000:1A:00.0", "a"}, GpuIdentity{"boot-1", "00000000:1A:00.0", "b"}}),
            "");
}

TEST(GpuSharing, RanksOnOneGpuAreNamedWithTheGpuAndTheWayOut) {
  // Eight ranks on a node of four GPUs without CUDA_VISIBLE_DEVICES: local ranks 0 and 4 wrap onto GPU 0.
  std::vector<GpuIdentity> keys;
  for (int r = 0; r < 8; ++r)
    keys.push_back(GpuIdentity{"boot-1", "00000000:0" + std::to_string(r % 4) + ":00.0", "node1"});
  const std::string why = ranks_sharing_a_gpu(keys);
  EXPECT_NE(why.find("ranks 0 and 4 all run on the GPU at PCI bus id 00000000:00:00.0 on host node1"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("CUDA_VISIBLE_DEVICES"), std::string::npos) << why;
  EXPECT_NE(why.find("comm.backend = \"mpi\""), std::string::npos) << why;
}

TEST(GpuSharing, EveryRankOnTheSharedGpuIsNamed) {
  const GpuIdentity gpu = GpuIdentity{"boot-2", "00000000:3C:00.0", "node2"};
  const std::string why = ranks_sharing_a_gpu({GpuIdentity{"boot-1", "00000000:3C:00.0", "node1"}, gpu, gpu, gpu});
  EXPECT_NE(why.find("ranks 1, 2 and 3 all run on the GPU at PCI bus id 00000000:3C:00.0 on host node2"),
            std::string::npos)
      << why;
}

// Ranks launched without MPI: refused only where the launcher's count of ranks on the node passes
// the GPUs that every rank sees alike (no CUDA_VISIBLE_DEVICES).
TEST(GpuSharing, LocalRanksPastTheGpusWithoutVisibleDevicesAreRefused) {
  const std::string why = local_ranks_exceed_gpus("torchrun", 8, 4, false);  // --nproc-per-node 8 on 4 GPUs
  EXPECT_NE(why.find("torchrun started 8 ranks on this node, which has 4 GPUs"), std::string::npos) << why;
  EXPECT_NE(why.find("launch at most 4 ranks a node (torchrun --nproc-per-node 4)"), std::string::npos) << why;
  EXPECT_NE(why.find("CUDA_VISIBLE_DEVICES"), std::string::npos) << why;
  const std::string one = local_ranks_exceed_gpus("PMI", 2, 1, false);  // no torchrun advice for another launcher
  EXPECT_NE(one.find("PMI started 2 ranks on this node, which has 1 GPU, so"), std::string::npos) << one;
  EXPECT_EQ(one.find("torchrun"), std::string::npos) << one;
  EXPECT_EQ(local_ranks_exceed_gpus("torchrun", 4, 4, false), "");  // a GPU each
  EXPECT_EQ(local_ranks_exceed_gpus("torchrun", 2, 8, false), "");
  EXPECT_EQ(local_ranks_exceed_gpus("ZT_RANK", 0, 4, false), "");   // no count from the launcher: nothing proven
  EXPECT_EQ(local_ranks_exceed_gpus("torchrun", 8, 1, true), "");   // one GPU each by CUDA_VISIBLE_DEVICES, perhaps
  EXPECT_EQ(local_ranks_exceed_gpus("torchrun", 8, 0, false), "");  // no GPU: refused elsewhere, with its own line
}

}  // namespace
}  // namespace zt
