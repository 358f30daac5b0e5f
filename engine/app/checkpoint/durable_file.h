// POSIX file primitives the checkpoint code needs for crash safety and ranged reads: full
// pwrite/pread loops, fsync of files and directories, and write-temp-fsync-rename of small files.
// Errors are RuntimeError (I/O failed) or InputError (a file to read is missing or short).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace zt::ckpt {

// An open file descriptor, closed on destruction.
class FileHandle {
 public:
  FileHandle() = default;
  static FileHandle create(const std::string& path);     // write-only, truncates
  static FileHandle open_read(const std::string& path);  // InputError naming the file if absent
  // `name` opened for reading in the directory `dir` holds (openat: the same directory however it
  // is renamed meanwhile), or at `path` where `dir` is not open; not open where it cannot be (errno
  // says why). Without waiting for a FIFO's writer (O_NONBLOCK: nothing to a regular file).
  static FileHandle open_in(const FileHandle& dir, const std::string& name, const std::string& path);
  // The open file's type and size (fstat); false, 0 where that fails.
  bool regular_file() const;
  std::int64_t size() const;
  // A checkpoint directory held for reading (a shared flock) while the handle lives, which keep-last
  // leaves in place (apply_keep_last); not open where the directory cannot be opened.
  static FileHandle hold_for_reading(const std::string& dir);
  // Whether no other handle holds `path` (a directory, or a file, made where `create` and absent);
  // holds it exclusively in `holder` until that handle ends if so. True where it cannot be opened:
  // nothing to hold, and what comes next says what is wrong with it.
  static bool hold_exclusive(const std::string& path, FileHandle& holder, bool create = false);
  // The same, shared, for a directory: false where a handle holds it exclusively (a prepare writing
  // a dataset folder), without waiting for it. Where the file system has no flock (or on NFS, where
  // a directory's flock is the client's own), nothing is held and true is returned.
  static bool hold_shared(const std::string& path, FileHandle& holder);
  ~FileHandle();
  FileHandle(FileHandle&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  FileHandle& operator=(FileHandle&& o) noexcept;
  FileHandle(const FileHandle&) = delete;
  FileHandle& operator=(const FileHandle&) = delete;

  bool is_open() const { return fd_ >= 0; }
  // Whether this handle's file or directory is still the one at `path` (not renamed or removed
  // since it was opened): a hold taken as keep_last moved its checkpoint away holds nothing there.
  bool still_at(const std::string& path) const;
  const std::string& path() const { return path_; }
  void write_at(const void* data, std::int64_t bytes, std::int64_t offset);
  // Reads exactly `bytes`; InputError naming the file when it ends first (truncated).
  void read_at(void* data, std::int64_t bytes, std::int64_t offset) const;
  void sync();
  void close();

 private:
  int fd_ = -1;
  std::string path_;
};

// fsync of a directory, so the entries created or renamed in it survive a power loss.
void sync_dir(const std::string& dir);
// Writes `text` into `path` itself and fsyncs it: for a name that is already a staging one
// (StagedFiles, the staging file below).
void write_file_synced(const std::string& path, const std::string& text);
// Writes `text` to path via its staging file (staging_path: path.tmp within NAME_MAX): write,
// fsync, rename, fsync the directory.
void write_file_atomically(const std::string& path, const std::string& text);
// Where a file replaced by a rename must be renamed to so that a symlink stays a symlink: the file
// `path` names through its link (made canonical), or `path` itself. InputError naming `what` when
// the link cannot be followed.
std::string rename_target(const std::string& path, std::string_view what);
// zlib's crc32, continuing from `crc` (0 to start).
std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::int64_t bytes);
// crc32 of A followed by B, from crc32(A), crc32(B) and B's length.
std::uint32_t crc32_concat(std::uint32_t crc_a, std::uint32_t crc_b, std::int64_t bytes_b);

}  // namespace zt::ckpt
