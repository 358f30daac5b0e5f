// OpProfiler: host-clock timing for CPU contexts, pooled CUDA events for CUDA ones (compiled only
// with ZT_HAVE_CUDA; a CUDA context cannot exist in a build without it), and the totals' report.
#include "kernels/op_profiler.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/core/check.h"
#ifdef ZT_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "engine/device/cuda_check.h"
#include "engine/device/cuda_stream.h"
#endif

namespace zt {

#ifdef ZT_HAVE_CUDA
// Events are reused step after step: pool[2k] and pool[2k+1] bracket the k-th timed call of the
// open step. Creating events is host work, so the pool grows during the first (warm-up) step and
// later steps only record into it.
struct OpProfiler::CudaEvents {
  struct Pending {
    std::size_t op;
    std::size_t event;  // the start event's index; the stop event follows it
  };
  std::vector<std::unique_ptr<cuda::CudaEvent>> pool;
  std::size_t used = 0;
  std::vector<Pending> pending;  // this step's calls, resolved by end_step after its synchronize

  std::size_t take_pair() {
    while (pool.size() < used + 2) pool.push_back(std::make_unique<cuda::CudaEvent>(/*timing=*/true));
    used += 2;
    return used - 2;
  }
};

namespace {
cudaStream_t stream_of(const ExecContext& ctx) { return static_cast<cudaStream_t>(ctx.cuda_stream); }
}  // namespace
#else
struct OpProfiler::CudaEvents {};
#endif

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Waits for ctx's queued work; a no-op on the CPU, whose kernels return when done.
void wait_for_device(const ExecContext& ctx) {
  if (ctx.device != Device::kCUDA) return;
#ifdef ZT_HAVE_CUDA
  ZT_CUDA_CHECK(cudaStreamSynchronize(stream_of(ctx)));
#else
  throw InternalError("a CUDA context in a build without CUDA");
#endif
}

}  // namespace

OpProfiler::OpProfiler() : cuda_(std::make_unique<CudaEvents>()) {}
OpProfiler::~OpProfiler() = default;

void OpProfiler::begin_step(const ExecContext& ctx) {
  ZT_CHECK(!in_step_, "OpProfiler::begin_step inside a step");
  wait_for_device(ctx);
  in_step_ = true;
  step_start_ = std::chrono::steady_clock::now();
}

void OpProfiler::end_step(const ExecContext& ctx) {
  ZT_CHECK(in_step_, "OpProfiler::end_step without begin_step");
  wait_for_device(ctx);
  const double step_ms = ms_since(step_start_);
  in_step_ = false;
#ifdef ZT_HAVE_CUDA
  for (const CudaEvents::Pending& p : cuda_->pending) {
    const float ms = cuda::CudaEvent::elapsed_ms(*cuda_->pool[p.event], *cuda_->pool[p.event + 1]);
    totals_[p.op].calls += 1;
    totals_[p.op].total_ms += ms;
  }
  cuda_->pending.clear();
  cuda_->used = 0;
#endif
  add_step(step_ms);
}

void OpProfiler::clear() {
  ZT_CHECK(!in_step_, "OpProfiler::clear inside a step");
  totals_.clear();
  index_.clear();
  steps_ = 0;
  step_ms_total_ = 0.0;
}

OpProfiler::Call OpProfiler::start(const ExecContext& ctx, const char* op) {
  Call call;
  call.op = index_of(op);  // before the clock starts: the lookup is the profiler's cost, not the op's
  if (ctx.device == Device::kCUDA) {
#ifdef ZT_HAVE_CUDA
    call.event = cuda_->take_pair();
    cuda_->pool[call.event]->record(stream_of(ctx));
#else
    throw InternalError("a CUDA context in a build without CUDA");
#endif
    return call;
  }
  call.host_start = std::chrono::steady_clock::now();
  return call;
}

void OpProfiler::stop(const ExecContext& ctx, const Call& call) {
  if (ctx.device == Device::kCUDA) {
#ifdef ZT_HAVE_CUDA
    cuda_->pool[call.event + 1]->record(stream_of(ctx));
    cuda_->pending.push_back({call.op, call.event});
#endif
    return;
  }
  const double ms = ms_since(call.host_start);
  totals_[call.op].calls += 1;
  totals_[call.op].total_ms += ms;
}

std::size_t OpProfiler::index_of(std::string_view op) {
  const auto it = index_.find(op);
  if (it != index_.end()) return it->second;
  totals_.push_back(OpTotal{std::string(op), 0, 0.0});
  index_.emplace(std::string(op), totals_.size() - 1);
  return totals_.size() - 1;
}

void OpProfiler::add(std::string_view op, std::int64_t calls, double ms) {
  OpTotal& t = totals_[index_of(op)];
  t.calls += calls;
  t.total_ms += ms;
}

void OpProfiler::add_step(double ms) {
  ++steps_;
  step_ms_total_ += ms;
}

std::vector<OpProfiler::OpTotal> OpProfiler::by_time() const {
  std::vector<OpTotal> sorted = totals_;
  std::sort(sorted.begin(), sorted.end(), [](const OpTotal& a, const OpTotal& b) {
    return a.total_ms != b.total_ms ? a.total_ms > b.total_ms : a.op < b.op;
  });
  return sorted;
}

nlohmann::json OpProfiler::to_json() const {
  // Per-step figures and shares are 0 when nothing was profiled, rather than NaN (not valid JSON).
  const double steps = steps_;
  auto per_step = [&](double x) { return steps_ > 0 ? x / steps : 0.0; };
  auto share = [&](double ms) { return step_ms_total_ > 0.0 ? ms / step_ms_total_ : 0.0; };
  nlohmann::json ops = nlohmann::json::array();
  double ops_ms = 0.0;
  for (const OpTotal& t : by_time()) {
    ops_ms += t.total_ms;
    ops.push_back({{"op", t.op},
                   {"calls", t.calls},
                   {"calls_per_step", per_step(static_cast<double>(t.calls))},
                   {"total_ms", t.total_ms},
                   {"ms_per_step", per_step(t.total_ms)},
                   {"share", share(t.total_ms)}});
  }
  const double outside_ms = step_ms_total_ - ops_ms;
  return {{"profiled_steps", steps_},
          {"step_ms_total", step_ms_total_},
          {"step_ms_per_step", per_step(step_ms_total_)},
          {"ops_ms_total", ops_ms},
          {"ops_ms_per_step", per_step(ops_ms)},
          {"ops_share", share(ops_ms)},
          {"outside_ops_ms_total", outside_ms},
          {"outside_ops_ms_per_step", per_step(outside_ms)},
          {"outside_ops_share", share(outside_ms)},
          {"ops", ops}};
}

std::string OpProfiler::format_table() const {
  const nlohmann::json j = to_json();
  std::string out = fmt::format("{:<32} {:>10} {:>10} {:>7}\n", "op", "calls/step", "ms/step", "share");
  for (const nlohmann::json& op : j["ops"]) {
    out += fmt::format("{:<32} {:>10.1f} {:>10.3f} {:>6.1f}%\n", op["op"].get<std::string>(),
                       op["calls_per_step"].get<double>(), op["ms_per_step"].get<double>(),
                       100.0 * op["share"].get<double>());
  }
  out += fmt::format("{:<32} {:>10} {:>10.3f} {:>6.1f}%\n", "(outside the ops)", "",
                     j["outside_ops_ms_per_step"].get<double>(), 100.0 * j["outside_ops_share"].get<double>());
  out += fmt::format("{:<32} {:>10} {:>10.3f} {:>6.1f}%", "(step)", "", j["step_ms_per_step"].get<double>(),
                     steps_ > 0 ? 100.0 : 0.0);
  return out;
}

}  // namespace zt
