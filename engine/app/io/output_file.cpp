// Staging names for outputs written whole (see the header).
#include "engine/app/io/output_file.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>

#include "engine/app/checkpoint/durable_file.h"
#include "engine/app/io/input_file.h"
#include "engine/base/core/check.h"

namespace zt {

void check_output_path(const std::string& path, std::string_view what) {
  namespace fs = std::filesystem;
  require_regular_file(path, what);  // where it exists: a directory, a FIFO, a device named as such
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  if (!fs::is_directory(parent, ec)) throw_input_error("{} {}: no folder {}", what, path, parent.string());
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    throw_input_error("{} {}: cannot write into {}: {}", what, path, parent.string(), std::strerror(errno));
  }
}

std::string staging_path(const std::string& path) {
  constexpr std::string_view kSuffix = ".tmp";
  const std::filesystem::path p(path);
  const std::string name = p.filename().string();
  if (name.size() + kSuffix.size() <= NAME_MAX) return path + std::string(kSuffix);
  // Distinct targets sharing a long prefix keep distinct staging names (the hash of the whole name).
  const std::string hash = fmt::format("-{:016x}", std::hash<std::string>{}(name));
  const std::string short_name = name.substr(0, NAME_MAX - hash.size() - kSuffix.size()) + hash + std::string(kSuffix);
  return (p.parent_path() / short_name).string();
}

StagedFiles::~StagedFiles() {
  for (const Staged& f : staged_) std::remove(f.tmp.c_str());  // those not committed
}

std::string StagedFiles::stage(const std::string& path) {
  staged_.push_back({staging_path(path), path});
  return staged_.back().tmp;
}

void StagedFiles::commit(const std::string& dir) {
  const char* hook = std::getenv("ZT_TEST_EXPORT_EXIT_AFTER_RENAMES");
  int renames_left = hook != nullptr ? std::atoi(hook) : -1;
  // Each file's bytes on disk before its name: a power loss after the renames must not leave an
  // empty or partial file under a name the folder's other files agree with (a copied vocab.json
  // was never synced).
  for (const Staged& f : staged_) {
    const int fd = ::open(f.tmp.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::fsync(fd) != 0) {
      const int err = errno;
      if (fd >= 0) ::close(fd);
      throw_runtime_error("cannot sync '{}' to disk: {}", f.tmp, std::strerror(err));
    }
    ::close(fd);
  }
  for (const Staged& f : staged_) {
    if (renames_left-- == 0) std::_Exit(137);
    std::error_code ec;
    std::filesystem::rename(f.tmp, f.path, ec);
    if (ec) throw_runtime_error("cannot rename '{}' to '{}': {}", f.tmp, f.path, ec.message());
  }
  staged_.clear();
  ckpt::sync_dir(dir.empty() ? "." : dir);
}

}  // namespace zt
