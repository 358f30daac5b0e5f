// Ranks that would share one GPU through NCCL (see the header).
#include "engine/distributed/comm/gpu_sharing.h"

#include <fmt/format.h>

#include <cstddef>

namespace zt {

namespace {

constexpr char kSeparator = '\n';  // in no host name and no bus id

}  // namespace

std::string gpu_key(const std::string& host, const std::string& pci_bus_id) { return host + kSeparator + pci_bus_id; }

std::string ranks_sharing_a_gpu(const std::vector<std::string>& gpu_keys) {
  for (std::size_t first = 0; first < gpu_keys.size(); ++first) {
    std::vector<std::size_t> sharing{first};
    for (std::size_t other = first + 1; other < gpu_keys.size(); ++other) {
      if (gpu_keys[other] == gpu_keys[first]) sharing.push_back(other);
    }
    if (sharing.size() == 1) continue;
    std::string ranks;
    for (std::size_t i = 0; i < sharing.size(); ++i) {
      ranks += (i == 0 ? "" : i + 1 == sharing.size() ? " and " : ", ") + std::to_string(sharing[i]);
    }
    const std::string& key = gpu_keys[first];
    const std::size_t cut = key.find(kSeparator);
    const std::string host = cut == std::string::npos ? "" : key.substr(0, cut);
    const std::string bus = cut == std::string::npos ? key : key.substr(cut + 1);
    return fmt::format(
        "ranks {} all run on the GPU at PCI bus id {} on host {}, and NCCL runs one rank a GPU: launch no more "
        "ranks on a node than it has GPUs (or give each rank its own with CUDA_VISIBLE_DEVICES), or set "
        "comm.backend = \"mpi\" for ranks that share a GPU",
        ranks, bus, host.empty() ? "(unnamed)" : host);
  }
  return "";
}

}  // namespace zt
