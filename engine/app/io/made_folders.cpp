// Folders made on the way to an output (see the header).
#include "engine/app/io/made_folders.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <system_error>

namespace zt {

namespace fs = std::filesystem;

std::vector<fs::path> missing_folders(const std::string& path) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  if (ec) return {};
  std::vector<fs::path> missing;
  fs::path prefix;
  for (const fs::path& part : absolute) {
    if (part.empty()) continue;  // a trailing separator
    prefix /= part;
    if (part == "." || part == ".." || part == absolute.root_directory() || part == absolute.root_name()) continue;
    // A lexical prefix would not do: "runs/new/.." names runs/new's parent once runs/new is made,
    // and is missing (so would be removed) while runs/new is.
    const fs::path resolved = fs::weakly_canonical(prefix, ec);
    if (ec) return {};
    // symlink_status: a link, even a dangling one, is there (create_directories does not replace it).
    const fs::file_type type = fs::symlink_status(resolved, ec).type();
    if (type != fs::file_type::not_found) {
      if (ec) return {};
      continue;
    }
    ec.clear();
    if (std::find(missing.begin(), missing.end(), resolved) == missing.end()) missing.push_back(resolved);
  }
  return missing;
}

void remove_empty_folders(const std::vector<fs::path>& made) {
  // A folder is made after its parent, so the list reversed has every child before its parent.
  for (auto it = made.rbegin(); it != made.rend(); ++it) {
    std::error_code ec;
    if (fs::symlink_status(*it, ec).type() != fs::file_type::directory) continue;
    fs::remove(*it, ec);  // rmdir: refused (and ignored) where the folder holds anything
  }
}

FoldersForOutput::FoldersForOutput(const std::string& path) : made_(missing_folders(path)) {
  for (auto it = made_.rbegin(); it != made_.rend(); ++it) {
    on_signal_.push_back(std::make_unique<PartialOutput>(it->string(), /*folder=*/true));
  }
  fs::create_directories(path, error_);
  // Tests stop the command at this moment, which once left an empty folder behind (it was
  // registered only after create_directories).
  if (std::getenv("ZT_TEST_SIGNAL_AFTER_FOLDERS") != nullptr) std::raise(SIGINT);
}

FoldersForOutput::~FoldersForOutput() { remove_empty_folders(made_); }

void FoldersForOutput::keep() {
  made_.clear();
  on_signal_.clear();
}

}  // namespace zt
