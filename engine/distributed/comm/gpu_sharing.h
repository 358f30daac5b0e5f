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

}  // namespace zt
