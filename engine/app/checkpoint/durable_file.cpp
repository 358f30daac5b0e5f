// POSIX I/O with fsync, and zlib's crc32.
#include "engine/app/checkpoint/durable_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "engine/app/io/output_file.h"
#include "engine/base/core/check.h"

namespace zt::ckpt {

FileHandle FileHandle::create(const std::string& path) {
  FileHandle f;
  f.fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (f.fd_ < 0) throw_runtime_error("cannot create '{}': {}", path, std::strerror(errno));
  f.path_ = path;
  return f;
}

FileHandle FileHandle::hold_for_reading(const std::string& dir) {
  FileHandle f;
  f.fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (f.fd_ >= 0) {
    f.path_ = dir;
    while (::flock(f.fd_, LOCK_SH) != 0 && errno == EINTR) {}
  }
  return f;
}

bool FileHandle::still_at(const std::string& path) const {
  struct stat held {
  }, there{};
  return fd_ >= 0 && ::fstat(fd_, &held) == 0 && ::stat(path.c_str(), &there) == 0 && held.st_dev == there.st_dev &&
         held.st_ino == there.st_ino;
}

bool FileHandle::hold_exclusive(const std::string& path, FileHandle& holder, bool create) {
  FileHandle f;
  // Made, not truncated: another holder's bytes stay its own.
  f.fd_ = create ? ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644)
                 : ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // a FIFO's open must not wait
  if (f.fd_ < 0) return true;
  // Held only where another handle holds it: a file system without flock (ENOLCK, EINVAL, ENOSYS)
  // has nothing to hold, and a prune or a writer goes ahead as without the lock.
  if (::flock(f.fd_, LOCK_EX | LOCK_NB) != 0) return errno != EWOULDBLOCK;
  f.path_ = path;
  holder = std::move(f);
  return true;
}

bool FileHandle::hold_shared(const std::string& path, FileHandle& holder) {
  FileHandle f;
  f.fd_ = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);  // a FIFO's open must not wait
  if (f.fd_ < 0) return true;
  if (::flock(f.fd_, LOCK_SH | LOCK_NB) != 0) return errno != EWOULDBLOCK;  // no flock here: nothing to hold
  f.path_ = path;
  holder = std::move(f);
  return true;
}

FileHandle FileHandle::open_in(const FileHandle& dir, const std::string& name, const std::string& path) {
  FileHandle f;
  f.fd_ = dir.is_open() ? ::openat(dir.fd_, name.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)
                        : ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (f.fd_ >= 0) f.path_ = path;
  return f;
}

bool FileHandle::regular_file() const {
  struct stat st {};
  return fd_ >= 0 && ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode);
}

std::int64_t FileHandle::size() const {
  struct stat st {};
  return fd_ >= 0 && ::fstat(fd_, &st) == 0 ? static_cast<std::int64_t>(st.st_size) : 0;
}

FileHandle FileHandle::open_read(const std::string& path) {
  FileHandle f;
  f.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd_ < 0) throw_input_error("{}: cannot open: {}", path, std::strerror(errno));
  f.path_ = path;
  return f;
}

FileHandle::~FileHandle() {
  if (fd_ >= 0) ::close(fd_);
}

FileHandle& FileHandle::operator=(FileHandle&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

void FileHandle::write_at(const void* data, std::int64_t bytes, std::int64_t offset) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd_, p, static_cast<std::size_t>(bytes), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw_runtime_error("write to '{}' failed: {}", path_, n < 0 ? std::strerror(errno) : "no progress");
    p += n;
    bytes -= n;
    offset += n;
  }
}

void FileHandle::read_at(void* data, std::int64_t bytes, std::int64_t offset) const {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, p, static_cast<std::size_t>(bytes), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_runtime_error("read of '{}' failed: {}", path_, std::strerror(errno));
    if (n == 0) throw_input_error("{}: truncated (ends before byte {})", path_, offset + bytes);
    p += n;
    bytes -= n;
    offset += n;
  }
}

void FileHandle::sync() {
  if (::fsync(fd_) != 0) throw_runtime_error("fsync of '{}' failed: {}", path_, std::strerror(errno));
}

void FileHandle::close() {
  if (fd_ >= 0 && ::close(fd_) != 0) {
    fd_ = -1;
    throw_runtime_error("close of '{}' failed: {}", path_, std::strerror(errno));
  }
  fd_ = -1;
}

void sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_runtime_error("cannot open directory '{}': {}", dir, std::strerror(errno));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw_runtime_error("fsync of directory '{}' failed: {}", dir, std::strerror(errno));
}

std::string rename_target(const std::string& path, std::string_view what) {
  std::error_code ec;
  if (!std::filesystem::is_symlink(std::filesystem::symlink_status(path, ec))) return path;
  std::string target = std::filesystem::weakly_canonical(path, ec).string();
  if (ec) throw_input_error("{} {}: cannot follow the link: {}", what, path, ec.message());
  return target;
}

void write_file_synced(const std::string& path, const std::string& text) {
  FileHandle f = FileHandle::create(path);
  f.write_at(text.data(), static_cast<std::int64_t>(text.size()), 0);
  f.sync();
  f.close();
}

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = staging_path(path);
  try {
    write_file_synced(tmp, text);
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      throw_runtime_error("cannot rename '{}' to '{}': {}", tmp, path, std::strerror(errno));
    }
  } catch (...) {
    // A full disk leaves no partial .tmp behind; unlink, not remove: a folder standing under the
    // staging name (what made the write fail) is not this function's to delete.
    ::unlink(tmp.c_str());
    throw;
  }
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  sync_dir(parent.empty() ? "." : parent.string());
}

std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::int64_t bytes) {
  const auto* p = static_cast<const Bytef*>(data);
  while (bytes > 0) {  // zlib takes uInt lengths
    const uInt n = static_cast<uInt>(std::min<std::int64_t>(bytes, 1 << 30));
    crc = static_cast<std::uint32_t>(::crc32(crc, p, n));
    p += n;
    bytes -= n;
  }
  return crc;
}

std::uint32_t crc32_concat(std::uint32_t crc_a, std::uint32_t crc_b, std::int64_t bytes_b) {
  return static_cast<std::uint32_t>(::crc32_combine(crc_a, crc_b, static_cast<z_off_t>(bytes_b)));
}

}  // namespace zt::ckpt
