// Ranks that would share one GPU through NCCL (see the header).
#include "engine/distributed/comm/gpu_sharing.h"

#include <fmt/format.h>

#include <cstddef>

namespace zt {

std::string ranks_sharing_a_gpu(const std::vector<GpuIdentity>& gpus) {
  for (std::size_t first = 0; first < gpus.size(); ++first) {
    const GpuIdentity& gpu = gpus[first];
    std::vector<std::size_t> sharing{first};
    for (std::size_t other = first + 1; other < gpus.size(); ++other) {
      if (gpus[other].machine == gpu.machine && gpus[other].pci_bus_id == gpu.pci_bus_id) sharing.push_back(other);
    }
    if (sharing.size() == 1) continue;
    std::string ranks;
    for (std::size_t i = 0; i < sharing.size(); ++i) {
      ranks += (i == 0 ? "" : i + 1 == sharing.size() ? " and " : ", ") + std::to_string(sharing[i]);
    }
    return fmt::format(
        "ranks {} all run on the GPU at PCI bus id {} on host {}, and NCCL runs one rank a GPU: launch no more "
        "ranks on a node than it has GPUs (or give each rank its own with CUDA_VISIBLE_DEVICES), or set "
        "comm.backend = \"mpi\" for ranks that share a GPU",
        ranks, gpu.pci_bus_id, gpu.host.empty() ? "(unnamed)" : gpu.host);
  }
  return "";
}

std::string local_ranks_exceed_gpus(const std::string& launcher, int local_ranks, int visible_gpus,
                                    bool devices_variable_set) {
  if (devices_variable_set || visible_gpus < 1 || local_ranks <= visible_gpus) return "";
  const std::string fewer = launcher == "torchrun" ? fmt::format(" (torchrun --nproc-per-node {})", visible_gpus) : "";
  return fmt::format(
      "{} started {} ranks on this node, which has {} GPU{}, so ranks would share a GPU, and NCCL runs one rank a "
      "GPU: launch at most {} rank{} a node{}, or give each rank its own GPU with CUDA_VISIBLE_DEVICES (ranks that "
      "share a GPU need mpirun and comm.backend = \"mpi\")",
      launcher, local_ranks, visible_gpus, visible_gpus == 1 ? "" : "s", visible_gpus, visible_gpus == 1 ? "" : "s",
      fewer);
}

}  // namespace zt
