// Which processes hold a flock on a file or folder, for a refusal to name them: where a prepare or
// an export finds its --out held, "another zerotrain command" alone left the user to hunt for it.
#pragma once

#include <string>
#include <vector>

namespace zt {

// The processes /proc/locks shows holding a flock on `path` (matched by its device and inode) that
// still have it open, as "pid N (COMMAND LINE)", each once, this process left out, at most 4 (then
// "N more"); empty where none shows (a holder in another pid namespace or of another user may show
// none, a locker that exited leaving it to a child is not named, and a system without /proc/locks
// tells nothing).
std::vector<std::string> flock_holders(const std::string& path);

// " by pid N (COMMAND LINE), ..." for a message ("... is held by pid N (...)"), "" where
// flock_holders finds none.
std::string flock_holders_note(const std::string& path);

}  // namespace zt
