// Text for standard output and standard error that a failed write cannot turn into an exception.
// fmt::print throws where fwrite writes less than asked: a line longer than stdio's buffer into a
// pipe whose reader ended, a full disk or a closed stream. `train` outlives its output (the run's
// record is metrics.jsonl; run_command_line says at the end that lines were lost), and an error's
// own line must not end the process with SIGABRT where stderr cannot be written.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>

namespace zt {

void print_stdout(std::string_view text);
void print_stderr(std::string_view text);

// Flushes stdout; false where that failed. The first failed write's reason (print_stdout's or a
// flush's) is kept for stdout_failure_reason, "" until one fails: the stream keeps only a flag, and
// errno has moved on by the time a command checks it at its end.
bool flush_stdout();
std::string stdout_failure_reason();

// An error's one line, "zerotrain: error: MESSAGE\n": a message that names its command ("zerotrain
// sample: ...") names it once ("zerotrain: error: sample: ...").
std::string error_line(std::string_view message);

// fmt::print's forms, through the two above.
template <typename... Args>
void print_out(fmt::format_string<Args...> format, Args&&... args) {
  print_stdout(fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void print_err(fmt::format_string<Args...> format, Args&&... args) {
  print_stderr(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace zt
