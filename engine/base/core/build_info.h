// Which build this is: the version and the source tree's commit (tools/build_commit.cmake, at every
// build). `zerotrain version` prints it, a checkpoint's manifest records the build that wrote it,
// and ranks compare it before the first step (mixed builds in one job are named as such).
#pragma once

#include <string>

namespace zt {

// "0.1.0 (commit 1a2b3c4d5e6f)", "+dirty" after the hash where tracked files had changes.
std::string build_description();

}  // namespace zt
