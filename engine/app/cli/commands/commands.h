// The sub-commands of the zerotrain binary. Each returns the process exit code: 0 success,
// 2 usage or config error, 1 runtime failure (run_command_line maps exceptions to these).
#pragma once

#include <string>
#include <vector>

namespace zt::cli {

int train_main(const std::vector<std::string>& args);
int prepare_main(const std::vector<std::string>& args);
int sample_main(const std::vector<std::string>& args);
int eval_main(const std::vector<std::string>& args);
int debug_state_main(const std::vector<std::string>& args);
int memory_main(const std::vector<std::string>& args);
int plan_main(const std::vector<std::string>& args);
int version_main(const std::vector<std::string>& args);
int ckpt_main(const std::vector<std::string>& args);

// Text for standard error, written whatever becomes of the write: fmt::print throws where the
// stream cannot be written (closed, a full disk), and the throw from an error's own line, or from
// the warning at a run's end, ended the process with SIGABRT (exit 134) where neither stream could
// be written, a crash in place of the command's exit code.
void print_stderr(const std::string& text);

// `zerotrain ARGS...` (argv without the program name): the usage without a command, else the
// command's exit code, an exception printed as one line ("zerotrain: error: ...") and mapped to 2
// (InputError) or 1. main() is this; a program that registers a model family first may call it.
int run_command_line(const std::vector<std::string>& all);

}  // namespace zt::cli
