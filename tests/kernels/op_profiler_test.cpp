// kernels/op_profiler: totals aggregate per op name and sort by time, the JSON report's fields and
// arithmetic (shares of the step, "outside the ops" = step - sum of ops, zeros rather than NaN when
// nothing was profiled), the ops dispatch timing real CPU calls only inside an open step, and the
// collectives set against the ops (overlapped or exposed).
#include "kernels/op_profiler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>

#include "engine/base/core/check.h"
#include "kernel_test_util.h"
#include "kernels/ops.h"

namespace zt {
namespace {

using test::cpu_ctx;
using test::view_of;

TEST(OpProfiler, AggregatesPerOpAndSortsByTimeThenName) {
  OpProfiler p;
  p.add("matmul_forward", 1, 2.0);
  p.add("gelu_forward", 2, 3.0);
  p.add("matmul_forward", 1, 2.0);
  p.add("copy", 1, 3.0);  // ties gelu_forward's time: the name decides
  const std::vector<OpProfiler::OpTotal> t = p.by_time();
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].op, "matmul_forward");
  EXPECT_EQ(t[0].calls, 2);
  EXPECT_DOUBLE_EQ(t[0].total_ms, 4.0);
  EXPECT_EQ(t[1].op, "copy");
  EXPECT_EQ(t[2].op, "gelu_forward");
  EXPECT_EQ(t[2].calls, 2);
}

TEST(OpProfiler, JsonHasPerStepFiguresSharesAndTheTimeOutsideTheOps) {
  OpProfiler p;
  p.add("matmul_forward", 8, 6.0);
  p.add("adamw_update_slices", 2, 2.0);
  p.add_step(10.0);
  p.add_step(10.0);
  const nlohmann::json j = p.to_json();
  EXPECT_EQ(j["profiled_steps"], 2);
  EXPECT_DOUBLE_EQ(j["step_ms_total"].get<double>(), 20.0);
  EXPECT_DOUBLE_EQ(j["step_ms_per_step"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(j["ops_ms_total"].get<double>(), 8.0);
  EXPECT_DOUBLE_EQ(j["ops_ms_per_step"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(j["ops_share"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(j["outside_ops_ms_total"].get<double>(), 12.0);
  EXPECT_DOUBLE_EQ(j["outside_ops_ms_per_step"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(j["outside_ops_share"].get<double>(), 0.6);
  ASSERT_EQ(j["ops"].size(), 2u);
  const nlohmann::json& top = j["ops"][0];
  EXPECT_EQ(top["op"], "matmul_forward");
  EXPECT_EQ(top["calls"], 8);
  EXPECT_DOUBLE_EQ(top["calls_per_step"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(top["total_ms"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(top["ms_per_step"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(top["share"].get<double>(), 0.3);
  EXPECT_EQ(j["ops"][1]["op"], "adamw_update_slices");

  const std::string table = p.format_table();
  EXPECT_LT(table.find("matmul_forward"), table.find("adamw_update_slices")) << table;
  EXPECT_NE(table.find("(outside the ops)"), std::string::npos) << table;
  EXPECT_NE(table.find("60.0%"), std::string::npos) << "outside share: " << table;
}

TEST(OpProfiler, NothingProfiledGivesZerosNotNaN) {
  OpProfiler p;
  p.add("copy", 1, 1.0);
  const nlohmann::json j = p.to_json();
  EXPECT_EQ(j["profiled_steps"], 0);
  EXPECT_EQ(j["ops"][0]["ms_per_step"].get<double>(), 0.0);
  EXPECT_EQ(j["ops"][0]["share"].get<double>(), 0.0);
  EXPECT_EQ(j["outside_ops_share"].get<double>(), 0.0);
  EXPECT_EQ(j.dump().find("null"), std::string::npos) << "nlohmann writes NaN as null: " << j.dump();
}

TEST(OpProfiler, OpsAreTimedOnlyInsideAStepOfAContextThatCarriesTheProfiler) {
  OpProfiler p;
  ExecContext ctx = cpu_ctx();
  std::vector<float> a(4096, 0.5f), b(4096);
  const TensorView va = view_of(a), vb = view_of(b);

  ops::gelu_forward(ctx, vb, va);  // no profiler on the context: nothing to record into
  ctx.profiler = &p;
  ops::gelu_forward(ctx, vb, va);  // a profiler, but no open step
  EXPECT_TRUE(p.by_time().empty());

  p.begin_step(ctx);
  ops::gelu_forward(ctx, vb, va);
  ops::gelu_forward(ctx, vb, va);
  ops::copy(ctx, vb, va);
  ops::copy(ctx, va, va);  // source is destination: returns before any work, not a call
  ops::fill_zero(ctx, vb);
  EXPECT_EQ(ops::sum_of_squares(ctx, vb), 0.0) << "a timed op still returns its result";
  p.end_step(ctx);
  ops::gelu_forward(ctx, vb, va);  // after the step: not recorded

  std::map<std::string, std::int64_t> calls;
  double ops_ms = 0.0;
  for (const OpProfiler::OpTotal& t : p.by_time()) {
    calls[t.op] = t.calls;
    EXPECT_GE(t.total_ms, 0.0) << t.op;
    ops_ms += t.total_ms;
  }
  const std::map<std::string, std::int64_t> expected{
      {"gelu_forward", 2}, {"copy", 1}, {"fill_zero", 1}, {"sum_of_squares", 1}};
  EXPECT_EQ(calls, expected);
  EXPECT_EQ(p.steps(), 1);
  EXPECT_LE(ops_ms, p.step_ms_total()) << "the calls happen inside the step";

  EXPECT_THROW(p.end_step(ctx), InternalError) << "no step is open";
  p.begin_step(ctx);
  EXPECT_THROW(p.begin_step(ctx), InternalError) << "steps do not nest";
  EXPECT_THROW(p.clear(), InternalError) << "a step is open";
  p.end_step(ctx);
  p.clear();
  EXPECT_TRUE(p.by_time().empty());
  EXPECT_EQ(p.steps(), 0);
  EXPECT_EQ(p.step_ms_total(), 0.0);
}

// [Note: exposed communication], worked by hand: ops at [0, 2], [1, 3] (overlapping: one interval
// [0, 3]) and [5, 6]; collectives at [2.5, 5.5] (0.5 under the first ops, 0.5 under the last, 2
// exposed), [7, 8] (all exposed) and [0.5, 1] (all hidden).
// Collectives in flight together (MPI's) count once: [4, 7] and [6.5, 7.5] are busy over [4, 7.5].
TEST(OpProfiler, CommunicationIsSetAgainstTheUnionOfTheOps) {
  using I = OpProfiler::Interval;
  const OpProfiler::CommTotals t = OpProfiler::overlap({{5, 6}, {0, 2}, {1, 3}}, {{2.5, 5.5}, {7, 8}, {0.5, 1}});
  EXPECT_EQ(t.calls, 3);
  EXPECT_DOUBLE_EQ(t.total_ms, 3.0 + 1.0 + 0.5);
  EXPECT_DOUBLE_EQ(t.busy_ms, t.total_ms);
  EXPECT_DOUBLE_EQ(t.overlapped_ms, 0.5 + 0.5 + 0.5);
  const OpProfiler::CommTotals together = OpProfiler::overlap({{5, 6}}, {{4, 7}, {6.5, 7.5}});
  EXPECT_DOUBLE_EQ(together.total_ms, 3.0 + 1.0);
  EXPECT_DOUBLE_EQ(together.busy_ms, 3.5) << "the union of the spans";
  EXPECT_DOUBLE_EQ(together.overlapped_ms, 1.0) << "exposed 2.5, not 3.0";
  const OpProfiler::CommTotals none = OpProfiler::overlap({}, {I{1, 2}});
  EXPECT_DOUBLE_EQ(none.overlapped_ms, 0.0) << "no op ran: all exposed";
  // A collective inside another's span (nested, as a gather under a reduction): busy for the outer.
  EXPECT_DOUBLE_EQ(OpProfiler::overlap({}, {I{0, 10}, I{2, 3}}).busy_ms, 10.0);
}

// Spans from another thread land in the open step, against the ops the step timed: one op of
// about 20 ms with a collective in flight across it and 10 ms past its end.
TEST(OpProfiler, CommSpansFromAnotherThreadAreTimedAgainstTheStepsOps) {
  OpProfiler p;
  ExecContext ctx;
  ctx.profiler = &p;
  p.begin_step(ctx);
  const auto begin = std::chrono::steady_clock::now();
  timed_op(ctx, "work", [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::thread progress([&] { p.add_comm_span(begin, std::chrono::steady_clock::now()); });
  progress.join();
  p.end_step(ctx);
  const nlohmann::json j = p.to_json();
  ASSERT_TRUE(j.contains("communication"));
  const nlohmann::json& c = j["communication"];
  EXPECT_EQ(c["calls_per_step"].get<double>(), 1.0);
  EXPECT_GE(c["overlapped_ms_per_step"].get<double>(), 19.0);
  EXPECT_GE(c["exposed_ms_per_step"].get<double>(), 9.0);
  EXPECT_NE(p.format_table().find("communication: 1.0 collectives/step"), std::string::npos);
  p.add_comm_span(begin, std::chrono::steady_clock::now());  // outside a step: ignored
  EXPECT_EQ(p.comm_totals().calls, 1);
  p.clear();
  EXPECT_FALSE(p.to_json().contains("communication"));
}

}  // namespace
}  // namespace zt
