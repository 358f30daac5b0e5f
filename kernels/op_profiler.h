// Where a training step's time goes, per op: while a profiled step is open, kernels/ops.cpp times
// every op call of a context that carries an OpProfiler (ExecContext::profiler), with the host
// clock on the CPU and with a pair of pooled CUDA events on the context's stream on the GPU
// (resolved at the end of the step, so no op waits for the device). One per compute context; not
// thread-safe (ops are called from the thread that owns the context).
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
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

  OpProfiler();
  ~OpProfiler();
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  // ---- steps: ops are timed only between begin_step and end_step ----
  // Both wait for the work queued on ctx (a no-op on the CPU), so a step's wall time covers its
  // device work and none of the steps around it; end_step also resolves the step's CUDA events.
  void begin_step(const ExecContext& ctx);
  void end_step(const ExecContext& ctx);
  bool in_step() const { return in_step_; }
  // Forgets every total and step (what a warm-up step measured); keeps the CUDA event pool.
  void clear();

  // ---- one op call (kernels/ops.cpp, through timed_op) ----
  Call start(const ExecContext& ctx, const char* op);
  void stop(const ExecContext& ctx, const Call& call);

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
  //  ops: [{op, calls, calls_per_step, total_ms, ms_per_step, share}]} with shares of the step time.
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
  bool in_step_ = false;
  std::chrono::steady_clock::time_point step_start_;
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
