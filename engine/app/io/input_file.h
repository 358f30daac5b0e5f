// A file the user names as input (a config, a JSON, token or text file, a run's metrics.jsonl)
// must be a regular file where it exists: a FIFO blocks its open until a writer comes (a hang
// that ignores a first SIGTERM), a device such as /dev/zero reads without end, a directory opens
// and then fails with a stream's exception.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace zt {

// Throws InputError "<what> <path>: is a FIFO, not a regular file" (a directory, a device, a
// socket), or naming why it cannot be looked at (a symlink loop, no permission on a folder above
// it). A path that does not exist is left to the caller's open, whose message names it.
void require_regular_file(const std::string& path, std::string_view what);

// A text input read whole (a config, a JSON file, prepare's text): a regular file, or a pipe with
// a writer (`--config <(jq ...)`, `/dev/stdin` fed by one). Opened without blocking, so a named
// FIFO nothing writes is refused ("is a FIFO that nothing writes") instead of hanging; devices and
// directories are refused as require_regular_file refuses them. InputError naming `what` and
// `path`, also when it cannot be opened, and where it holds more than kMaxWholeInputBytes (a pipe
// that never ends, `<(yes)`, grew until the allocation failed: std::bad_alloc).
inline constexpr std::int64_t kMaxWholeInputBytes = std::int64_t{256} << 20;
// `limit` another bound than kMaxWholeInputBytes (prepare's text, which may be a gigabyte), said in
// the refusal with `advice`.
std::string read_whole_input(const std::string& path, std::string_view what, std::int64_t limit = kMaxWholeInputBytes,
                             std::string_view advice = {});

}  // namespace zt
