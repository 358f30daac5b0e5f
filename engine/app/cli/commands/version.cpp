// `zerotrain version`: version, build features and the BLAS the CPU backend loaded.
#include <fmt/format.h>

#include "engine/app/cli/commands/arg_parser.h"
#include "engine/app/cli/commands/commands.h"
#include "engine/base/core/build_info.h"
#include "kernels/compute_backend.h"

namespace zt::cli {

int version_main(const std::vector<std::string>& args) {
  ArgParser parser("version", "Print the version, build features and the BLAS in use.");
  if (!parser.parse(args)) {
    fmt::print("{}", parser.help_text());
    return 0;
  }
  fmt::print("zerotrain {}\n", build_description());
  const auto& blas = cpu_blas_description();
  fmt::print("cpu blas: {} core={} ({}), {}\n", blas.library_path, blas.core_name, blas.core_type_source, blas.config);
  fmt::print("{}\n", cuda_backend_summary());
  return 0;
}

}  // namespace zt::cli
