// Staging names for outputs written whole (see the header).
#include "engine/app/io/output_file.h"

#include <fmt/format.h>

#include <climits>
#include <filesystem>
#include <functional>

namespace zt {

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

}  // namespace zt
