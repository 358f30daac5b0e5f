// The sub-commands of the zerotrain binary. Each returns the process exit code: 0 success,
// 2 usage or config error, 1 runtime failure (main maps exceptions to these).
#pragma once

#include <string>
#include <vector>

namespace zt::cli {

int train_main(const std::vector<std::string>& args);
int prepare_main(const std::vector<std::string>& args);
int sample_main(const std::vector<std::string>& args);
int debug_state_main(const std::vector<std::string>& args);
int memory_main(const std::vector<std::string>& args);
int version_main(const std::vector<std::string>& args);
int ckpt_main(const std::vector<std::string>& args);

}  // namespace zt::cli
