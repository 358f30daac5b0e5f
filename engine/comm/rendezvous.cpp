// Launch detection and the three ways rank 0 hands its blob to every rank (MPI broadcast, a file on a
// shared filesystem, a TCP socket). Every wait has a deadline, so a peer that never arrives becomes
// a one-line RuntimeError naming the method and the file or address. See [Note: file rendezvous].
#include "engine/comm/rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <set>
#include <string_view>
#include <thread>
#include <utility>

#include "engine/core/check.h"
#ifdef ZT_HAVE_MPI
#include <mpi.h>

#include <atomic>
#endif

namespace zt {

namespace {

using Clock = std::chrono::steady_clock;

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// A non-negative int, or -1 when `text` is anything else (a sign, spaces, letters, overflow).
int parse_count(std::string_view text) {
  int value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && ptr == text.data() + text.size() && value >= 0 ? value : -1;
}

int parse_env_int(const char* name, const char* text) {
  const int value = parse_count(text);
  if (value < 0) throw_input_error("{}='{}' is not a non-negative integer", name, text);
  return value;
}

struct LauncherVars {
  const char* source;
  const char* rank;
  const char* world;
  const char* local_rank;
  // Both needed to count: RANK and WORLD_SIZE may be set for other reasons, and salloc and sbatch
  // set SLURM_PROCID=0 in their shell without SLURM_NTASKS unless tasks were asked for.
  bool both_needed;
};

constexpr LauncherVars kLaunchers[] = {
    {"ZT_RANK", "ZT_RANK", "ZT_WORLD_SIZE", "ZT_LOCAL_RANK", false},
    {"OpenMPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", false},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", true},
    {"PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", false},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", true},
};

// The point in time every wait of one rendezvous counts down to.
struct Deadline {
  Clock::time_point end;
  explicit Deadline(double seconds)
      : end(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(std::min(seconds, 1e9)))) {}
  bool passed() const { return Clock::now() >= end; }
  int remaining_ms(int cap_ms = INT_MAX) const {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(ms, 0, cap_ms));
  }
  void sleep(int ms) const { std::this_thread::sleep_for(std::chrono::milliseconds(remaining_ms(ms))); }
};

std::string errno_text() { return std::strerror(errno); }

}  // namespace

LaunchInfo detect_launch() {
  for (const LauncherVars& vars : kLaunchers) {
    const char* rank_text = env(vars.rank);
    const char* world_text = env(vars.world);
    if (rank_text == nullptr && world_text == nullptr) continue;
    if (rank_text == nullptr || world_text == nullptr) {
      if (vars.both_needed) continue;
      throw_input_error("{} is set but {} is not", rank_text ? vars.rank : vars.world,
                        rank_text ? vars.world : vars.rank);
    }
    LaunchInfo info;
    info.source = vars.source;
    info.rank = parse_env_int(vars.rank, rank_text);
    info.world_size = parse_env_int(vars.world, world_text);
    if (info.world_size < 1) throw_input_error("{}={} must be at least 1", vars.world, info.world_size);
    if (info.rank >= info.world_size) {
      throw_input_error("{}={} is not below {}={}", vars.rank, info.rank, vars.world, info.world_size);
    }
    info.local_rank = info.rank;
    if (const char* local = env(vars.local_rank)) {
      info.local_rank = parse_env_int(vars.local_rank, local);
      if (info.local_rank >= info.world_size) {
        throw_input_error("{}={} is not below {}={}", vars.local_rank, info.local_rank, vars.world, info.world_size);
      }
    }
    return info;
  }
  return {};
}

namespace {

// `what` names the variable and its value for the error.
int parse_port(const std::string& what, std::string_view text) {
  const int port = parse_count(text);
  if (port < 1 || port > 65535) throw_input_error("{}: port '{}' is not a number in 1..65535", what, text);
  return port;
}

void parse_rendezvous_spec(const std::string& spec, RendezvousOptions& options) {
  if (spec == "single") {
    options.method = RendezvousMethod::kSingle;
  } else if (spec == "mpi") {
#ifndef ZT_HAVE_MPI
    throw_input_error("ZT_RENDEZVOUS=mpi, but this build has no MPI (install libopenmpi-dev and rebuild, or use "
                      "file:/shared/path or tcp:host:port)");
#endif
    options.method = RendezvousMethod::kMpi;
  } else if (spec.starts_with("file:") && spec.size() > 5) {
    options.method = RendezvousMethod::kFile;
    options.file_path = spec.substr(5);
  } else if (spec.starts_with("tcp:")) {
    const std::string address = spec.substr(4);
    std::size_t colon = address.rfind(':');
    std::string host = colon == std::string::npos ? "" : address.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (host.empty() || host.find_first_of("[]") != std::string::npos ||
        (host.find(':') != std::string::npos && address.front() != '[')) {
      throw_input_error("ZT_RENDEZVOUS='{}': expected tcp:host:port (an IPv6 address in brackets)", spec);
    }
    options.method = RendezvousMethod::kTcp;
    options.host = host;
    options.port = parse_port(fmt::format("ZT_RENDEZVOUS='{}'", spec), std::string_view(address).substr(colon + 1));
  } else {
    throw_input_error("ZT_RENDEZVOUS='{}' is not one of: mpi, file:/shared/path, tcp:host:port, single", spec);
  }
}

}  // namespace

RendezvousOptions rendezvous_from_env(const LaunchInfo& launch) {
  RendezvousOptions options;
  if (const char* timeout = env("ZT_RENDEZVOUS_TIMEOUT")) {
    char* end = nullptr;
    options.timeout_s = std::strtod(timeout, &end);
    if (*end != '\0' || !std::isfinite(options.timeout_s) || options.timeout_s <= 0) {
      throw_input_error("ZT_RENDEZVOUS_TIMEOUT='{}' is not a positive number of seconds", timeout);
    }
  }
  const bool by_mpi_launcher = launch.source == "OpenMPI" || launch.source == "Slurm" || launch.source == "PMI";
  if (const char* spec = env("ZT_RENDEZVOUS")) {
    parse_rendezvous_spec(spec, options);
  } else if (launch.world_size == 1) {
    options.method = RendezvousMethod::kSingle;
#ifdef ZT_HAVE_MPI
  } else if (by_mpi_launcher) {
    options.method = RendezvousMethod::kMpi;
#endif
  } else if (env("MASTER_ADDR") != nullptr && env("MASTER_PORT") != nullptr) {
    options.method = RendezvousMethod::kTcp;
    options.host = env("MASTER_ADDR");
    options.port = parse_port(fmt::format("MASTER_PORT='{}'", env("MASTER_PORT")), env("MASTER_PORT"));
    // torchrun's agent serves its own store on MASTER_PORT when it says so (static rendezvous).
    const char* agent_store = env("TORCHELASTIC_USE_AGENT_STORE");
    if (agent_store != nullptr && std::string_view(agent_store) == "True") {
      if (options.port == 65535) throw_input_error("MASTER_PORT=65535: torchrun holds it, and 65536 is no port");
      ++options.port;
    }
  } else {
    throw_input_error("rank {} of {} (from {}) needs a rendezvous: set ZT_RENDEZVOUS=file:/shared/path or "
                      "tcp:host:port, or MASTER_ADDR and MASTER_PORT{}",
                      launch.rank, launch.world_size, launch.source,
                      by_mpi_launcher ? " (this build has no MPI for ZT_RENDEZVOUS=mpi)" : "");
  }
  if (options.method == RendezvousMethod::kSingle && launch.world_size != 1) {
    throw_input_error("ZT_RENDEZVOUS=single, but this is rank {} of {} (from {})", launch.rank, launch.world_size,
                      launch.source);
  }
  return options;
}

std::string rendezvous_name(const RendezvousOptions& options) {
  switch (options.method) {
    case RendezvousMethod::kSingle: return "single";
    case RendezvousMethod::kMpi: return "mpi";
    case RendezvousMethod::kFile: return "file:" + options.file_path;
    case RendezvousMethod::kTcp:
      if (options.host.find(':') != std::string::npos) return fmt::format("tcp:[{}]:{}", options.host, options.port);
      return fmt::format("tcp:{}:{}", options.host, options.port);
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------- MPI
namespace {

#ifdef ZT_HAVE_MPI
// Set when a broadcast was abandoned: MPI_Finalize would then wait for it forever.
std::atomic<bool> g_mpi_abandoned{false};

void finalize_mpi_at_exit() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (!finalised && !g_mpi_abandoned.load()) MPI_Finalize();
}

std::vector<std::uint8_t> share_by_mpi(const LaunchInfo& launch, const RendezvousOptions& options,
                                       std::vector<std::uint8_t> blob, std::size_t size) {
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  if (finalised) throw_runtime_error("rendezvous via mpi: MPI was already finalised in this process");
  if (!initialised) {
    // The thread level MpiCommunicator asks for; it then finds MPI initialised and leaves it be,
    // and this process finalises it at exit.
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      throw_runtime_error("rendezvous via mpi: MPI_Init_thread failed");
    }
    std::atexit(finalize_mpi_at_exit);
  }
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (rank != launch.rank || world != launch.world_size) {
    throw_runtime_error("rendezvous via mpi: MPI says rank {} of {}, but {} says rank {} of {}", rank, world,
                        launch.source, launch.rank, launch.world_size);
  }
  ZT_CHECK(size <= static_cast<std::size_t>(INT_MAX));
  blob.resize(size);
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Ibcast(blob.data(), static_cast<int>(size), MPI_BYTE, 0, MPI_COMM_WORLD, &request);
  const Deadline deadline(options.timeout_s);
  for (int spins = 0;; ++spins) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return blob;
    if (deadline.passed()) {
      g_mpi_abandoned = true;
      throw_runtime_error("rendezvous via mpi: rank {} of {} timed out after {:g} s waiting for rank 0's broadcast",
                          launch.rank, launch.world_size, options.timeout_s);
    }
    if (spins > 1000) deadline.sleep(1);
  }
}
#else
std::vector<std::uint8_t> share_by_mpi(const LaunchInfo&, const RendezvousOptions&, std::vector<std::uint8_t>,
                                       std::size_t) {
  throw_runtime_error("rendezvous via mpi: this build has no MPI (install libopenmpi-dev and rebuild)");
}
#endif

// --------------------------------------------------------------------------------------------- file
// [Note: file rendezvous]
// Rank 0 writes <path> (magic, world size, blob size, a random nonce, the blob) by rename, so it
// appears whole. Rank r reads it and writes <path>.ack<r> holding the nonce, then waits for <path>
// to vanish. Rank 0, once every ack carries its nonce, removes the acks and then <path>: a rank that
// finds <path> gone and its ack gone succeeded. When rank 0 gives up it removes only <path>; a rank
// that then still sees its own ack knows rank 0 failed, removes the ack and fails too. So nothing is
// left behind unless rank 0 is killed; a next run's rank 0 refuses to start over its leftovers, since
// the other ranks would take a stale id for the new one.

constexpr char kFileMagic[8] = {'Z', 'T', 'R', 'D', 'V', 'F', '0', '1'};
constexpr std::size_t kFileHeaderBytes = sizeof(kFileMagic) + 4 + 4 + 8;

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
  while ((n = ::read(fd, chunk, sizeof(chunk))) > 0) bytes.insert(bytes.end(), chunk, chunk + n);
  ::close(fd);
  if (n < 0) return std::nullopt;
  return bytes;
}

void write_file_atomically(const std::string& path, const std::vector<std::uint8_t>& bytes, const char* where) {
  const std::string tmp = fmt::format("{}.tmp{}", path, ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = fd >= 0;
  for (std::size_t done = 0; ok && done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    ok = n > 0 || (n < 0 && errno == EINTR);
    if (n > 0) done += static_cast<std::size_t>(n);
  }
  const std::string error = errno_text();
  if (fd >= 0 && ::close(fd) != 0) ok = false;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throw_runtime_error("rendezvous via file {}: {} cannot write {}: {}", path, where, tmp, ok ? errno_text() : error);
  }
}

std::string ack_path(const std::string& path, int rank) { return fmt::format("{}.ack{}", path, rank); }

std::string list_ranks(const std::set<int>& ranks) {
  std::string text;
  int shown = 0;
  for (int r : ranks) {
    if (shown++ == 8) return fmt::format("{} and {} more", text, ranks.size() - 8);
    text += (text.empty() ? "" : ", ") + std::to_string(r);
  }
  return text;
}

std::vector<std::uint8_t> share_by_file_rank0(const LaunchInfo& launch, const RendezvousOptions& options,
                                              const std::vector<std::uint8_t>& blob) {
  const std::string& path = options.file_path;
  for (int r = 0; r < launch.world_size; ++r) {
    const std::string leftover = r == 0 ? path : ack_path(path, r);
    if (file_exists(leftover)) {
      throw_input_error("rendezvous file {} exists, left by an earlier run; remove it (and {}.ack*) and start again",
                        leftover, path);
    }
  }
  std::uint64_t nonce = std::random_device{}();
  nonce = (nonce << 32) ^ static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()) ^
          static_cast<std::uint64_t>(::getpid());
  const auto world = static_cast<std::uint32_t>(launch.world_size);
  const auto size = static_cast<std::uint32_t>(blob.size());
  std::vector<std::uint8_t> file(kFileHeaderBytes);
  std::memcpy(file.data(), kFileMagic, 8);
  std::memcpy(file.data() + 8, &world, 4);
  std::memcpy(file.data() + 12, &size, 4);
  std::memcpy(file.data() + 16, &nonce, 8);
  file.insert(file.end(), blob.begin(), blob.end());
  write_file_atomically(path, file, "rank 0");

  std::set<int> waiting;
  for (int r = 1; r < launch.world_size; ++r) waiting.insert(r);
  const Deadline deadline(options.timeout_s);
  for (int polls = 0; !waiting.empty(); ++polls) {
    for (auto it = waiting.begin(); it != waiting.end();) {
      const auto ack = read_file(ack_path(path, *it));
      const bool acked = ack && ack->size() == 8 && std::memcmp(ack->data(), &nonce, 8) == 0;
      it = acked ? waiting.erase(it) : std::next(it);
    }
    if (waiting.empty()) break;
    if (deadline.passed()) {
      ::unlink(path.c_str());  // the ranks that acknowledged see it vanish with their ack still there
      throw_runtime_error("rendezvous via file {}: rank 0 timed out after {:g} s waiting for rank(s) {} of {} to "
                          "read it (not started, or not sharing this filesystem?)",
                          path, options.timeout_s, list_ranks(waiting), launch.world_size);
    }
    deadline.sleep(polls < 50 ? 10 : 100);
  }
  for (int r = 1; r < launch.world_size; ++r) ::unlink(ack_path(path, r).c_str());
  ::unlink(path.c_str());
  return blob;
}

std::vector<std::uint8_t> share_by_file_other(const LaunchInfo& launch, const RendezvousOptions& options,
                                              std::size_t size) {
  const std::string& path = options.file_path;
  const Deadline deadline(options.timeout_s);
  std::optional<std::vector<std::uint8_t>> file;
  for (int polls = 0; !(file = read_file(path)) || file->size() < kFileHeaderBytes; ++polls) {
    if (deadline.passed()) {
      throw_runtime_error("rendezvous via file {}: rank {} timed out after {:g} s waiting for rank 0 to write it",
                          path, launch.rank, options.timeout_s);
    }
    deadline.sleep(polls < 50 ? 10 : 100);
  }
  std::uint32_t world = 0, file_size = 0;
  std::memcpy(&world, file->data() + 8, 4);
  std::memcpy(&file_size, file->data() + 12, 4);
  if (std::memcmp(file->data(), kFileMagic, 8) != 0 || file->size() != kFileHeaderBytes + file_size) {
    throw_runtime_error("rendezvous via file {}: not a zerotrain rendezvous file (or written by another version)", path);
  }
  if (world != static_cast<std::uint32_t>(launch.world_size) || file_size != size) {
    throw_runtime_error("rendezvous via file {}: written by rank 0 of {} ranks ({} bytes), but this is rank {} of {} "
                        "({} bytes)", path, world, file_size, launch.rank, launch.world_size, size);
  }
  const std::string ack = ack_path(path, launch.rank);
  write_file_atomically(ack, std::vector<std::uint8_t>(file->begin() + 16, file->begin() + 24),
                        fmt::format("rank {}", launch.rank).c_str());
  for (int polls = 0; file_exists(path); ++polls) {
    if (deadline.passed()) {
      ::unlink(ack.c_str());
      throw_runtime_error("rendezvous via file {}: rank {} timed out after {:g} s waiting for rank 0 to hear from "
                          "every rank (one missing, or the file left from an earlier run?)", path, launch.rank, options.timeout_s);
    }
    deadline.sleep(polls < 50 ? 10 : 100);
  }
  if (file_exists(ack)) {
    ::unlink(ack.c_str());
    throw_runtime_error("rendezvous via file {}: rank 0 gave up before every rank had read it", path);
  }
  return {file->begin() + static_cast<std::ptrdiff_t>(kFileHeaderBytes), file->end()};
}

}  // namespace

// ---------------------------------------------------------------------------------------------- TCP
namespace {

// Rank r connects and sends a hello (magic, rank, world size); rank 0 answers each with a reply
// (magic, world size, blob size) and the blob, and the rank acknowledges with one byte. Rank 0 takes
// connections one at a time; one that sends no valid hello within a few seconds is dropped.
constexpr std::uint32_t kHelloMagic = 0x5a545248;  // "ZTRH"
constexpr std::uint32_t kReplyMagic = 0x5a545252;  // "ZTRR"
constexpr int kStrayConnectionMs = 5000;

class Socket {
 public:
  explicit Socket(int fd = -1) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Socket& operator=(Socket&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_;
};

// Waits until `fd` is ready for `events`; false at the deadline.
bool wait_ready(int fd, short events, const Deadline& deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, deadline.remaining_ms());
    if (n > 0) return true;
    if (n == 0 || errno != EINTR) return false;
  }
}

// Moves all of `bytes` through a non-blocking socket; false on timeout, error or a closed peer.
bool transfer(int fd, void* bytes, std::size_t n, bool sending, const Deadline& deadline) {
  auto* p = static_cast<std::uint8_t*>(bytes);
  while (n > 0) {
    const ssize_t got = sending ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (got > 0) {
      p += got;
      n -= static_cast<std::size_t>(got);
    } else if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ||
               !wait_ready(fd, sending ? POLLOUT : POLLIN, deadline)) {
      return false;
    }
  }
  return true;
}

bool send_words(int fd, std::initializer_list<std::uint32_t> words, const Deadline& deadline) {
  std::uint32_t wire[4];
  std::size_t i = 0;
  for (std::uint32_t w : words) wire[i++] = htonl(w);
  return transfer(fd, wire, i * 4, true, deadline);
}

bool recv_words(int fd, std::uint32_t* words, std::size_t count, const Deadline& deadline) {
  if (!transfer(fd, words, count * 4, false, deadline)) return false;
  for (std::size_t i = 0; i < count; ++i) words[i] = ntohl(words[i]);
  return true;
}

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list != nullptr) ::freeaddrinfo(list);
  }
};

// Resolves host:port (host nullptr: the wildcard address of `family`); the error text, or "".
std::string resolve(const char* host, int port, int family, AddrInfo& out) {
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = host == nullptr ? AI_PASSIVE : 0;
  const int rc = ::getaddrinfo(host, std::to_string(port).c_str(), &hints, &out.list);
  return rc == 0 ? "" : fmt::format("cannot resolve {}: {}", host ? host : "*", ::gai_strerror(rc));
}

std::vector<std::uint8_t> share_by_tcp_rank0(const LaunchInfo& launch, const RendezvousOptions& options,
                                             const std::vector<std::uint8_t>& blob) {
  const std::string where = "rendezvous via " + rendezvous_name(options);
  // Listen on every interface of the host's family: a node's own name often resolves to a
  // loopback address there (Debian's 127.0.1.1), which the other nodes could not reach.
  AddrInfo host_info, listen_info;
  std::string error = resolve(options.host.c_str(), options.port, AF_UNSPEC, host_info);
  if (error.empty()) error = resolve(nullptr, options.port, host_info.list->ai_family, listen_info);
  if (!error.empty()) throw_runtime_error("{}: rank 0 {}", where, error);
  const addrinfo* ai = listen_info.list;
  Socket listener(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
  const int one = 1;
  if (!listener || ::setsockopt(listener.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      ::bind(listener.fd(), ai->ai_addr, ai->ai_addrlen) != 0 ||
      ::listen(listener.fd(), std::min(launch.world_size, SOMAXCONN)) != 0) {
    throw_runtime_error("{}: rank 0 cannot listen on port {}: {} (another job on that port?)", where, options.port,
                        errno_text());
  }
  std::set<int> waiting;
  for (int r = 1; r < launch.world_size; ++r) waiting.insert(r);
  const Deadline deadline(options.timeout_s);
  while (!waiting.empty()) {
    if (!wait_ready(listener.fd(), POLLIN, deadline)) {
      throw_runtime_error("{}: rank 0 timed out after {:g} s waiting for rank(s) {} of {} to connect", where,
                          options.timeout_s, list_ranks(waiting), launch.world_size);
    }
    Socket peer(::accept4(listener.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!peer) continue;
    Deadline peer_deadline(0);
    peer_deadline.end = std::min(deadline.end, Clock::now() + std::chrono::milliseconds(kStrayConnectionMs));
    std::uint32_t hello[3];
    if (!recv_words(peer.fd(), hello, 3, peer_deadline) || hello[0] != kHelloMagic) continue;  // not a rank
    const auto rank = static_cast<int>(hello[1]);
    const auto world = static_cast<int>(hello[2]);
    if (!send_words(peer.fd(), {kReplyMagic, static_cast<std::uint32_t>(launch.world_size),
                                static_cast<std::uint32_t>(blob.size())}, peer_deadline)) {
      continue;
    }
    if (world != launch.world_size) {
      throw_runtime_error("{}: rank {} connected saying the job has {} ranks, rank 0 says {}", where, rank, world,
                          launch.world_size);
    }
    if (!waiting.contains(rank)) {
      throw_runtime_error("{}: a second process connected as rank {} of {}", where, rank, world);
    }
    std::uint8_t ack = 0;
    if (transfer(peer.fd(), const_cast<std::uint8_t*>(blob.data()), blob.size(), true, peer_deadline) &&
        transfer(peer.fd(), &ack, 1, false, peer_deadline)) {
      waiting.erase(rank);
    }
  }
  return blob;
}

std::vector<std::uint8_t> share_by_tcp_other(const LaunchInfo& launch, const RendezvousOptions& options,
                                             std::size_t size) {
  const std::string where = "rendezvous via " + rendezvous_name(options);
  const Deadline deadline(options.timeout_s);
  std::string last_error = "no attempt";
  // Rank 0 may start later than this rank: retry until the deadline.
  for (; !deadline.passed(); deadline.sleep(100)) {
    AddrInfo info;
    if (std::string error = resolve(options.host.c_str(), options.port, AF_UNSPEC, info); !error.empty()) {
      last_error = error;
      continue;
    }
    for (const addrinfo* ai = info.list; ai != nullptr && !deadline.passed(); ai = ai->ai_next) {
      Socket s(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
      if (!s) {
        last_error = errno_text();
        continue;
      }
      if (::connect(s.fd(), ai->ai_addr, ai->ai_addrlen) != 0) {
        int err = errno;
        if (err == EINPROGRESS) {
          socklen_t len = sizeof(err);
          err = wait_ready(s.fd(), POLLOUT, deadline) ? 0 : ETIMEDOUT;
          if (err == 0 && ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        }
        if (err != 0) {
          last_error = std::strerror(err);
          continue;
        }
      }
      std::uint32_t reply[3];
      if (!send_words(s.fd(), {kHelloMagic, static_cast<std::uint32_t>(launch.rank),
                               static_cast<std::uint32_t>(launch.world_size)}, deadline) ||
          !recv_words(s.fd(), reply, 3, deadline)) {
        last_error = "connection closed before rank 0 answered";
        continue;
      }
      if (reply[0] != kReplyMagic) {
        throw_runtime_error("{}: something other than a zerotrain rank 0 answers there", where);
      }
      if (reply[1] != static_cast<std::uint32_t>(launch.world_size) || reply[2] != size) {
        throw_runtime_error("{}: rank 0 has {} ranks ({} bytes), but this is rank {} of {} ({} bytes)", where, reply[1],
                            reply[2], launch.rank, launch.world_size, size);
      }
      std::vector<std::uint8_t> blob(size);
      std::uint8_t ack = 1;
      if (transfer(s.fd(), blob.data(), size, false, deadline) && transfer(s.fd(), &ack, 1, true, deadline)) {
        return blob;
      }
      last_error = "connection closed while receiving the id";
    }
  }
  throw_runtime_error("{}: rank {} timed out after {:g} s connecting to rank 0 (last error: {})", where, launch.rank,
                      options.timeout_s, last_error);
}

}  // namespace

std::vector<std::uint8_t> share_from_rank0(const LaunchInfo& launch, const RendezvousOptions& options,
                                           std::vector<std::uint8_t> blob_on_rank0, std::size_t size) {
  ZT_CHECK(launch.rank >= 0 && launch.rank < launch.world_size, "rank {} of {}", launch.rank, launch.world_size);
  ZT_CHECK(launch.rank != 0 || blob_on_rank0.size() == size, "rank 0's blob has {} bytes, not {}",
           blob_on_rank0.size(), size);
  ZT_CHECK(size <= UINT32_MAX);
  const bool root = launch.rank == 0;
  switch (options.method) {
    case RendezvousMethod::kSingle:
      if (launch.world_size != 1) {
        throw_runtime_error("rendezvous single: this is rank {} of {}", launch.rank, launch.world_size);
      }
      return blob_on_rank0;
    case RendezvousMethod::kMpi: return share_by_mpi(launch, options, std::move(blob_on_rank0), size);
    case RendezvousMethod::kFile:
      return root ? share_by_file_rank0(launch, options, blob_on_rank0) : share_by_file_other(launch, options, size);
    case RendezvousMethod::kTcp:
      return root ? share_by_tcp_rank0(launch, options, blob_on_rank0) : share_by_tcp_other(launch, options, size);
  }
  ZT_CHECK(false, "unknown rendezvous method");
  return {};
}

}  // namespace zt
