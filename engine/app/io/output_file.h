// An output written whole is staged beside its target and renamed over it, so a kill or a full
// disk never leaves a half-written file under the target's name.
#pragma once

#include <string>

namespace zt {

// The staging name for `path`, in its folder: "<name>.tmp", or, where that would be longer than
// the file system allows a name to be (a target name within 4 bytes of NAME_MAX, which the target
// itself may use), its first bytes and a hash of the whole name with ".tmp".
std::string staging_path(const std::string& path);

}  // namespace zt
