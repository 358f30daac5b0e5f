// `zerotrain version`: version, build features and the BLAS the CPU backend loaded.
#include <fmt/format.h>

#include "engine/cli/commands/arg_parser.h"
#include "engine/cli/commands/commands.h"
#include "kernels/cpu/blas.h"
#ifdef ZT_HAVE_CUDA
#include "kernels/cuda/device_query.h"
#endif

namespace zt::cli {

int version_main(const std::vector<std::string>& args) {
  ArgParser parser("version", "Print the version, build features and the BLAS in use.");
  if (!parser.parse(args)) {
    fmt::print("{}", parser.help_text());
    return 0;
  }
  fmt::print("zerotrain {}\n", ZT_VERSION);
  const auto& blas = cpu::blas_info();
  fmt::print("cpu blas: {} core={} ({}), {}\n", blas.library_path, blas.core_name, blas.core_type_source, blas.config);
#ifdef ZT_HAVE_CUDA
  const int n = cuda::device_count();
  fmt::print("cuda: built; {} device(s) visible{}\n", n,
             n > 0 ? ": " + cuda::device_description(0) : " (" + cuda::device_count_error() + ")");
#else
  fmt::print("cuda: not built (nvcc not found at configure time)\n");
#endif
  return 0;
}

}  // namespace zt::cli
