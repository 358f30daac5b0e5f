// How a process gets its NCCL communicator: rank 0 makes the unique id, and the other ranks
// receive it through the host communicator (a run under mpirun: make_nccl_communicator) or, for
// ranks launched without MPI, through the rendezvous the environment names; such a rank's
// communicator also owns the device context it stages through (make_launched_nccl_communicator).
#include "engine/distributed/comm/nccl_communicator.h"

#include <nccl.h>

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "engine/base/core/check.h"
#include "engine/base/device/cuda_check.h"
#include "engine/distributed/comm/gpu_sharing.h"
#include "engine/distributed/comm/nccl_check.h"
#include "kernels/compute_backend.h"

namespace zt {

std::vector<std::uint8_t> make_nccl_unique_id() {
  ncclUniqueId id;
  ZT_NCCL_CHECK(ncclGetUniqueId(&id), nullptr);
  std::vector<std::uint8_t> bytes(sizeof(id));
  std::memcpy(bytes.data(), &id, sizeof(id));
  return bytes;
}

namespace {

// This rank's GpuIdentity in fixed-size fields for a gather: its machine (the kernel's boot id,
// else the host's name), its device's PCI bus id and its host's name.
struct GpuIdentityRecord {
  std::array<char, 256> machine{}, pci_bus_id{}, host{};  // host: more than HOST_NAME_MAX + 1

  static GpuIdentityRecord own() {
    GpuIdentityRecord r;
    int device = 0;
    ZT_CUDA_CHECK(cudaGetDevice(&device));  // the compute backend selected it
    ZT_CUDA_CHECK(cudaDeviceGetPCIBusId(r.pci_bus_id.data(), static_cast<int>(r.pci_bus_id.size()), device));
    if (gethostname(r.host.data(), r.host.size() - 1) != 0) r.host[0] = '\0';  // a cut name fails it
    std::ifstream("/proc/sys/kernel/random/boot_id").getline(r.machine.data(), r.machine.size());
    if (r.machine[0] == '\0') r.machine = r.host;
    return r;
  }
  GpuIdentity identity() const { return {machine.data(), pci_bus_id.data(), host.data()}; }
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& control, MemoryTracker& tracker,
                                                     const ExecContext& ctx) {
  // Before ncclCommInitRank, which fails on some ranks only where ranks share a GPU: the refusal on
  // every rank alike, rank 0 printing it once (gpu_sharing.h).
  if (control.world_size() > 1) {
    GpuIdentityRecord mine;
    on_every_rank(control, [&] { mine = GpuIdentityRecord::own(); });  // one rank's failed query ends every rank
    std::vector<GpuIdentity> gpus;
    for (const GpuIdentityRecord& r : all_gather_values<GpuIdentityRecord>(control, {&mine, 1})) {
      gpus.push_back(r.identity());
    }
    const std::string shared = ranks_sharing_a_gpu(gpus);
    if (!shared.empty()) fail_on_every_rank(control, shared, /*input_error=*/true);
  }
  std::vector<std::uint8_t> id = control.rank() == 0 ? make_nccl_unique_id() : std::vector<std::uint8_t>(128);
  ZT_CHECK(id.size() % 4 == 0);
  // The host communicator moves bytes; I32 is only the view's element type.
  const TensorView id_words{id.data(), DType::kI32, Device::kCPU, Shape{static_cast<std::int64_t>(id.size() / 4)}};
  control.broadcast(id_words, 0).wait();
  return std::make_unique<NcclCommunicator>(tracker, control.options(), ctx, control.rank(), control.world_size(), id);
}

std::unique_ptr<Communicator> make_launched_nccl_communicator(MemoryTracker& tracker, const CommOptions& options,
                                                              const LaunchInfo& launch) {
  const int gpus = cuda_device_count();
  if (gpus == 0) {
    throw_input_error(
        "launched as rank {} of {} ({}) without MPI: such ranks talk through NCCL, and this machine has "
        "no CUDA device (use mpirun for CPU ranks; for one process in a multi-task allocation, ZT_RANK=0 "
        "ZT_WORLD_SIZE=1 or srun -n 1)",
        launch.rank, launch.world_size, launch.source);
  }
  // Before ncclCommInitRank, which would fail on some ranks only and leave the others waiting for
  // the collective timeout (gpu_sharing.h).
  const std::string shared = local_ranks_exceed_gpus(launch.source, launcher_ranks_on_this_node(launch.source), gpus,
                                                     std::getenv("CUDA_VISIBLE_DEVICES") != nullptr);
  if (!shared.empty()) {
    throw_input_error("rank {} of {} ({}): {}", launch.rank, launch.world_size, launch.source, shared);
  }
  // The device context this host-side communicator stages through, on a tracker of its own: its
  // cuBLASLt workspace is not the run's (the run's memory, measured and predicted, leaves it out);
  // the collectives' staging is charged to the run's tracker as on any communicator.
  struct PrivateBackend {
    MemoryTracker tracker;
    std::unique_ptr<ComputeBackend> backend;
  };
  auto backend = std::make_shared<PrivateBackend>();
  backend->backend = std::make_unique<ComputeBackend>(Device::kCUDA, 1, backend->tracker,
                                                      cuda_device_for_local_rank(launch.local_rank));
  const RendezvousOptions rendezvous = rendezvous_from_env(launch);
  std::vector<std::uint8_t> id = share_from_rank0(
      launch, rendezvous, launch.rank == 0 ? make_nccl_unique_id() : std::vector<std::uint8_t>{}, sizeof(ncclUniqueId));
  auto comm = std::make_unique<NcclCommunicator>(tracker, options, backend->backend->context(), launch.rank,
                                                 launch.world_size, id);
  comm->own_backend(std::move(backend));
  return comm;
}

}  // namespace zt
