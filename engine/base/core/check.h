// Error reporting for the whole engine: one exception type per audience and one macro family.
// ZT_CHECK guards internal invariants (file:line, the failed condition, a formatted message);
// ConfigError / InputError carry the one-line messages that users see for bad input.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace zt {

// A broken invariant inside the engine: a bug, reported with file:line.
class InternalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad user input (config, data file, checkpoint, command line). The message names the key,
// file or flag at fault and is printed as is; the CLI exits with code 2 for it.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A failure at run time that is not the user's input (I/O error, resource exhaustion); exit code 1.
class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
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
