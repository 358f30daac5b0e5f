// Non-throwing console writes (see the header).
#include "engine/base/core/console.h"

#include <cstdio>

#include "engine/base/core/check.h"

namespace zt {

// fwrite reports a failed write by its count alone (and sets the stream's error flag, which the
// command line reads at the end): nothing is thrown.
void print_stdout(std::string_view text) {
  [[maybe_unused]] const std::size_t written = std::fwrite(text.data(), 1, text.size(), stdout);
}

void print_stderr(std::string_view text) {
  // What stdout holds so far goes first: in a log taking both (2>&1, a batch system's), a start-up
  // error after the config lines comes after them, where a reader of the log's end looks, not before
  // them because stdout was still buffered.
  std::fflush(stdout);
  [[maybe_unused]] const std::size_t written = std::fwrite(text.data(), 1, text.size(), stderr);
}

std::string error_line(std::string_view message) {
  constexpr std::string_view kCommand = "zerotrain ";
  if (message.starts_with(kCommand)) message.remove_prefix(kCommand.size());
  return fmt::format("zerotrain: error: {}\n", one_line(message));  // a library's message too
}

}  // namespace zt
