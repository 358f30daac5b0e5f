// Token files are read through memory maps (token_file.h): a file truncated or rewritten in place
// while a run reads it (`cp new.bin train.bin` over the shard) makes the next read of a lost page
// raise SIGBUS, which ended the process with no word. The maps are registered here, and a SIGBUS
// handler names the file whose map the fault hit (one line, exit 2); a fault anywhere else keeps
// the default action.
#pragma once

#include <cstddef>
#include <string>

namespace zt::data {

// Registers [start, start + bytes) as `path`'s map (installs the handler on first use). At most
// kMaxMappedFiles at once; beyond that a map is simply not named.
void register_mapped_file(const void* start, std::size_t bytes, const std::string& path);
// Before its munmap.
void unregister_mapped_file(const void* start);

inline constexpr int kMaxMappedFiles = 1024;

}  // namespace zt::data
