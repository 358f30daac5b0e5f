// Ranks that would share one GPU through NCCL. NCCL runs one rank a GPU: ranks that land on the same
// one (a node launched with more ranks than it has GPUs, without CUDA_VISIBLE_DEVICES per rank) fail
// in ncclCommInitRank ("duplicate GPU"), on some ranks only, while the others wait in it. The NCCL
// bootstrap of an mpirun launch gathers every rank's GpuIdentity and refuses such a launch on every
// rank alike, first.
#pragma once

#include <string>
#include <vector>

namespace zt {

// A GPU's identity across a job: the machine it is in and its PCI bus id (two machines may show the
// same bus ids), with the host's name to show. `machine` is the kernel's boot id where it can be
// read (containers on one machine share it, two machines never do; host names may repeat across
// containers, or be cut), else the host's name.
struct GpuIdentity {
  std::string machine, pci_bus_id, host;
};

// From every rank's GpuIdentity, in rank order: "" when each rank has a GPU of its own, else the
// refusal naming the first GPU that several ranks share and those ranks.
std::string ranks_sharing_a_gpu(const std::vector<GpuIdentity>& gpus);

// Ranks launched without MPI have no host collective to gather identities before NCCL, but one
// case needs none: a launcher (`launcher`, LaunchInfo's source) that says how many of its ranks
// are on this node (`local_ranks`, 0 where it does not: torchrun does, ZT_RANK and Slurm do not),
// more of them than the `visible_gpus` every rank sees alike because none was given its own
// CUDA_VISIBLE_DEVICES (`devices_variable_set` false), so local ranks wrap around the GPUs. Every
// rank of the node reaches the same verdict: "" or the refusal (another node's ranks, which may
// pass, then wait for these at NCCL's set-up until its timeout). Where the variable is set (per
// rank, perhaps) the count proves nothing, and nothing is refused.
std::string local_ranks_exceed_gpus(const std::string& launcher, int local_ranks, int visible_gpus,
                                    bool devices_variable_set);

}  // namespace zt
