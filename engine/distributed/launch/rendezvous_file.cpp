// The shared-file rendezvous: rank 0 writes its blob to a file every rank can see, and the ranks
// acknowledge it with files of their own, so that nothing is left behind once all have read it.
// See [Note: file rendezvous].
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <optional>
#include <random>
#include <set>

#include "engine/base/core/check.h"
#include "engine/distributed/launch/rendezvous_methods.h"

namespace zt::detail {

namespace {

// [Note: file rendezvous]
// Rank 0 writes <path> (magic, world size, blob size, a random nonce, its job key, the blob) by
// rename, so it appears whole; a rank of another job (another key) waits on as if it were not there. Rank r reads it
// and writes <path>.ack<r> holding the nonce and a token of its own, then waits for <path> to vanish. Rank 0, once
// every ack carries its nonce, removes the acks and then <path>: a rank that finds <path> gone and its ack gone (or
// another process's ack in its place) succeeded. When rank 0 gives up it removes only <path>; a rank that then still
// sees its own ack knows rank 0 failed, removes the ack and fails too. (A second process given rank r that makes its
// ack in the moment between rank 0 removing the first one's and removing <path> cannot tell that from rank 0 giving
// up, and says both; the first one's token tells it that its own was taken.) So nothing is left behind unless rank 0 is
// killed; a next run's rank 0 refuses to start over its leftovers, since the other ranks would take a stale id for the
// new one. A rank that refuses <path> (another world size, a rank claimed twice) says why in <path>.refused before it
// fails, the first refusal kept: rank 0 then gives up at once, naming it, rather than wait out its timeout for a rank
// that did start, and removes it with <path> (as it does when it succeeds: a second process given a rank it had the
// ack of refused it).

// 03: acks carry a token after the nonce (02's held the nonce alone, which this rank 0 would never
// take): a rank of the other build says the file is of another version.
constexpr char kFileMagic[8] = {'Z', 'T', 'R', 'D', 'V', 'F', '0', '3'};
constexpr std::size_t kFileHeaderBytes = sizeof(kFileMagic) + 4 + 4 + 8 + 4;

// open(), not stat(): on NFS an open revalidates the name (close-to-open consistency).
bool file_exists(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) ::close(fd);
  return fd >= 0;
}

// The whole file, or nothing when it does not exist (yet).
std::optional<std::vector<std::uint8_t>> read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::vector<std::uint8_t> bytes;
  std::uint8_t chunk[4096];
  ssize_t n = 0;
  // A signal during the read (EINTR) is no missing file: read on.
  while ((n = ::read(fd, chunk, sizeof(chunk))) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) bytes.insert(bytes.end(), chunk, chunk + n);
  }
  ::close(fd);
  if (n < 0) return std::nullopt;
  return bytes;
}

// Writes all of `bytes` to `fd` (none where it did not open) and closes it; "" on success, else
// the reason.
std::string write_and_close(int fd, const std::vector<std::uint8_t>& bytes) {
  bool ok = fd >= 0;
  for (std::size_t done = 0; ok && done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    ok = n > 0 || (n < 0 && errno == EINTR);
    if (n > 0) done += static_cast<std::size_t>(n);
  }
  std::string error = ok ? "" : errno_text();
  if (fd >= 0 && ::close(fd) != 0 && error.empty()) error = errno_text();
  return error;
}

// Renamed into place whole, so a reader never sees part of it; not synced (as ckpt's durable
// writes are, a layer above this one): the file lives only while the job starts, and a power loss
// ends that job anyway.
void write_file_atomically(const std::string& path, const std::vector<std::uint8_t>& bytes, const char* where) {
  const std::string tmp = fmt::format("{}.tmp{}", path, ::getpid());
  std::string error = write_and_close(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), bytes);
  if (error.empty() && ::rename(tmp.c_str(), path.c_str()) != 0) error = errno_text();
  if (!error.empty()) {
    ::unlink(tmp.c_str());
    throw_runtime_error("rendezvous via file {}: {} cannot write {}: {}", path, where, tmp, error);
  }
}

// A rank's acknowledgement: made, never replaced (O_EXCL), so a second process given this rank
// finds it there; false where it exists. Written in place rather than renamed: rank 0 takes an
// ack only once it holds all its bytes (nonce and token), so a partial one is merely not yet there. (No
// hard link either: some shared filesystems have none.)
bool create_ack(const std::string& path, const std::vector<std::uint8_t>& bytes, const char* where) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST) return false;
  if (const std::string error = write_and_close(fd, bytes); !error.empty()) {
    if (fd >= 0) ::unlink(path.c_str());
    throw_runtime_error("rendezvous via file {}: {} cannot write {}: {}", path, where, path, error);
  }
  return true;
}

// A folder named as the rendezvous file (its job's folder rather than a file in it): said, where
// rank 0 would call it an earlier run's leftover and the others wait out their timeout.
void refuse_directory(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    throw_input_error("rendezvous file {} is a directory: name a file in it (e.g. file:{}/rendezvous)", path, path);
  }
}

std::string ack_path(const std::string& path, int rank) { return fmt::format("{}.ack{}", path, rank); }
std::string refusal_path(const std::string& path) { return path + ".refused"; }

// An ack: rank 0's nonce, then this process's token.
constexpr std::size_t kAckBytes = 16;

std::uint64_t random_token() {
  std::uint64_t token = std::random_device{}();
  return (token << 32) ^ static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()) ^
         static_cast<std::uint64_t>(::getpid());
}

// A rank's refusal of rank 0's file, where rank 0 looks for it ([Note: file rendezvous]); the first
// refusal of the job is kept (O_EXCL), and a refusal that cannot be written leaves rank 0 its
// timeout, as before. Where rank 0 was done by then (its file gone: it finished, or gave up, and
// removed the refusals there were), this one's is removed again: nobody would, and it would stop
// the next run's rank 0.
void leave_refusal(const std::string& path, int rank, const std::string& why) {
  const std::string text = fmt::format("rank {}: {}", rank, why);
  const int fd = ::open(refusal_path(path).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  const bool made = fd >= 0;
  (void)write_and_close(fd, std::vector<std::uint8_t>(text.begin(), text.end()));
  if (made && !file_exists(path)) ::unlink(refusal_path(path).c_str());
}

}  // namespace

std::vector<std::uint8_t> share_by_file_rank0(const LaunchInfo& launch, const RendezvousOptions& options,
                                              const std::vector<std::uint8_t>& blob) {
  const std::string& path = options.file_path;
  refuse_directory(path);
  for (int r = 0; r <= launch.world_size; ++r) {
    const std::string leftover = r == 0 ? path : r == launch.world_size ? refusal_path(path) : ack_path(path, r);
    if (file_exists(leftover)) {
      throw_input_error(
          "rendezvous file {} exists, left by an earlier run; remove it (and {}.ack*, {}) and start again", leftover,
          path, refusal_path(path));
    }
  }
  const std::uint64_t nonce = random_token();
  const auto world = static_cast<std::uint32_t>(launch.world_size);
  const auto size = static_cast<std::uint32_t>(blob.size());
  std::vector<std::uint8_t> file(kFileHeaderBytes);
  std::memcpy(file.data(), kFileMagic, 8);
  std::memcpy(file.data() + 8, &world, 4);
  std::memcpy(file.data() + 12, &size, 4);
  std::memcpy(file.data() + 16, &nonce, 8);
  const std::uint32_t key = job_key(options);
  std::memcpy(file.data() + 24, &key, 4);
  file.insert(file.end(), blob.begin(), blob.end());
  write_file_atomically(path, file, "rank 0");

  std::set<int> waiting;
  for (int r = 1; r < launch.world_size; ++r) waiting.insert(r);
  const Deadline deadline(options.timeout_s);
  for (int polls = 0; !waiting.empty(); ++polls) {
    for (auto it = waiting.begin(); it != waiting.end();) {
      const auto ack = read_file(ack_path(path, *it));
      const bool acked = ack && ack->size() == kAckBytes && std::memcmp(ack->data(), &nonce, 8) == 0;
      it = acked ? waiting.erase(it) : std::next(it);
    }
    if (waiting.empty()) break;
    if (const auto refusal = read_file(refusal_path(path)); refusal && !refusal->empty()) {
      ::unlink(path.c_str());  // as when it gives up: the ranks that acknowledged fail too
      ::unlink(refusal_path(path).c_str());
      throw_runtime_error("rendezvous via file {}: a rank refused it, so rank 0 gives up: {}", path,
                          std::string(refusal->begin(), refusal->end()));
    }
    if (deadline.passed()) {
      ::unlink(path.c_str());  // the ranks that acknowledged see it vanish with their ack still there
      throw_runtime_error(
          "rendezvous via file {}: rank 0 timed out after {:g} s waiting for rank(s) {} of {} to "
          "read it (not started, or not sharing this filesystem?)",
          path, options.timeout_s, list_ranks(waiting), launch.world_size);
    }
    deadline.sleep(polls < 50 ? 10 : 100);
  }
  for (int r = 1; r < launch.world_size; ++r) ::unlink(ack_path(path, r).c_str());
  // A refusal of a second process given a rank this one had the ack of: the job goes on without
  // it, and the file would stop the next run's rank 0.
  ::unlink(refusal_path(path).c_str());
  ::unlink(path.c_str());
  return blob;
}

std::vector<std::uint8_t> share_by_file_other(const LaunchInfo& launch, const RendezvousOptions& options,
                                              std::size_t size) {
  const std::string& path = options.file_path;
  refuse_directory(path);
  const Deadline deadline(options.timeout_s);
  std::optional<std::vector<std::uint8_t>> file;
  bool other_job = false;  // the file there is another job's: its rank 0 removes it, this one's writes it
  const std::uint32_t key = job_key(options);
  auto ours = [&] {
    if (!(file = read_file(path)) || file->size() < kFileHeaderBytes) return false;
    std::uint32_t its_key = 0;
    std::memcpy(&its_key, file->data() + 24, 4);
    other_job = std::memcmp(file->data(), kFileMagic, 8) == 0 && its_key != key;
    return !other_job;
  };
  for (int polls = 0; !ours(); ++polls) {
    if (deadline.passed()) {
      throw_runtime_error("rendezvous via file {}: rank {} timed out after {:g} s waiting for rank 0 to write it{}",
                          path, launch.rank, options.timeout_s,
                          other_job ? fmt::format(" (the file there is another job's; this job: {})",
                                                  options.job.empty() ? "none named" : options.job)
                                    : "");
    }
    deadline.sleep(polls < 50 ? 10 : 100);
  }
  std::uint32_t world = 0, file_size = 0;
  std::memcpy(&world, file->data() + 8, 4);
  std::memcpy(&file_size, file->data() + 12, 4);
  if (std::memcmp(file->data(), kFileMagic, 8) != 0 || file->size() != kFileHeaderBytes + file_size) {
    throw_runtime_error("rendezvous via file {}: not a zerotrain rendezvous file (or written by another version)",
                        path);
  }
  if (world != static_cast<std::uint32_t>(launch.world_size) || file_size != size) {
    const std::string why =
        fmt::format("written by rank 0 of {} ranks ({} bytes), but this is rank {} of {} ({} bytes)", world, file_size,
                    launch.rank, launch.world_size, size);
    leave_refusal(path, launch.rank, why);
    throw_runtime_error("rendezvous via file {}: {}", path, why);
  }
  // The ack is made, never replaced: a second process given this rank finds it and says so (a
  // rename let both go on as rank r of the same world).
  const std::string ack = ack_path(path, launch.rank);
  std::vector<std::uint8_t> ack_bytes(file->begin() + 16, file->begin() + 24);
  const std::uint64_t token = random_token();
  ack_bytes.resize(kAckBytes);
  std::memcpy(ack_bytes.data() + 8, &token, 8);
  if (!create_ack(ack, ack_bytes, fmt::format("rank {}", launch.rank).c_str())) {
    // Where rank 0 still waits (for other ranks; it had this rank's ack, and finishes once it has
    // theirs, removing this refusal with its file).
    leave_refusal(
        path, launch.rank,
        fmt::format("rank {} is claimed twice (another process of this job was given the same rank)", launch.rank));
    throw_input_error(
        "rendezvous via file {}: rank {} is claimed twice ({} exists: another process of this job was given the "
        "same rank, or an earlier run left it; remove it and start again)",
        path, launch.rank, ack);
  }
  for (int polls = 0; file_exists(path); ++polls) {
    if (deadline.passed()) {
      if (read_file(ack) == ack_bytes) ::unlink(ack.c_str());  // not a second process's, made since
      throw_runtime_error(
          "rendezvous via file {}: rank {} timed out after {:g} s waiting for rank 0 to hear from "
          "every rank (one missing, or the file left from an earlier run?)",
          path, launch.rank, options.timeout_s);
    }
    deadline.sleep(polls < 50 ? 10 : 100);
  }
  // An ack that is not this process's was made after rank 0 took this one: by a second process
  // given this rank, which fails (below, in its turn).
  if (read_file(ack) == ack_bytes) {
    ::unlink(ack.c_str());
    throw_runtime_error(
        "rendezvous via file {}: rank 0 gave up before every rank had read it (or, where another process was "
        "given rank {} too, went on with that one's ack, taken before this one's was made)",
        path, launch.rank);
  }
  return {file->begin() + static_cast<std::ptrdiff_t>(kFileHeaderBytes), file->end()};
}

}  // namespace zt::detail
