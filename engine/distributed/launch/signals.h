// How a rank reacts to signals: the launcher's termination of a job after another rank died, and
// a stop request (preemption, Ctrl-C) that the trainer answers with a checkpoint at the next step
// boundary. See [Note: launcher termination] and [Note: stop requests] in signals.cpp.
#pragma once

#include <string>

namespace zt {

// Remembers what this thread is waiting in (a collective's description, or nullptr between
// collectives) and where (the communicator's context, e.g. "step 5 micro-batch 0"), for the line
// a terminated rank prints.
void record_wait_site(const std::string* description, const std::string* context);

// Whether a stop request saves a checkpoint in this command (train with checkpoint.save_on_signal):
// then the line a rank stopped by the launcher prints says that SIGUSR1 to mpirun would have
// stopped the job with one. Off by default (eval, sample, the tools save nothing).
void set_launcher_stop_hint(bool stops_with_checkpoint);

// Says this rank has printed its own error line and is exiting with `exit_code`: from then on the
// launcher's SIGTERM ends it with that code and prints nothing (the line it would print, a wait
// site, is stale once the command has unwound).
void note_error_reported(int exit_code);
// The exit code note_error_reported recorded, or 0 when no error was reported.
int reported_exit_code();

// Says the run's checkpoint folder holds a complete checkpoint (a save committed, or the one
// resumed): a launcher's termination after it (another rank died, mpirun interrupted) adds the
// folder and the resume to rank 0's line (the folder, not the step: keep_last may have pruned the
// step by then, a newer one committed). The run's one folder: the first call's is kept.
void note_checkpoint_complete(const std::string& folder);

// Says this rank's stop checkpoint (of `step`, in `folder`) is saved whole: from then on the launcher's SIGTERM
// (mpirun ending a job that Slurm's scancel signalled too) prints that, and the resume, rather than
// a wait site that reads as an interrupted save; it still exits 1, as the job's end is mpirun's.
void note_stop_checkpoint_saved(int step, const std::string& folder);

// Says the run has completed: its final weights (where it writes them), metrics and summary record are
// on disk. From then on the launcher's SIGTERM (mpirun interrupted while the ranks finalise MPI)
// ends the rank with 0 and, on rank 0, a line saying the run had completed, not a wait site and a
// resume for a run with nothing left to train; and a stop request (SIGTERM, SIGINT, SIGUSR1) is
// acknowledged as coming after the end, not as a stop at the end of the current step, and a second
// SIGTERM or SIGINT ends the process at once with 0. Rank 0 calls it once its outputs are written;
// the other ranks once they know that (a collective after them).
void note_run_complete(const std::string& run_dir);

// Makes SIGTERM print the recorded wait site and exit 1: what a rank shows when the launcher stops
// it because another rank died. The MPI backend installs it.
void install_launcher_termination_handler();

// Makes SIGTERM, SIGINT, SIGUSR1 and SIGHUP (unless ignored, as under nohup) request a stop
// instead of ending the process, except a SIGTERM sent by mpirun itself (the launcher ending the
// job, which it follows with SIGKILL within a second): that one keeps the launcher-termination
// behaviour. The first request prints "<command>: SIGINT received: <what_follows>" at once on rank
// 0 (a stop may take a step and a save to act on); a hang-up sends what is printed to a terminal
// from then on to /dev/null. A second SIGINT or SIGTERM ends the process at once (exit 130 / 143)
// without a checkpoint, but for the same signal from the same other process within 2 s (GNU
// timeout's to the child, then to its group); after a SIGUSR1 or a hang-up, the first SIGINT or
// SIGTERM only says the stop goes on (a scheduler's SIGTERM after its early warning). `what_follows` must outlive the
// call only (it is copied).
void install_stop_request_handlers(const char* command, const char* what_follows);
// Gives SIGTERM, SIGINT, SIGUSR1 and SIGHUP back what they did before install_stop_request_handlers
// (SIGTERM under mpirun its launcher-termination action): a run whose config turns stops off
// (checkpoint.save_on_signal = false), having taken them before the config could be read. A
// request that came meanwhile is raised again, as the process would have met it.
void restore_default_stop_handlers();
// Whether `sig` is ignored (SIG_IGN: nohup's SIGHUP, a script's background job's SIGINT), which a
// handler installed over it would undo.
bool signal_ignored(int sig);

// The signal that first requested a stop (SIGTERM, SIGINT, SIGUSR1 or SIGHUP), or 0.
int stop_signal();
// The line a second request prints as it ends the process (default: a run's, "... without a
// checkpoint"); `line` must outlive the process (a string literal).
void set_second_stop_line(const char* line);
// Seconds since that signal arrived (0 when none did).
double seconds_since_stop_signal();
// "SIGTERM", "SIGINT", "SIGUSR1", "SIGHUP", or "signal N".
std::string signal_name(int signal_number);

// How long a collective may stay blocked after a stop request before the rank gives up on it
// (Work::wait): a healthy peer reaches the step boundary well within the default 20 s, a dead one
// never does. Under Slurm the SIGKILL follows SIGTERM after KillWait (30 s by default).
double stop_grace_seconds();
void set_stop_grace_seconds(double seconds);
// While one lives, a wait known to outlast the grace (Work::wait(false): another group's checkpoint
// save) is in progress: the collective watchdog does not apply the grace to what is in flight.
class StopGraceSuspended {
 public:
  StopGraceSuspended();
  ~StopGraceSuspended();
  StopGraceSuspended(const StopGraceSuspended&) = delete;
  StopGraceSuspended& operator=(const StopGraceSuspended&) = delete;
};
bool stop_grace_suspended();

}  // namespace zt
