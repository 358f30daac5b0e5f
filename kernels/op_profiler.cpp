// OpProfiler: host-clock timing for CPU contexts, pooled CUDA events for CUDA ones (compiled only
// with ZT_HAVE_CUDA; a CUDA context cannot exist in a build without it), and the totals' report.
#include "kernels/op_profiler.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/base/core/check.h"
#ifdef ZT_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "engine/base/device/cuda_check.h"
#include "engine/base/device/cuda_stream.h"
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
  std::vector<Pending> pending;   // this step's calls, resolved by end_step after its synchronize
  std::vector<std::size_t> comm;  // this step's collectives' start events (stop events follow)
  std::size_t step_start = 0;     // the event recorded on the compute stream as the step began
  bool has_step_start = false;

  // ms from the step's start to event i (both complete).
  double at(std::size_t i) const { return cuda::CudaEvent::elapsed_ms(*pool[step_start], *pool[i]); }

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
#ifdef ZT_HAVE_CUDA
  cuda_->has_step_start = ctx.device == Device::kCUDA;
  if (cuda_->has_step_start) {
    cuda_->step_start = cuda_->take_pair();
    cuda_->pool[cuda_->step_start]->record(stream_of(ctx));
  }
#endif
  step_ops_.clear();
  {
    const std::lock_guard<std::mutex> lock(comm_mutex_);
    step_comm_.clear();
    step_start_ = std::chrono::steady_clock::now();
  }
  in_step_.store(true, std::memory_order_release);
}

void OpProfiler::end_step(const ExecContext& ctx) {
  ZT_CHECK(in_step_, "OpProfiler::end_step without begin_step");
  wait_for_device(ctx);
  const double step_ms = ms_since(step_start_);
  in_step_.store(false, std::memory_order_release);
  std::vector<Interval> comm;
#ifdef ZT_HAVE_CUDA
  for (const CudaEvents::Pending& p : cuda_->pending) {
    const float ms = cuda::CudaEvent::elapsed_ms(*cuda_->pool[p.event], *cuda_->pool[p.event + 1]);
    totals_[p.op].calls += 1;
    totals_[p.op].total_ms += ms;
    if (cuda_->has_step_start) step_ops_.push_back({cuda_->at(p.event), cuda_->at(p.event + 1)});
  }
  for (const std::size_t e : cuda_->comm) {
    // A collective may outlive the compute stream's work (a publish waited by the next step).
    cuda_->pool[e + 1]->synchronize();
    comm.push_back({cuda_->at(e), cuda_->at(e + 1)});
  }
  cuda_->pending.clear();
  cuda_->comm.clear();
  cuda_->used = 0;
#endif
  {
    const std::lock_guard<std::mutex> lock(comm_mutex_);
    comm.insert(comm.end(), step_comm_.begin(), step_comm_.end());
    step_comm_.clear();
  }
  const CommTotals t = overlap(std::move(step_ops_), comm);
  step_ops_.clear();
  comm_.calls += t.calls;
  comm_.total_ms += t.total_ms;
  comm_.busy_ms += t.busy_ms;
  comm_.overlapped_ms += t.overlapped_ms;
  add_step(step_ms);
}

namespace {

// The union of intervals, as disjoint intervals in order.
std::vector<OpProfiler::Interval> union_of(std::vector<OpProfiler::Interval> v) {
  std::sort(v.begin(), v.end(),
            [](const OpProfiler::Interval& a, const OpProfiler::Interval& b) { return a.begin < b.begin; });
  std::vector<OpProfiler::Interval> merged;
  for (const OpProfiler::Interval& i : v) {
    if (!merged.empty() && i.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, i.end);
    } else {
      merged.push_back(i);
    }
  }
  return merged;
}

}  // namespace

OpProfiler::CommTotals OpProfiler::overlap(std::vector<Interval> ops, const std::vector<Interval>& comm) {
  const std::vector<Interval> compute = union_of(std::move(ops));
  CommTotals t;
  for (const Interval& c : comm) {
    t.calls += 1;
    t.total_ms += std::max(0.0, c.end - c.begin);
  }
  for (const Interval& c : union_of(comm)) {
    t.busy_ms += c.end - c.begin;
    for (const Interval& m : compute) {
      t.overlapped_ms += std::max(0.0, std::min(c.end, m.end) - std::max(c.begin, m.begin));
    }
  }
  return t;
}

std::size_t OpProfiler::comm_start(void* cuda_stream) {
#ifdef ZT_HAVE_CUDA
  const std::size_t e = cuda_->take_pair();
  cuda_->pool[e]->record(static_cast<cudaStream_t>(cuda_stream));
  return e;
#else
  (void)cuda_stream;
  throw InternalError("a CUDA stream in a build without CUDA");
#endif
}

void OpProfiler::comm_stop(std::size_t start_event, void* cuda_stream) {
#ifdef ZT_HAVE_CUDA
  cuda_->pool[start_event + 1]->record(static_cast<cudaStream_t>(cuda_stream));
  cuda_->comm.push_back(start_event);
#else
  (void)start_event;
  (void)cuda_stream;
#endif
}

void OpProfiler::add_comm_span(std::chrono::steady_clock::time_point begin, std::chrono::steady_clock::time_point end) {
  const std::lock_guard<std::mutex> lock(comm_mutex_);
  if (!in_step_.load(std::memory_order_acquire)) return;
  auto ms = [&](std::chrono::steady_clock::time_point t) {
    return std::max(0.0, std::chrono::duration<double, std::milli>(t - step_start_).count());
  };
  step_comm_.push_back({ms(begin), ms(end)});
}

void OpProfiler::clear() {
  ZT_CHECK(!in_step_, "OpProfiler::clear inside a step");
  totals_.clear();
  comm_ = {};
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
  const auto now = std::chrono::steady_clock::now();
  const double ms = std::chrono::duration<double, std::milli>(now - call.host_start).count();
  totals_[call.op].calls += 1;
  totals_[call.op].total_ms += ms;
  const double begin = std::chrono::duration<double, std::milli>(call.host_start - step_start_).count();
  step_ops_.push_back({begin, begin + ms});
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
  nlohmann::json j = {{"profiled_steps", steps_},
                      {"step_ms_total", step_ms_total_},
                      {"step_ms_per_step", per_step(step_ms_total_)},
                      {"ops_ms_total", ops_ms},
                      {"ops_ms_per_step", per_step(ops_ms)},
                      {"ops_share", share(ops_ms)},
                      {"outside_ops_ms_total", outside_ms},
                      {"outside_ops_ms_per_step", per_step(outside_ms)},
                      {"outside_ops_share", share(outside_ms)},
                      {"ops", ops}};
  if (comm_.calls > 0) {  // [Note: exposed communication]
    const double exposed = comm_.busy_ms - comm_.overlapped_ms;
    j["communication"] = {{"calls", comm_.calls},
                          {"calls_per_step", per_step(static_cast<double>(comm_.calls))},
                          {"kernel_ms_total", comm_.total_ms},
                          {"kernel_ms_per_step", per_step(comm_.total_ms)},
                          {"busy_ms_per_step", per_step(comm_.busy_ms)},
                          {"overlapped_ms_per_step", per_step(comm_.overlapped_ms)},
                          {"exposed_ms_per_step", per_step(exposed)},
                          {"exposed_share", share(exposed)}};
  }
  return j;
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
  if (j.contains("communication")) {
    const nlohmann::json& c = j["communication"];
    out += fmt::format(
        "\ncommunication: {:.1f} collectives/step, {:.3f} ms/step in flight, {:.3f} overlapped with "
        "ops, {:.3f} exposed ({:.1f}% of the step)",
        c["calls_per_step"].get<double>(), c["busy_ms_per_step"].get<double>(),
        c["overlapped_ms_per_step"].get<double>(), c["exposed_ms_per_step"].get<double>(),
        100.0 * c["exposed_share"].get<double>());
  }
  return out;
}

}  // namespace zt
