// What a run reports: a JSONL metrics file in the run directory (one object per step, eval and
// sample, flushed as written so a killed run keeps its history), the progress shown to the
// user -- one live, rewritten line on a terminal, plain lines every N steps otherwise -- and, with
// log.profile_ops, the per-op time profile.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <string>

namespace zt {

class MetricsLog {
 public:
  // Appends for a resumed run; a fresh one starts a new file, an earlier run's (not empty) kept
  // beside it as metrics.<UTC time>.jsonl (set_aside). Throws RuntimeError if it cannot open it.
  explicit MetricsLog(const std::string& path, bool append = false);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write(const nlohmann::json& record);

  // For a resumed run: removes the records of steps after `step` (what an interrupted run logged
  // past its last checkpoint, and will log again; a summary whose last_step is later) and a last
  // line a kill cut short, rewriting the file atomically. Returns how many.
  int drop_records_after_step(std::int64_t step);
  // Whether the file holds a record of `type` ("eval", "sample"; "": any) for `step`.
  bool has_record(const std::string& type, std::int64_t step) const;
  // For a resume whose log is another trajectory's: sets the file aside as a fresh run does
  // (set_aside), and starts a new one.
  void start_afresh();
  // Where a fresh run moved an earlier run's log, or "".
  const std::string& set_aside() const { return set_aside_; }

 private:
  void set_aside_file();  // the file, where not empty, renamed to <stem>.<UTC time>.jsonl

  std::string path_, set_aside_;
  std::FILE* file_ = nullptr;
};

class ProgressPrinter {
 public:
  // mode: "auto" (live when stdout is a terminal), "live", "plain", or "quiet" (ranks other than 0).
  ProgressPrinter(const std::string& mode, int every_steps);
  ~ProgressPrinter();

  // A step's line: live mode rewrites one line; plain mode prints every `every_steps` steps and
  // always for the last step.
  void step(int step, int total_steps, const std::string& line);
  // A line that stays (evaluation, samples, warnings); ends any live line first.
  void message(const std::string& text);

 private:
  bool live_;
  bool quiet_;
  int every_steps_;
  bool line_open_ = false;
};

class OpProfiler;  // kernels/op_profiler.h

// log.profile_ops at the end of a run: writes `path` (op_profile.json: the profiler's totals with
// `about` merged in -- device, timing method, warm-up, ranks -- and what "outside the ops" holds)
// and prints the per-op table, most time first.
void report_op_profile(const OpProfiler& profiler, const std::string& path, nlohmann::json about,
                       ProgressPrinter& progress);

}  // namespace zt
