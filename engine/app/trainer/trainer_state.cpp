// Building a run's parts: the compute context (with the op profiler when asked for), the parameter
// store's communicator, data, model, store, optimizer, schedule and logs.
#include "engine/app/trainer/trainer_state.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "engine/app/trainer/run_identity.h"
#include "engine/app/trainer/store_comm.h"
#include "engine/base/core/check.h"
#include "engine/distributed/comm/hybrid_communicator.h"
#include "engine/distributed/launch/rendezvous.h"

namespace zt {

namespace {

ExecContext with_profiler(ExecContext ctx, OpProfiler* profiler) {
  ctx.profiler = profiler;
  return ctx;
}

std::unique_ptr<Communicator> make_store_communicator(const RunConfig& config, Communicator& comm,
                                                      MemoryTracker& tracker, const ExecContext& ctx) {
  // The memory prediction asks the same choice (engine/app/trainer/store_comm.h).
  const StoreCommChoice choice = store_comm_choice(config, comm.world_size());
  check_trainable(config);
  if (choice.hybrid && choice.device_comm) {  // CUDA: NCCL over the world, split (never run: needs 2+ GPUs)
    return std::make_unique<HybridCommunicator>(make_device_communicator(comm, tracker, ctx, choice.backend),
                                                choice.group_size, config.zero.cross_group_grad_wire, &tracker, ctx);
  }
  if (choice.hybrid) {
    return std::make_unique<HybridCommunicator>(comm, choice.group_size, config.zero.cross_group_grad_wire, &tracker,
                                                ctx);
  }
  if (!choice.device_comm) return nullptr;  // the store uses the host communicator
  return make_device_communicator(comm, tracker, ctx, choice.backend);
}

// checkpoint.async: the files are the world's, or under hybrid sharding group 0's (a checkpoint of
// g ranks, as its synchronous saves write); a rank that writes none stages nothing.
std::unique_ptr<ckpt::AsyncCheckpointer> make_async_saves(const RunConfig& c, Communicator& world,
                                                          Communicator* store_comm, const ExecContext& ctx,
                                                          const ParamTable& table) {
  if (!c.checkpoint.async) return nullptr;
  auto* hybrid = dynamic_cast<HybridCommunicator*>(store_comm);
  Communicator* writers = hybrid == nullptr ? &world : hybrid->group_index() == 0 ? &hybrid->group() : nullptr;
  const std::int64_t bytes =
      writers != nullptr ? ckpt::rank_file_bytes(table, writers->world_size(), writers->rank()) : 0;
  return std::make_unique<ckpt::AsyncCheckpointer>(world, writers, ctx, bytes);
}

std::pair<int, int> nonfinite_steps_to_inject() {
  const char* inject = std::getenv("ZT_TEST_NONFINITE_AT_STEP");
  if (inject == nullptr) return {0, 0};
  const int first = std::atoi(inject);
  const char* dash = std::strchr(inject, '-');
  return {first, dash != nullptr ? std::atoi(dash + 1) : first};
}

}  // namespace

int rank_device_index(const RunConfig& c) {
  return c.device == Device::kCUDA ? cuda_device_for_local_rank(detect_launch().local_rank) : 0;
}

TrainerState::TrainerState(const RunConfig& c, std::string dir, Communicator& communicator, MemoryTracker& memory,
                           const nlohmann::json* known_data_identity)
    : config(c),
      run_dir(std::move(dir)),
      data_files(known_data_identity != nullptr ? *known_data_identity : data_identity(c)),
      comm(communicator),
      root(communicator.rank() == 0),
      tracker(memory),
      backend(c.device, c.train.num_threads, memory, rank_device_index(c), c.kernel_choices()),
      profiler(c.log.profile_ops ? std::make_unique<OpProfiler>() : nullptr),
      ctx(with_profiler(backend.context(), profiler.get())),
      // Without the profiler: NCCL's staging ops run on its own stream and are part of
      // communication, which the profile counts outside the ops.
      device_comm(make_store_communicator(c, communicator, memory, backend.context())),
      data(c, communicator),
      model(make_model(c.model_spec(), c.model_build(), tracker, ctx)),
      store(model->table(), c.param_dtype, c.zero, device_comm ? *device_comm : comm, tracker, ctx),
      optimizer(store, c.optim.adamw, tracker, ctx),
      async_saves(make_async_saves(c, communicator, device_comm.get(), backend.context(), store.table())),
      schedule(c.optim.adamw.lr, c.optim.min_lr, c.optim.warmup_steps, c.optim.decay_steps,
               LrSchedule::parse_decay(c.optim.decay), c.optim.cooldown_fraction),
      metrics(root ? std::make_unique<MetricsLog>(run_dir + "/metrics.jsonl") : nullptr),
      progress(root ? c.log.progress : "quiet", c.log.every_steps),
      inputs(static_cast<std::size_t>(c.train.micro_batch) * c.train.seq_len),
      targets(inputs.size()),
      inject_nonfinite_steps(nonfinite_steps_to_inject()) {
  // The files the data source opened are the ones the checkpoints will name (agreed: one rank may
  // see a file change another did not).
  on_every_rank(comm, [&] { check_data_unchanged(c, data_files); });
  // The store's collectives timed beside the ops ([Note: exposed communication]). Last: a
  // constructor that throws runs no destructor to take it back from the caller's communicator.
  if (profiler) store_comm().set_profiler(profiler.get());
}

// The store's communicator may be the caller's, which outlives the profiler.
TrainerState::~TrainerState() {
  if (profiler) store_comm().set_profiler(nullptr);
}

std::string TrainerState::lock_lost_to() const {
  for (const ckpt::FolderLock* lock : locks) {
    if (const std::string taker = lock->lost_now(); !taker.empty()) {
      return fmt::format("the lock {} now belongs to {}, which took it over while this run was stopped or hung",
                         lock->path(), taker);
    }
    if (lock->kind() == ckpt::LockedFolder::kRunDirectory && lock->moved_seen()) {
      return fmt::format(
          "the run directory {} was moved or removed while this run wrote into it (its metrics.jsonl "
          "went with it; a moved one resumes with --run-dir at its new place)",
          lock->folder());
    }
  }
  return "";
}

}  // namespace zt
