// The store's communicator choice (see the header).
#include "engine/app/trainer/store_comm.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/base/core/check.h"

namespace zt {

namespace {

bool staged_collectives_test_hook() {
  const char* hook = std::getenv("ZT_TEST_STAGED_COLLECTIVES");
  return hook != nullptr && *hook != '\0' && std::strcmp(hook, "0") != 0;
}

}  // namespace

StoreCommChoice store_comm_choice(const RunConfig& config, int world_size) {
  // A world of one on the solo path calls no collective at any stage but stage 0's all-reduce of
  // one rank, which the host communicator answers without touching the data.
  const bool collectives = world_size > 1 || !config.zero.solo_path;
  StoreCommChoice choice;
  choice.group_size = world_size;
  const int g = config.zero.shard_group_size;
  const bool hybrid = config.zero.hybrid(world_size);
  if (config.zero.cross_group_grad_wire != WireDType::kExact && !hybrid) {
    // Two groups of two ranks at least: on fewer than 4 ranks no shard_group_size makes them.
    throw_input_error(
        "config error in {}: zero.cross_group_grad_dtype = \"{}\" quantizes hybrid sharding's reduction across "
        "groups: it needs zero.shard_group_size below the {} rank(s){}",
        config.sources_of({"zero.cross_group_grad_dtype", "zero.shard_group_size"}),
        wire_dtype_name(config.zero.cross_group_grad_wire), world_size,
        world_size < 4 ? " and two groups of 2 ranks or more (4 ranks or more); set it to fp32 here" : "");
  }
  if (hybrid) {
    if (g < 2 || world_size % g != 0) {
      std::vector<std::string> sizes;  // those that would do here, the whole world's included
      for (int d = 2; d <= world_size; ++d) {
        if (world_size % d == 0) sizes.push_back(std::to_string(d));
      }
      throw_input_error(
          "config error in {}: zero.shard_group_size = {} must divide the {} rank(s) and be at least 2 (here {}; 0: "
          "the whole world)",
          config.sources_of({"zero.shard_group_size"}), g, world_size,
          sizes.empty() ? std::string("none: one rank has no groups") : fmt::format("{}", fmt::join(sizes, ", ")));
    }
    const bool cuda = config.device == Device::kCUDA;
    const char* unsupported = cuda && config.comm_backend == CommBackend::kMpi ? "comm.backend = \"mpi\" on CUDA"
                              : staged_collectives_test_hook()                 ? "ZT_TEST_STAGED_COLLECTIVES"
                                                                               : nullptr;
    if (unsupported != nullptr) {
      throw_input_error(
          "config error in {}: zero.shard_group_size (hybrid sharding) does not work with {} (its staged "
          "communicator cannot be split into groups)",
          config.sources_of({"zero.shard_group_size", "comm.backend", "device"}), unsupported);
    }
    choice.hybrid = true;
    choice.group_size = g;
    if (cuda) {  // NCCL over the world, split into the groups and across them
      choice.device_comm = true;
      choice.staging = CollectiveBackend::kNccl;
    }
    return choice;
  }
  if (!collectives) return choice;
  if (config.device == Device::kCUDA) {
    choice.device_comm = true;
    const bool staged = config.comm_backend == CommBackend::kMpi;
    choice.backend = staged ? DeviceCommBackend::kMpiStaged : DeviceCommBackend::kNccl;
    choice.staging = staged ? CollectiveBackend::kHostStaged : CollectiveBackend::kNccl;
  } else if (staged_collectives_test_hook()) {
    choice.device_comm = true;
    choice.backend = DeviceCommBackend::kHostStagedForTests;
    choice.staging = CollectiveBackend::kHostStaged;
  }
  return choice;
}

}  // namespace zt
