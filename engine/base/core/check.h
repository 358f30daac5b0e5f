// Error reporting for the whole engine: one exception type per audience and one macro family.
// ZT_CHECK guards internal invariants (file:line, the failed condition, a formatted message);
// InputError (exit 2) carries the one-line messages users see for bad input, RuntimeError (exit 1)
// those of what failed while running (a disk, a peer), InternalError a broken invariant.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace zt {

// A broken invariant inside the engine: a bug, reported with file:line.
class InternalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `text` as one line: each control character (a newline, a NUL, an escape in a path a user gave)
// written as \n, \t, \r or \xNN, so an error naming that path stays one line and what(), a C
// string, does not end at the NUL (both cut the message, or split it, before).
inline std::string one_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte != 0x7f) {
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += fmt::format("\\x{:02x}", byte);
    }
  }
  return out;
}

// Bad user input (config, data file, checkpoint, command line). The message names the key,
// file or flag at fault and is printed as is, on one line (one_line); the CLI exits with code 2.
class InputError : public std::runtime_error {
 public:
  explicit InputError(std::string_view message) : std::runtime_error(one_line(message)) {}
};

// A failure at run time that is not the user's input (I/O error, resource exhaustion); exit code 1.
// One line too.
class RuntimeError : public std::runtime_error {
 public:
  explicit RuntimeError(std::string_view message) : std::runtime_error(one_line(message)) {}
};

// The same error on every rank of a job, agreed through a collective (on_every_rank), which has
// printed the job's one line on rank 0 already: every rank exits with its code in silence.
class AgreedInputError : public InputError {
 public:
  using InputError::InputError;
};
class AgreedRuntimeError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

template <typename... Args>
[[noreturn]] void throw_input_error(fmt::format_string<Args...> f, Args&&... args) {
  throw InputError(fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void throw_runtime_error(fmt::format_string<Args...> f, Args&&... args) {
  throw RuntimeError(fmt::format(f, std::forward<Args>(args)...));
}

namespace detail {
[[noreturn]] inline void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
  throw InternalError(fmt::format("{}:{}: check failed: {}{}{}", file, line, cond, msg.empty() ? "" : ": ", msg));
}
}  // namespace detail

}  // namespace zt

// ZT_CHECK(cond) or ZT_CHECK(cond, "format {}", value): internal invariant with file:line.
#define ZT_CHECK(cond, ...)                                                                 \
  do {                                                                                      \
    if (!(cond)) [[unlikely]] {                                                             \
      ::zt::detail::check_failed(__FILE__, __LINE__, #cond, ::fmt::format("" __VA_ARGS__)); \
    }                                                                                       \
  } while (0)
