// Input files are regular files (see the header).
#include "engine/app/io/input_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "engine/base/core/check.h"

namespace zt {

namespace {

// The file's kind for a refusal ("a FIFO"), or "" for a regular file or none at all.
std::string_view kind_of(const std::string& path, std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return "";
    throw_input_error("{} {}: cannot read: {}", what, path, std::strerror(errno));
  }
  if (S_ISREG(st.st_mode)) return "";
  return S_ISDIR(st.st_mode)    ? "a directory"
         : S_ISFIFO(st.st_mode) ? "a FIFO"
         : S_ISCHR(st.st_mode)  ? "a character device"
         : S_ISBLK(st.st_mode)  ? "a block device"
         : S_ISSOCK(st.st_mode) ? "a socket"
                                : "not a file";
}

}  // namespace

void require_regular_file(const std::string& path, std::string_view what) {
  const std::string_view kind = kind_of(path, what);
  if (!kind.empty()) throw_input_error("{} {}: is {}, not a regular file", what, path, kind);
}

void refuse_blocking_file(const std::string& path, std::string_view what) {
  const std::string_view kind = kind_of(path, what);
  if (kind == "a FIFO" || kind == "a socket") {
    throw_input_error("{} {}: is {}, whose open would wait for another process; give a regular file", what, path, kind);
  }
}

}  // namespace zt
