// The planner's step-time estimate: compute from a measured per-op profile (log.profile_ops's
// op_profile.json, with the config of the run that measured it), scaled op by op to another
// model, micro-batch, activation checkpointing and head chunks; communication from an alpha-beta
// model of the links (latency per ring hop, bandwidth) over the bytes and collectives the
// schedule replay predicts per step. A coarse model, stated here and in docs/memory.md: ops grow
// with the work their class does (the linear layers' FLOPs as the model's family counts them,
// attention's, the vocabulary's, the MLP activation's over its width, the other elementwise work,
// the optimizer's shard), so a profile of one family ranks another's choices; recomputed forward ops cost what they
// cost in the forward; with overlap_comm a step is the gathers an acquire waits for at once (stage 3
// without prefetch) plus the longer of compute and the rest of communication, else their sum.
#pragma once

#include <map>
#include <string>

#include "engine/app/config/run_config.h"

namespace zt::plan {

// A measured per-op profile and the shape it was measured at.
struct OpProfile {
  std::string source, device;
  // The machine a profile file says it was recorded on ("machine": the repository's reference
  // profiles name the CPU and its sgemm rate); "" for a run directory's, the user's own.
  std::string machine;
  ModelConfig model;        // the profiled model's dimensions
  std::int64_t tokens = 0;  // per micro-batch: micro_batch x seq_len
  int seq_len = 0;
  int micro_batches = 1;                      // per step
  int optimizer_ranks = 1;                    // the ranks its optimizer state was split over (1 at stage 0 or one rank)
  int threads = 0;                            // a CPU profile's threads ("cpu (2 threads)"); 0 on a device
  std::map<std::string, double> ms_per_step;  // op -> ms per optimizer step
};

// Reads a profile: a run directory (its op_profile.json and config.json), or a file holding
// {"config": ..., "op_profile": ...} (docs/results/cpu_op_profile.json). InputError naming the path.
OpProfile load_op_profile(const std::string& path);

// The links: seconds per ring hop and bytes per second, inside a group and across groups; and,
// for CPU ranks, the machine they share: a rank computes on min(train.num_threads, cores per node
// / ranks per node) threads, against the profile's threads (perfect scaling assumed).
struct Links {
  double latency_s = 5e-6, bytes_per_s = 10e9;
  double across_latency_s = 5e-6, across_bytes_per_s = 10e9;
  double cores_per_node = 0;  // 0: the CPU compute is not rescaled
  int ranks_per_node = 1;
};

struct StepTime {
  double compute_s = 0, comm_s = 0, step_s = 0;
};

// The estimate for `config` (resolved for `world_size` ranks) on one rank.
StepTime estimate_step_time(const OpProfile& profile, const RunConfig& config, int world_size, const Links& links);

}  // namespace zt::plan
