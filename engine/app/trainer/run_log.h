// What a run reports: a JSONL metrics file in the run directory (one object per step, eval and
// sample, flushed as written so a killed run keeps its history), the progress shown to the
// user -- one live, rewritten line on a terminal, plain lines every N steps otherwise -- and, with
// log.profile_ops, the per-op time profile.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace zt {

class MetricsLog {
 public:
  // Opens `path` to append (a fresh run then calls start_afresh). Throws RuntimeError if it cannot
  // open it; InputError for a FIFO nothing reads.
  explicit MetricsLog(const std::string& path);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write(const nlohmann::json& record);
  // write, then, where `still_ours()` no longer holds (the run's directory taken over by another
  // run while this process was stopped between its caller's check and the write: a SIGSTOP), the
  // record taken back out of a regular file where it still ends it, so no record of this run
  // follows the taker's (and none of the taker's goes with it).
  void write_while(const nlohmann::json& record, const std::function<bool()>& still_ours);
  // The records written so far onto the disk (a regular file's; nothing for a pipe or a device):
  // before a checkpoint commits, so that a power loss never leaves a checkpoint whose run's log
  // lacks the steps before it.
  void sync();

  // What a resume from the checkpoint of `step` needs of the log, read in one pass (a long run's
  // log is hundreds of MB, each line a JSON parse). Empty for a pipe or a device.
  struct AtStep {
    bool any_record = false;           // a record of the step (a last line cut short included)
    std::set<std::string> save_ids;    // those of the asked save ids that a record holds as "save_id"
    bool other_save = false;           // a record of the step holds a save id not asked: another save
    std::set<std::string> kept_types;  // the step's records' types, but a last line cut short
    int past = 0;                      // what drop_records_after_step removes: records past the step
  };
  AtStep read_at_step(std::int64_t step, const std::vector<std::string>& save_ids) const;
  // For a resumed run: removes the records of steps after `step` (what an interrupted run logged
  // past its last checkpoint, and will log again; a summary whose last_step is later) and a last
  // line a kill cut short, rewriting the file atomically; `past` is read_at_step's count of them
  // (none: the file is left as it is). Returns `past`.
  int drop_records_after_step(std::int64_t step, int past);
  // A fresh run, or a resume whose log is another trajectory's: the file, where it holds records,
  // is kept beside itself as <stem>.<UTC time>.jsonl (set_aside; through a symlink, its target,
  // the link kept), and a new one started.
  void start_afresh();
  // Where start_afresh moved an earlier log, or "".
  const std::string& set_aside() const { return set_aside_; }

 private:
  static std::string line_of(const nlohmann::json& record);
  void write_line(const std::string& line);
  void open_file(bool truncate);
  void set_aside_file();
  // Calls visit(line, torn) for each line until it returns false (torn: the last line, no newline
  // after it). InputError when the file exists and cannot be read.
  void each_line(const std::function<bool(const std::string&, bool)>& visit) const;

  std::string path_, set_aside_;
  std::FILE* file_ = nullptr;
  bool regular_ = false;  // a regular file, which can be read back (not a pipe, not /dev/null)
};

class ProgressPrinter {
 public:
  // mode: "auto" (live when stdout is a terminal), "live", "plain", or "quiet" (ranks other than 0).
  ProgressPrinter(const std::string& mode, int every_steps);
  ~ProgressPrinter();

  // A step's line: live mode rewrites one line (cut to a terminal's width); plain mode prints every
  // `every_steps` steps and always for the last step.
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
