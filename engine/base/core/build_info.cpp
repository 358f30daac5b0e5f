// The build's description (see the header).
#include "engine/base/core/build_info.h"

#include <fmt/format.h>

#include "zt_build_commit.h"  // generated in the build folder (tools/build_commit.cmake)

namespace zt {

std::string build_description() { return fmt::format("{} (commit {})", ZT_VERSION, ZT_BUILD_COMMIT); }

}  // namespace zt
