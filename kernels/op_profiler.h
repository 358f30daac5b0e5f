// Where a training step's time goes, per op: while a profiled step is open, kernels/ops.cpp times
// every op call of a context that carries an OpProfiler (ExecContext::profiler), with the host
// clock on the CPU and with a pair of pooled CUDA events on the context's stream on the GPU
// (resolved at the end of the step, so no op waits for the device). One per compute context; ops
// are timed from the thread that owns the context.
//
// [Note: exposed communication]
// The parameter store's collectives are timed beside the ops, as spans on the communication stream
// (NCCL: a pair of events on its stream around each collective) or on the host (MPI: from the
// progress thread's post to its completion; add_comm_span may be called from that thread). At the
// end of a step the union of the spans (the time some collective was in flight) is set against the
// union of the step's op intervals: the part during which some op ran is communication the
// computation hid (overlapped); the rest is exposed, what a step pays for communicating. Staged collectives
// (comm.backend = "mpi" on a GPU) are not timed.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kernels/exec_context.h"

namespace zt {

class OpProfiler {
 public:
  struct OpTotal {
    std::string op;
    std::int64_t calls = 0;
    double total_ms = 0.0;
  };
  // One call being timed, from start() to stop(): the host clock's start, or the index of its
  // start event in the pool (its stop event is the next one).
  struct Call {
    std::size_t op = 0;
    std::chrono::steady_clock::time_point host_start;
    std::size_t event = 0;
  };
  // A span of time in ms from the step's start.
  struct Interval {
    double begin = 0.0, end = 0.0;
  };
  // Communication spans against op intervals ([Note: exposed communication]).
  // Spans may overlap each other (MPI's collectives in flight together): busy is the time at least
  // one was in flight, overlapped the part of that during which some op ran, exposed the rest.
  struct CommTotals {
    std::int64_t calls = 0;
    double total_ms = 0.0;  // the spans' lengths, summed
    double busy_ms = 0.0, overlapped_ms = 0.0;
  };
  static CommTotals overlap(std::vector<Interval> ops, const std::vector<Interval>& comm);

  OpProfiler();
  ~OpProfiler();
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  // ---- steps: ops are timed only between begin_step and end_step ----
  // Both wait for the work queued on ctx (a no-op on the CPU), so a step's wall time covers its
  // device work and none of the steps around it; end_step also resolves the step's CUDA events.
  void begin_step(const ExecContext& ctx);
  void end_step(const ExecContext& ctx);
  bool in_step() const { return in_step_.load(std::memory_order_relaxed); }
  // Forgets every total and step (what a warm-up step measured); keeps the CUDA event pool.
  void clear();

  // ---- one op call (kernels/ops.cpp, through timed_op) ----
  Call start(const ExecContext& ctx, const char* op);
  void stop(const ExecContext& ctx, const Call& call);

  // ---- one collective (the communicators, while a step is open) ----
  // CUDA: a timing event recorded on `stream` (the communication stream) now; comm_stop records its
  // partner. The caller's thread must be the one timing the ops.
  std::size_t comm_start(void* cuda_stream);
  void comm_stop(std::size_t start_event, void* cuda_stream);
  // The host clock's span of a collective (MPI's progress thread); ignored outside a step.
  void add_comm_span(std::chrono::steady_clock::time_point begin, std::chrono::steady_clock::time_point end);
  const CommTotals& comm_totals() const { return comm_; }

  // ---- totals ----
  // Adds `calls` calls of `op` taking `ms` in all (how every timed call lands; tests feed it directly).
  void add(std::string_view op, std::int64_t calls, double ms);
  void add_step(double ms);
  int steps() const { return steps_; }
  double step_ms_total() const { return step_ms_total_; }
  // Every op seen, most time first (ties by name, so the order is reproducible).
  std::vector<OpTotal> by_time() const;
  // {profiled_steps, step_ms_total, step_ms_per_step, ops_ms_total, ops_ms_per_step, ops_share,
  //  outside_ops_ms_total, outside_ops_ms_per_step, outside_ops_share,
  //  ops: [{op, calls, calls_per_step, total_ms, ms_per_step, share}]} with shares of the step time,
  //  and, when collectives were timed, communication: {calls_per_step, kernel_ms_per_step (the
  //  spans summed), busy_ms_per_step (their union), overlapped_ms_per_step, exposed_ms_per_step
  //  (busy = overlapped + exposed), exposed_share, ...}.
  // "Outside the ops" is step time not inside any timed call: communication waits, data loading,
  // allocation and other host work.
  nlohmann::json to_json() const;
  // One line per op (sorted as by_time), then the outside-the-ops line; for the run's output.
  std::string format_table() const;

 private:
  std::size_t index_of(std::string_view op);

  struct CudaEvents;  // the event pool and this step's unresolved calls (op_profiler.cpp)
  std::unique_ptr<CudaEvents> cuda_;
  std::vector<OpTotal> totals_;
  std::map<std::string, std::size_t, std::less<>> index_;  // op name -> position in totals_
  std::atomic<bool> in_step_{false};
  std::chrono::steady_clock::time_point step_start_;
  std::vector<Interval> step_ops_;   // this step's op intervals (host clock)
  std::mutex comm_mutex_;            // guards step_comm_ (the progress thread adds to it)
  std::vector<Interval> step_comm_;  // this step's collectives (host clock)
  CommTotals comm_;
  int steps_ = 0;
  double step_ms_total_ = 0.0;
};

// f() as one timed call of `op` when ctx carries a profiler inside a step; otherwise just f()
// (the whole cost of profiling being off is this null check). A call that throws is not counted.
template <class F>
std::invoke_result_t<F&> timed_op(const ExecContext& ctx, const char* op, F&& f) {
  OpProfiler* profiler = ctx.profiler;
  if (profiler == nullptr || !profiler->in_step()) return f();
  const OpProfiler::Call call = profiler->start(ctx, op);
  if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
    f();
    profiler->stop(ctx, call);
  } else {
    auto result = f();
    profiler->stop(ctx, call);
    return result;
  }
}

}  // namespace zt
