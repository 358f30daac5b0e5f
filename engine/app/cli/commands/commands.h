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

// Under a launcher every rank would print the same (`mpirun -np 2 zerotrain memory --json` printed two
// JSON documents): true on a rank past 0, which prints nothing, saying so on stderr where the
// launcher is not MPI's (a rank variable left in the environment: ZT_RANK=1, a torchrun worker's
// RANK). Rank 0, or no launcher: false.
bool quiet_past_rank_zero(const char* command);

// `zerotrain ARGS...` (argv without the program name): the usage without a command, else the
// command's exit code, an exception printed as one line ("zerotrain: error: ...") and mapped to 2
// (InputError) or 1. main() is this; a program that registers a model family first may call it.
int run_command_line(const std::vector<std::string>& all);

}  // namespace zt::cli
