// Signal handlers: everything here that runs inside a handler is async-signal-safe (plain stores
// to sig_atomic_t and preformatted buffers, write(2), clock_gettime, getppid, open, dup2, close,
// _exit).
#include "engine/distributed/launch/signals.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace zt {

namespace {

// [Note: launcher termination]
// When one rank dies, mpirun terminates the others with SIGTERM, typically long before their
// collective timeout. So that each of them still says what it was doing, Work::wait records the
// collective in flight here, and the SIGTERM handler prints it with write(2) before exiting. Two
// slots, the newest record's given by a generation count: the handler may run on any thread that
// does not block the signal (the checkpoint writer's, MPI's) while the main thread records, so it
// copies the newest slot and keeps the copy only where the count did not move meanwhile (a record
// in progress may be rewriting that slot before it counts), as a sequence lock does; else it tries
// again, then prints the plain line. Lock-free atomics are safe in a handler.
constexpr std::size_t kInflightBytes = 512;
char g_inflight[2][kInflightBytes] = {{0}, {0}};
std::atomic<unsigned> g_inflight_generation{0};  // records so far: the newest in slot generation % 2
static_assert(std::atomic<unsigned>::is_always_lock_free, "read in a signal handler");
// Once this rank has printed its own error and is on its way out (note_error_reported): the exit
// code it reported. A launcher's SIGTERM then ends it with that code and no line of its own: the
// job's other ranks failed alike (ranks disagreeing on the config all fail at once), and mpirun,
// seeing the fastest exit non-zero, stops the rest while they finalise MPI.
volatile std::sig_atomic_t g_reported_exit_code = 0;
// What the launcher-stop lines add where a stop request would have saved a checkpoint (train's
// runs; set_launcher_stop_hint): nothing in the commands that save none.
std::atomic<const char*> g_stop_hint{""};
constexpr const char* kCheckpointHint = " (SIGUSR1 to mpirun stops with a checkpoint)";

// note_stop_checkpoint_saved's line, formatted there (the handler only writes it); null until then.
char g_saved_line_text[kInflightBytes] = {0};
std::atomic<const char*> g_saved_line{nullptr};

// note_checkpoint_complete's line (rank 0 only), added to a launcher termination's: written once,
// before it is published (the run's folder does not change), so a handler never reads it rewritten.
char g_complete_text[kInflightBytes] = {0};
std::atomic<const char*> g_complete_line{nullptr};

// note_run_complete's: the line rank 0 writes when the launcher ends it after the run completed
// ("" on the other ranks), and the acknowledgements of a stop request that comes after the end.
// Written before the flag is set, so a handler that reads the flag reads them whole.
char g_run_complete_text[kInflightBytes] = {0};
std::atomic<bool> g_run_complete{false};
static_assert(std::atomic<bool>::is_always_lock_free, "read in a signal handler");

void write_stderr(const char* text) {
  ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

[[noreturn]] void terminate_for_launcher() {
  if (g_reported_exit_code != 0) _exit(g_reported_exit_code);
  if (g_run_complete.load()) {  // nothing was cut: its outputs are written
    write_stderr(g_run_complete_text);
    _exit(0);
  }
  if (const char* saved = g_saved_line.load(); saved != nullptr) {
    write_stderr(saved);
    _exit(1);
  }
  const char* complete = g_complete_line.load();
  static const char kUnknown[] =
      "zerotrain: error: the launcher stopped this rank because another rank failed, or mpirun was "
      "interrupted";
  static char copy[kInflightBytes];  // a handler that ends the process: never re-entered for long
  for (int attempt = 0; attempt < 3; ++attempt) {
    const unsigned generation = g_inflight_generation.load(std::memory_order_acquire);
    if (generation == 0) break;
    std::memcpy(copy, g_inflight[generation % 2], kInflightBytes);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (g_inflight_generation.load(std::memory_order_relaxed) == generation) {
      copy[kInflightBytes - 1] = '\0';
      write_stderr(copy);
      if (complete != nullptr) write_stderr(complete);
      _exit(1);
    }
  }
  write_stderr(kUnknown);
  write_stderr(g_stop_hint.load());
  write_stderr("\n");
  if (complete != nullptr) write_stderr(complete);
  _exit(1);
}

extern "C" void on_launcher_termination(int) { terminate_for_launcher(); }

// [Note: stop requests]
// A preempted job gets SIGTERM on every rank (Slurm's srun and scancel, Kubernetes, a plain kill of
// a single process), or SIGINT from Ctrl-C; mpirun forwards SIGUSR1 to its ranks unchanged. The
// handler only records the signal and when it came; the trainer agrees on it across ranks at the
// next step boundary (one extra element in the loss all-reduce), saves a checkpoint and exits 0.
// mpirun itself also uses SIGTERM, to end the job after another rank failed, and SIGKILLs a second
// later: a save cannot finish in that window and the rank's peers may be dead, so a SIGTERM whose
// sender is our parent while mpirun launched us keeps the launcher-termination behaviour.
// Lock-free atomics: safe in a handler, and the main thread reads what another thread's handler wrote.
std::atomic<int> g_stop_signal{0};
std::atomic<std::int64_t> g_stop_time_ns{0};  // CLOCK_MONOTONIC, written before g_stop_signal
std::atomic<int> g_stop_sender{0};            // the first request's sending pid (0: the kernel, a terminal)
// A SIGTERM or SIGINT has come (the first request's, or one after a SIGUSR1 or a hang-up): the
// next of those ends the process. After an early warning (Slurm's --signal=USR1@120) the
// scheduler's SIGTERM at the time limit is its follow-up, not a user insisting: the save in
// progress goes on until its KillWait's SIGKILL. That one's signal, sender and time, for
// repeats_the_request, where it came after the first request.
std::atomic<bool> g_term_or_int_seen{false};
std::atomic<int> g_followup_signal{0}, g_followup_sender{0};
std::atomic<std::int64_t> g_followup_ns{0};
std::atomic<bool> g_under_mpirun{false};
std::atomic<bool> g_stop_handlers_installed{false};
// What a second stop request prints as it ends the process (a static string: read in the handler).
// Whether the stop's save had begun, or even completed, is not known here (a handler writes only a
// fixed line): the line says what holds either way (it said "without a checkpoint" where the stop's
// checkpoint was complete, and --resume latest took it).
std::atomic<const char*> g_second_stop_line{
    "zerotrain: a second stop signal: exiting now (a checkpoint this stop was writing is left incomplete; --resume "
    "latest takes the newest complete one)\n"};
// What the first request prints at once, one line a signal (rank 0 or a lone process only): a
// stop can take a step and a save to act on, and a user who sees nothing presses again, which
// ends the process without its checkpoint. Preformatted at installation (the handler only writes).
constexpr std::size_t kAckBytes = 320;
char g_ack_lines[3][kAckBytes] = {{0}, {0}, {0}};       // SIGTERM, SIGINT, SIGUSR1
char g_followup_lines[2][kAckBytes] = {{0}, {0}};       // SIGTERM, SIGINT after a SIGUSR1 or a hang-up
char g_done_ack_lines[3][kAckBytes] = {{0}, {0}, {0}};  // the first request's, after note_run_complete
bool g_ack = false;
// Whether stdout and stderr were terminals at installation: a line written into a live progress
// line starts on its own; and after a hang-up (when a terminal answers no more) they go to /dev/null.
bool g_stdout_tty = false, g_stderr_tty = false;
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<std::int64_t>::is_always_lock_free &&
              std::atomic<const char*>::is_always_lock_free);

std::int64_t monotonic_ns() {
  std::timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// A request sent twice at once: GNU timeout signals its child and then the child's process group,
// which holds the child (so do scripts that signal a job's group); the second arrives as its own
// signal whenever the first was handled in between. The same signal from the same process (not
// the kernel's terminal, not this process) within kSameRequestSeconds is that one request.
constexpr std::int64_t kSameRequestNs = 2'000'000'000;

bool repeats_the_request(int sig, const siginfo_t* info) {
  if (info == nullptr || info->si_pid <= 0 || info->si_pid == getpid()) return false;
  const std::int64_t now = monotonic_ns();
  return (sig == g_stop_signal && info->si_pid == g_stop_sender && now - g_stop_time_ns < kSameRequestNs) ||
         (sig == g_followup_signal && info->si_pid == g_followup_sender && now - g_followup_ns < kSameRequestNs);
}

int ack_slot(int sig) { return sig == SIGTERM ? 0 : sig == SIGINT ? 1 : 2; }

// A hang-up closed the terminal: what is still printed goes to /dev/null, not into write errors
// (a run that saves on the stop would end on its next progress line).
void detach_from_terminal() {
  const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null < 0) return;
  if (g_stdout_tty) dup2(null, STDOUT_FILENO);
  if (g_stderr_tty) dup2(null, STDERR_FILENO);
  close(null);
}

extern "C" void on_stop_request(int sig, siginfo_t* info, void*) {
  if (sig == SIGTERM && g_under_mpirun && info != nullptr && info->si_pid == getppid()) terminate_for_launcher();
  if (sig == SIGHUP) {
    // Under mpirun a rank's terminal is mpirun's pseudo-terminal, which carries its output wherever
    // the job's goes (a file): a SIGHUP sent to the rank closed nothing, and detached it lost the
    // stop's lines. (Where mpirun itself goes, its ranks go too.)
    if (!g_under_mpirun) detach_from_terminal();
    // A pipe's reader on the same terminal (`zerotrain train | tee log`) ends with it: a write to
    // the pipe then fails (the run's warning at its end) instead of killing the run before its save.
    std::signal(SIGPIPE, SIG_IGN);
  }
  // After the run completed a request has nothing to wait for: a second one (not the first's
  // repeat) ends the process at once, with 0, its outputs being written.
  if (g_run_complete && (sig == SIGTERM || sig == SIGINT) && g_stop_signal != 0 && !repeats_the_request(sig, info)) {
    if (g_reported_exit_code != 0) _exit(g_reported_exit_code);  // failing after all (a peer lost in a gather)
    if (g_stderr_tty) write_stderr("\n");
    write_stderr(g_second_stop_line.load());
    _exit(0);
  }
  if (g_stop_signal != 0) {
    if (sig == SIGUSR1 || sig == SIGHUP) return;  // a repeated forward of the same request; a hang-up
    if (repeats_the_request(sig, info)) return;
    if (!g_term_or_int_seen) {  // the first SIGTERM or SIGINT, after a SIGUSR1 or a hang-up
      // Recorded before it is claimed: the same request arriving at once on another thread (GNU
      // timeout's second send) then reads as its repeat below, whichever thread claims it.
      g_followup_ns = monotonic_ns();
      g_followup_sender = info != nullptr ? static_cast<int>(info->si_pid) : 0;
      g_followup_signal = sig;
      if (!g_term_or_int_seen.exchange(true)) {
        if (g_ack) write_stderr(g_followup_lines[sig == SIGTERM ? 0 : 1]);
        return;
      }
      if (repeats_the_request(sig, info)) return;
    }
    if (g_stderr_tty) write_stderr("\n");
    write_stderr(g_second_stop_line.load());
    _exit(128 + sig);
  }
  g_stop_time_ns = monotonic_ns();
  g_stop_sender = info != nullptr ? static_cast<int>(info->si_pid) : 0;
  g_term_or_int_seen = sig == SIGTERM || sig == SIGINT;
  g_stop_signal = sig;
  if (g_ack && sig != SIGHUP) write_stderr((g_run_complete ? g_done_ack_lines : g_ack_lines)[ack_slot(sig)]);
}

// Rank 0 by the launchers' variables (read before any communicator exists), or a lone process.
bool launched_as_rank_zero() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "ZT_RANK", "RANK", "SLURM_PROCID"}) {
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0') {
      return std::strcmp(value, "0") == 0;
    }
  }
  return true;
}

}  // namespace

void record_wait_site(const std::string* description, const std::string* context) {
  const unsigned generation = g_inflight_generation.load(std::memory_order_relaxed);  // only this thread writes
  const unsigned next = (generation + 1) % 2;
  const char* where = context != nullptr ? context->c_str() : "?";
  if (description != nullptr) {
    std::snprintf(g_inflight[next], kInflightBytes,
                  "zerotrain: error: %s was interrupted at %s: the launcher stopped this rank because another rank "
                  "failed or died, or mpirun was interrupted%s\n",
                  description->c_str(), where, g_stop_hint.load());
  } else {
    std::snprintf(g_inflight[next], kInflightBytes,
                  "zerotrain: error: the launcher stopped this rank at %s (between collectives) because another "
                  "rank failed or died, or mpirun was interrupted%s\n",
                  where, g_stop_hint.load());
  }
  g_inflight_generation.store(generation + 1, std::memory_order_release);
}

void note_checkpoint_complete(const std::string& folder) {
  // One line for the job (rank 0's), said from the run's first complete checkpoint on.
  if (!launched_as_rank_zero() || g_complete_line.load() != nullptr) return;
  std::snprintf(g_complete_text, kInflightBytes,
                "zerotrain: note: the run's newest complete checkpoint in %s continues it: the same command with "
                "--resume latest\n",
                folder.c_str());
  g_complete_line.store(g_complete_text);
}

void note_stop_checkpoint_saved(int step, const std::string& folder) {
  std::snprintf(g_saved_line_text, kInflightBytes,
                "zerotrain: note: the launcher ended this rank after its stop checkpoint, step %d in %s, was saved "
                "whole: continue with --resume latest\n",
                step, folder.c_str());
  g_saved_line.store(g_saved_line_text);
}

void note_run_complete(const std::string& run_dir) {
  if (g_run_complete.load()) return;
  if (launched_as_rank_zero()) {
    std::snprintf(g_run_complete_text, kInflightBytes,
                  "zerotrain: note: the launcher stopped the job after the run had completed; its outputs are in %s\n",
                  run_dir.c_str());
  }
  for (int sig : {SIGTERM, SIGINT, SIGUSR1}) {
    std::snprintf(g_done_ack_lines[ack_slot(sig)], kAckBytes,
                  "%szerotrain: %s received after the run completed (its outputs are in %s): nothing to stop\n",
                  g_stderr_tty ? "\n" : "", signal_name(sig).c_str(), run_dir.c_str());
  }
  set_second_stop_line("zerotrain: a second stop signal: exiting now (the run had completed)\n");
  g_run_complete.store(true);
}

void set_launcher_stop_hint(bool stops_with_checkpoint) {
  g_stop_hint.store(stops_with_checkpoint ? kCheckpointHint : "");
}

void note_error_reported(int exit_code) { g_reported_exit_code = exit_code != 0 ? exit_code : 1; }
int reported_exit_code() { return g_reported_exit_code; }

void install_launcher_termination_handler() {
  if (g_stop_handlers_installed) return;  // they own SIGTERM and keep its launcher meaning
  std::signal(SIGTERM, on_launcher_termination);
}

namespace {
// What the stop signals did before install_stop_request_handlers, for restore_default_stop_handlers.
constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGUSR1, SIGHUP};
struct sigaction g_before[4];
bool g_before_saved = false;
}  // namespace

bool signal_ignored(int sig) {
  struct sigaction current {};
  return sigaction(sig, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) == 0 &&
         current.sa_handler == SIG_IGN;
}

void install_stop_request_handlers(const char* command, const char* what_follows) {
  if (!g_before_saved) {
    for (int i = 0; i < 4; ++i) sigaction(kStopSignals[i], nullptr, &g_before[i]);
    g_before_saved = true;
  }
  g_under_mpirun = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
  g_stdout_tty = isatty(STDOUT_FILENO) == 1;
  g_stderr_tty = isatty(STDERR_FILENO) == 1;
  g_ack = launched_as_rank_zero();
  for (int sig : {SIGTERM, SIGINT, SIGUSR1}) {
    std::snprintf(g_ack_lines[ack_slot(sig)], kAckBytes, "%s%s: %s received: %s\n", g_stderr_tty ? "\n" : "", command,
                  signal_name(sig).c_str(), what_follows);
  }
  for (int sig : {SIGTERM, SIGINT}) {
    std::snprintf(g_followup_lines[sig == SIGTERM ? 0 : 1], kAckBytes,
                  "%s%s: %s received: already stopping on the earlier request, which goes on (a second SIGTERM or "
                  "SIGINT exits at once)\n",
                  g_stderr_tty ? "\n" : "", command, signal_name(sig).c_str());
  }
  g_stop_handlers_installed = true;
  struct sigaction action {};
  action.sa_sigaction = on_stop_request;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  // A closed terminal too (SIGHUP), unless the process was started to ignore it (nohup): then it
  // stays so. The others are taken whatever they were: a stop is what was asked for (a harness
  // that starts the run from a background job, where SIGINT comes ignored, still stops it).
  for (int sig : kStopSignals) {
    if (sig != SIGHUP || !signal_ignored(sig)) sigaction(sig, &action, nullptr);
  }
}

void restore_default_stop_handlers() {
  g_stop_handlers_installed = false;
  // What the process had (an inherited SIG_IGN stays ignored), where the stop handler is still set.
  for (int i = 0; i < 4 && g_before_saved; ++i) {
    struct sigaction current {};
    if (sigaction(kStopSignals[i], nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) != 0 &&
        current.sa_sigaction == on_stop_request) {
      sigaction(kStopSignals[i], &g_before[i], nullptr);
    }
  }
  if (g_under_mpirun && !signal_ignored(SIGTERM)) std::signal(SIGTERM, on_launcher_termination);
  // A request that came meanwhile is what the default would have done with it, and so is a
  // SIGTERM or SIGINT that followed it (the first one inherited ignored, as SIGUSR1 may be).
  const int sig = g_stop_signal.exchange(0), followup = g_followup_signal.exchange(0);
  g_term_or_int_seen = false;
  if (sig != 0) raise(sig);
  if (followup != 0) raise(followup);
}

int stop_signal() { return g_stop_signal; }

void set_second_stop_line(const char* line) { g_second_stop_line = line; }

namespace {
std::atomic<double> g_stop_grace_seconds{20.0};
}  // namespace

double stop_grace_seconds() { return g_stop_grace_seconds; }
void set_stop_grace_seconds(double seconds) { g_stop_grace_seconds = seconds; }

namespace {
std::atomic<int> g_grace_suspensions{0};
}  // namespace

StopGraceSuspended::StopGraceSuspended() { ++g_grace_suspensions; }
StopGraceSuspended::~StopGraceSuspended() { --g_grace_suspensions; }
bool stop_grace_suspended() { return g_grace_suspensions > 0; }

double seconds_since_stop_signal() {
  if (g_stop_signal == 0) return 0.0;
  return 1e-9 * static_cast<double>(monotonic_ns() - g_stop_time_ns);
}

std::string signal_name(int signal_number) {
  switch (signal_number) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    case SIGHUP: return "SIGHUP";
    default: return fmt::format("signal {}", signal_number);
  }
}

}  // namespace zt
