// Non-throwing console writes (see the header).
#include "engine/base/core/console.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "engine/base/core/check.h"

namespace zt {

namespace {

std::string& first_stdout_failure() {
  static std::string reason;
  return reason;
}

void keep_stdout_failure() {
  if (first_stdout_failure().empty()) first_stdout_failure() = errno != 0 ? std::strerror(errno) : "";
}

}  // namespace

// fwrite reports a failed write by its count alone (and sets the stream's error flag, which the
// command line reads at the end): nothing is thrown.
void print_stdout(std::string_view text) {
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), stdout) < text.size()) keep_stdout_failure();
}

bool flush_stdout() {
  errno = 0;
  if (std::fflush(stdout) == 0) return true;
  keep_stdout_failure();
  return false;
}

std::string stdout_failure_reason() { return first_stdout_failure(); }

namespace {

// Whether stdout and stderr reach one file (2>&1, a batch system's log, a terminal). Only then is
// the order between them seen, and only then is stdout flushed first: flushing a separate stdout
// whose reader left (`| head`) would raise SIGPIPE before the error line is written, and one on
// a full disk would spend its error on the flush.
bool stdout_shares_stderr() {
  static const bool shared = [] {
    struct stat out {
    }, err{};
    return ::fstat(::fileno(stdout), &out) == 0 && ::fstat(::fileno(stderr), &err) == 0 && out.st_dev == err.st_dev &&
           out.st_ino == err.st_ino;
  }();
  return shared;
}

}  // namespace

void print_stderr(std::string_view text) {
  // What stdout holds so far goes first where both land in one log: a start-up error after the
  // config lines comes after them, where a reader of the log's end looks, not before them because
  // stdout was still buffered.
  if (stdout_shares_stderr()) std::fflush(stdout);
  [[maybe_unused]] const std::size_t written = std::fwrite(text.data(), 1, text.size(), stderr);
}

std::string error_line(std::string_view message) {
  constexpr std::string_view kCommand = "zerotrain ";
  if (message.starts_with(kCommand)) message.remove_prefix(kCommand.size());
  return fmt::format("zerotrain: error: {}\n", one_line(message));  // a library's message too
}

}  // namespace zt
