// Input files are regular files (see the header).
#include "engine/app/io/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

std::string read_whole_input(const std::string& path, std::string_view what, std::int64_t limit,
                             std::string_view advice) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw_input_error("{} {}: cannot open: {}", what, path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode))) {
    ::close(fd);
    require_regular_file(path, what);  // names what it is instead
    throw_input_error("{} {}: not a regular file", what, path);
  }
  const auto too_large = [&] {
    ::close(fd);
    if (!advice.empty()) throw_input_error("{} {}: larger than {} MiB: {}", what, path, limit >> 20, advice);
    throw_input_error("{} {}: larger than {} MiB, more than any such input holds: not read", what, path, limit >> 20);
  };
  if (S_ISREG(st.st_mode) && st.st_size > limit) too_large();
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);  // a pipe's writer may be slower than us
  std::string text;
  if (S_ISREG(st.st_mode)) text.reserve(static_cast<std::size_t>(st.st_size));  // no doubling past the file
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw_input_error("{} {}: read failed: {}", what, path, std::strerror(err));
    }
    if (n == 0) break;
    if (static_cast<std::int64_t>(text.size()) + n > limit) too_large();
    text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (S_ISFIFO(st.st_mode) && text.empty()) {
    throw_input_error(
        "{} {}: is a FIFO that nothing writes (nothing to read); give a regular file or a pipe with a writer", what,
        path);
  }
  return text;
}

}  // namespace zt
