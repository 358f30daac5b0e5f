// Which processes hold a flock on a file or folder, for a refusal to name them: where a prepare or
// an export finds its --out held, "another zerotrain command" alone left the user to hunt for it.
#pragma once

#include <string>
#include <vector>

namespace zt {

// The processes /proc/locks shows holding a flock on `path` (matched by its device and inode), as
// "pid N (COMMAND LINE)", this process left out, at most 4; empty where none shows (a holder in
// another pid namespace may show none, and a system without /proc/locks tells nothing).
std::vector<std::string> flock_holders(const std::string& path);

// " by pid N (COMMAND LINE), ..." for a message ("... is held by pid N (...)"), "" where
// flock_holders finds none.
std::string flock_holders_note(const std::string& path);

}  // namespace zt
