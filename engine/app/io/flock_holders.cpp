// Which processes hold a flock on a path (see the header).
#include "engine/app/io/flock_holders.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace zt {

namespace {

constexpr std::size_t kMostHolders = 4;
constexpr std::size_t kMostCommandChars = 120;

// /proc/PID/cmdline's arguments joined by spaces, cut to kMostCommandChars; "" where unreadable.
std::string command_line(long pid) {
  std::ifstream in(fmt::format("/proc/{}/cmdline", pid), std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!text.empty() && text.back() == '\0') text.pop_back();
  for (char& c : text) {
    if (c == '\0') c = ' ';
  }
  if (text.size() > kMostCommandChars) text = text.substr(0, kMostCommandChars) + "...";
  return text;
}

// Whether process `pid` has the file of `st` open: /proc/locks names the process that took a lock,
// which may have exited since and left it to a child that inherited the descriptor (or reused pid).
bool has_open(long pid, const struct stat& st) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(fmt::format("/proc/{}/fd", pid), ec), end; !ec && it != end;
       it.increment(ec)) {
    struct stat open {};
    if (::stat(it->path().c_str(), &open) == 0 && open.st_dev == st.st_dev && open.st_ino == st.st_ino) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> flock_holders(const std::string& path) {
  std::vector<std::string> holders;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return holders;
  // Each line: "N: FLOCK  ADVISORY  WRITE PID MAJOR:MINOR:INODE START END" (major and minor in
  // hex); a waiter's line has "->" after its number and holds nothing.
  std::ifstream locks("/proc/locks");
  const long self = static_cast<long>(::getpid());
  std::set<long> seen;
  std::size_t more = 0;  // past kMostHolders
  for (std::string line; std::getline(locks, line);) {
    std::istringstream fields(line);
    std::string number, kind, advisory, mode, where;
    long pid = 0;
    if (!(fields >> number >> kind) || kind != "FLOCK" || !(fields >> advisory >> mode >> pid >> where)) continue;
    unsigned major_id = 0, minor_id = 0;
    unsigned long long inode = 0;
    if (std::sscanf(where.c_str(), "%x:%x:%llu", &major_id, &minor_id, &inode) != 3) continue;
    if (inode != st.st_ino || major_id != major(st.st_dev) || minor_id != minor(st.st_dev)) continue;
    if (pid <= 0 || pid == self || !seen.insert(pid).second || !has_open(pid, st)) continue;
    if (holders.size() == kMostHolders) {
      ++more;
      continue;
    }
    const std::string command = command_line(pid);
    holders.push_back(command.empty() ? fmt::format("pid {}", pid) : fmt::format("pid {} ({})", pid, command));
  }
  if (more > 0) holders.push_back(fmt::format("{} more", more));
  return holders;
}

std::string flock_holders_note(const std::string& path) {
  const std::vector<std::string> holders = flock_holders(path);
  return holders.empty() ? "" : fmt::format(" by {}", fmt::join(holders, ", "));
}

}  // namespace zt
