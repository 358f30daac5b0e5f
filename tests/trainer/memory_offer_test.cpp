// What the start-of-run memory check offers a rank: the host's available memory (capped by the
// cgroup's headroom) over the node's ranks, and on CUDA with comm.backend = "mpi" a GPU's free
// memory over the ranks that take it round robin. memory_offered itself reads /proc/meminfo, the
// cgroup and the launcher's environment, which ZT_TEST_AVAILABLE_BYTES replaces in the end-to-end
// tests, so its arithmetic is tested here apart from what it reads.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "engine/app/trainer/memory_check.h"

namespace zt {
namespace {

constexpr std::int64_t kGiB = std::int64_t{1} << 30;
constexpr std::int64_t kUnknown = -1;

TEST(HostMemoryOffer, TheNodesRanksShareTheAvailableMemory) {
  const MemoryOffer alone = host_memory_offer(12 * kGiB, kUnknown, 1);
  EXPECT_EQ(alone.bytes, 12 * kGiB);
  EXPECT_EQ(alone.what.find("each of"), std::string::npos) << alone.what;

  const MemoryOffer shared = host_memory_offer(12 * kGiB, kUnknown, 3);
  EXPECT_EQ(shared.bytes, 4 * kGiB);
  EXPECT_NE(shared.what.find("to each of this node's 3 ranks"), std::string::npos) << shared.what;
  EXPECT_EQ(host_memory_offer(10, kUnknown, 4).bytes, 2);  // rounded down: no rank is promised more
}

TEST(HostMemoryOffer, TheCgroupsHeadroomCapsTheOfferWhereItIsSmaller) {
  EXPECT_EQ(host_memory_offer(12 * kGiB, 4 * kGiB, 2).bytes, 2 * kGiB);
  EXPECT_EQ(host_memory_offer(4 * kGiB, 12 * kGiB, 2).bytes, 2 * kGiB);
  EXPECT_EQ(host_memory_offer(kUnknown, 6 * kGiB, 2).bytes, 3 * kGiB);  // no MemAvailable: the cgroup's
  const MemoryOffer capped = host_memory_offer(12 * kGiB, 4 * kGiB, 1);
  EXPECT_NE(capped.what.find("cgroup headroom"), std::string::npos) << capped.what;
  EXPECT_EQ(host_memory_offer(12 * kGiB, kUnknown, 1).what.find("cgroup"), std::string::npos);
}

TEST(HostMemoryOffer, NothingKnownOffersUnknownAtAnyRankCount) {
  for (const int ranks : {1, 2, 8}) {
    const MemoryOffer offer = host_memory_offer(kUnknown, kUnknown, ranks);
    EXPECT_EQ(offer.bytes, kUnknown) << ranks;
    EXPECT_NE(offer.what.find("MemAvailable unknown"), std::string::npos) << offer.what;
  }
}

TEST(RanksSharingGpu, RanksTakeTheGpusRoundRobin) {
  // 3 ranks on 2 GPUs: local ranks 0 and 2 take cuda:0, rank 1 cuda:1.
  EXPECT_EQ(ranks_sharing_gpu(3, 2, 0), 2);
  EXPECT_EQ(ranks_sharing_gpu(3, 2, 1), 1);
  EXPECT_EQ(ranks_sharing_gpu(4, 2, 1), 2);
  EXPECT_EQ(ranks_sharing_gpu(4, 1, 0), 4);
  EXPECT_EQ(ranks_sharing_gpu(1, 4, 0), 1);
  EXPECT_EQ(ranks_sharing_gpu(1, 4, 3), 1);  // a GPU no rank takes: the rank asking is the one
  EXPECT_EQ(ranks_sharing_gpu(2, 0, 0), 2);  // no GPU counted: as if one
}

}  // namespace
}  // namespace zt
