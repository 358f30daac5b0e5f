// Ranks that would share one GPU through NCCL (see the header).
#include "engine/distributed/comm/gpu_sharing.h"

#include <fmt/format.h>

#include <cstddef>

namespace zt {

namespace {

constexpr char kSeparator = '\n';  // in no boot id, bus id or host name

struct Parts {
  std::string device;  // machine and bus id: what two ranks share when they share a GPU
  std::string bus, host;
};

Parts parts_of(const std::string& key) {
  const std::size_t first = key.find(kSeparator);
  const std::size_t second = first == std::string::npos ? std::string::npos : key.find(kSeparator, first + 1);
  if (second == std::string::npos) return {key, key, ""};
  return {key.substr(0, second), key.substr(first + 1, second - first - 1), key.substr(second + 1)};
}

}  // namespace

std::string gpu_key(const std::string& machine, const std::string& pci_bus_id, const std::string& host) {
  return machine + kSeparator + pci_bus_id + kSeparator + host;
}

std::string ranks_sharing_a_gpu(const std::vector<std::string>& gpu_keys) {
  for (std::size_t first = 0; first < gpu_keys.size(); ++first) {
    const Parts gpu = parts_of(gpu_keys[first]);
    std::vector<std::size_t> sharing{first};
    for (std::size_t other = first + 1; other < gpu_keys.size(); ++other) {
      if (parts_of(gpu_keys[other]).device == gpu.device) sharing.push_back(other);
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
        ranks, gpu.bus, gpu.host.empty() ? "(unnamed)" : gpu.host);
  }
  return "";
}

}  // namespace zt
