// The TCP rendezvous: rank 0 listens on a port, holds each rank that connects with a valid hello
// until every rank has, then hands each its blob; the other ranks retry until rank 0 is there.
// Sockets are non-blocking and every wait polls against the rendezvous deadline.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "engine/base/core/check.h"
#include "engine/distributed/launch/rendezvous_methods.h"
#include "engine/distributed/launch/tcp_wire.h"

namespace zt::detail {

namespace {

// Rank r connects and sends a hello (magic, rank, world size, job key, a nonce drawn once per
// process); rank 0 answers each with a reply (magic, world size, blob size) and holds the
// connection. Once every rank is held, two phases, so that no rank goes on unless every rank took
// the id: a go word and the blob to each, and each one's acknowledgement (one byte); then a commit
// word to each, after which a rank returns. Where the rendezvous fails first (a rank claimed twice,
// a missing rank, another world size, a rank lost before its acknowledgement) every held rank gets
// an abort word and the reason instead. A held rank sends nothing more, so a held connection that
// reads ready has closed: its rank is waited for again (the process retrying -- its nonce replaces
// its own connection -- or a replacement). Rank 0 takes connections one at a time; one that sends
// no valid hello within a few seconds is dropped. A hello of another job (its key not rank 0's) is
// answered (another magic, rank 0's key) and not counted: that rank goes on trying until its own
// job's rank 0 listens there. An older build's hello is answered with a word it does not know, so
// both ends fail at once naming the mismatch.
constexpr std::uint32_t kHelloMagic = 0x5a54524c;  // "ZTRL"
// Older builds' hellos, of four words: "ZTRK" (held, no nonce), "ZTRI" (not held), "ZTRH" (no job key).
constexpr std::uint32_t kOldHelloMagics[] = {0x5a54524b, 0x5a545249, 0x5a545248};
constexpr std::uint32_t kReplyMagic = 0x5a545252;     // "ZTRR"
constexpr std::uint32_t kOtherJobMagic = 0x5a54524a;  // "ZTRJ"
constexpr std::uint32_t kVersionMagic = 0x5a545256;   // "ZTRV": to an older build's hello
constexpr std::uint32_t kGoMagic = 0x5a545247;        // "ZTRG": the blob follows
constexpr std::uint32_t kCommitMagic = 0x5a545243;    // "ZTRC": every rank took the id
constexpr std::uint32_t kAbortMagic = 0x5a545241;     // "ZTRA": the reason's length and text follow
constexpr std::uint32_t kMaxReasonBytes = 1024;
constexpr int kStrayConnectionMs = 5000;
// A held rank waits for rank 0's word this much past its own deadline: rank 0, started later, may
// time out later, and its reason is the one worth printing.
constexpr double kHeldGraceS = 5.0;
// The go phase, whatever is left of the timeout: rank 0 sends every rank the id, then waits this
// long for all the acknowledgements together (a live rank answers within milliseconds), and a rank
// that has the id waits a little longer than that for the commit.
constexpr double kAckWindowS = 3.0;
constexpr double kCommitWaitS = kAckWindowS + 2.0;

// The reason after an abort word (its length `bytes`, at most kMaxReasonBytes read).
std::string abort_reason(int fd, std::uint32_t bytes, const Deadline& deadline) {
  std::string reason(std::min(bytes, kMaxReasonBytes), '\0');
  return transfer(fd, reason.data(), reason.size(), false, deadline) ? reason : "(its reason was cut off)";
}

}  // namespace

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
  // Every rank's connection is held until all have connected: a descriptor a rank, past the
  // common soft limit of 1024 in a large job; raised toward the hard limit, or said.
  rlimit fds{};
  const auto needed = static_cast<rlim_t>(launch.world_size) + 64;
  if (::getrlimit(RLIMIT_NOFILE, &fds) == 0 && fds.rlim_cur != RLIM_INFINITY && fds.rlim_cur < needed) {
    fds.rlim_cur = fds.rlim_max == RLIM_INFINITY ? needed : std::min(needed, fds.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &fds);
    if (::getrlimit(RLIMIT_NOFILE, &fds) == 0 && fds.rlim_cur < needed) {
      throw_runtime_error(
          "{}: rank 0 holds a connection from each of the {} ranks, but may open only {} files "
          "(ulimit -n; raise it)",
          where, launch.world_size, static_cast<unsigned long long>(fds.rlim_cur));
    }
  }
  std::set<int> waiting;
  for (int r = 1; r < launch.world_size; ++r) waiting.insert(r);
  struct Held {
    Socket socket;
    std::uint32_t nonce;
  };
  std::map<int, Held> held;  // the ranks connected so far, waiting for the go
  // The job has failed: every held rank is told why before rank 0 says it.
  const auto fail = [&](const std::string& reason) {
    for (auto& [rank, peer] : held) {
      const Deadline brief(1.0);
      if (send_words(peer.socket.fd(), {kAbortMagic, static_cast<std::uint32_t>(reason.size())}, brief)) {
        transfer(peer.socket.fd(), const_cast<char*>(reason.data()), reason.size(), true, brief);
      }
    }
    throw_runtime_error("{}: {}", where, reason);
  };
  // A held rank's connection that reads ready has closed (it died, or gives up to retry): its rank
  // is waited for again.
  const auto drop_closed = [&] {
    for (auto it = held.begin(); it != held.end();) {
      pollfd p{it->second.socket.fd(), POLLIN | POLLRDHUP, 0};
      if (::poll(&p, 1, 0) > 0) {
        waiting.insert(it->first);
        it = held.erase(it);
      } else {
        ++it;
      }
    }
  };
  // Ranks of another job (another ZT_JOB_ID, or launcher's job id) that connected: the ranks waited
  // for may be among them, told their own job's id differs.
  std::set<int> other_job_ranks;
  const auto timed_out = [&] {
    fail(fmt::format("rank 0 timed out after {:g} s waiting for rank(s) {} of {} to connect{}", options.timeout_s,
                     list_ranks(waiting), launch.world_size,
                     other_job_ranks.empty()
                         ? std::string()
                         : fmt::format(" (rank(s) {} of another job connected: a job id differs; this job: {})",
                                       list_ranks(other_job_ranks), options.job.empty() ? "none named" : options.job)));
  };
  const Deadline deadline(options.timeout_s);
  for (;;) {
    drop_closed();
    if (waiting.empty()) {
      // Every rank is there: the id to each, then all the acknowledgements within one window.
      std::set<int> lost;
      std::vector<pollfd> acks;
      std::vector<int> ack_rank;
      for (auto& [rank, peer] : held) {
        const Deadline brief(1.0);
        if (!send_words(peer.socket.fd(), {kGoMagic, 0}, brief) ||
            !transfer(peer.socket.fd(), const_cast<std::uint8_t*>(blob.data()), blob.size(), true, brief)) {
          lost.insert(rank);
          continue;
        }
        acks.push_back({peer.socket.fd(), POLLIN, 0});
        ack_rank.push_back(rank);
      }
      const Deadline window(kAckWindowS);
      std::size_t pending = acks.size();
      while (pending > 0 && !window.passed()) {
        if (::poll(acks.data(), acks.size(), window.remaining_ms()) < 0 && errno != EINTR) break;
        for (std::size_t i = 0; i < acks.size(); ++i) {
          if (acks[i].fd < 0 || acks[i].revents == 0) continue;
          std::uint8_t ack = 0;
          if (::recv(acks[i].fd, &ack, 1, 0) != 1) lost.insert(ack_rank[i]);  // closed: it left
          acks[i].fd = -1;                                                    // answered (or gone): poll skips it
          --pending;
        }
      }
      for (std::size_t i = 0; i < acks.size(); ++i) {
        if (acks[i].fd >= 0) lost.insert(ack_rank[i]);  // no acknowledgement within the window
      }
      if (!lost.empty()) {  // told too: one merely slow (stopped) reads the abort after the id
        fail(
            fmt::format("rank(s) {} of {} left the rendezvous before taking the id (or did not acknowledge it "
                        "within {:g} s)",
                        list_ranks(lost), launch.world_size, kAckWindowS));
      }
      // Each has it: only now does any go on. A rank that died since its acknowledgement misses
      // the commit and fails on its own, if it is not already gone.
      for (auto& [rank, peer] : held) send_words(peer.socket.fd(), {kCommitMagic, 0}, Deadline(1.0));
      return blob;
    }
    if (deadline.passed() || !wait_ready(listener.fd(), POLLIN, deadline)) timed_out();
    Socket peer(::accept4(listener.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!peer) {
      // Out of descriptors the connection stays queued and the listener ready: said, not spun on.
      if (errno == EMFILE || errno == ENFILE) {
        fail(fmt::format("rank 0 cannot hold another rank's connection: {} (ulimit -n: raise it)", errno_text()));
      }
      continue;
    }
    Deadline peer_deadline(0);
    peer_deadline.end = std::min(deadline.end, Clock::now() + std::chrono::milliseconds(kStrayConnectionMs));
    std::uint32_t hello[5];
    if (!recv_words(peer.fd(), hello, 4, peer_deadline)) continue;  // not a rank
    if (std::find(std::begin(kOldHelloMagics), std::end(kOldHelloMagics), hello[0]) != std::end(kOldHelloMagics)) {
      send_words(peer.fd(), {kVersionMagic, 0, 0}, peer_deadline);
      fail(fmt::format("rank {} runs an older zerotrain, whose rendezvous differs: every rank must run the same build",
                       hello[1]));
    }
    if (hello[0] != kHelloMagic || !recv_words(peer.fd(), hello + 4, 1, peer_deadline)) continue;  // not a rank
    const auto rank = static_cast<int>(hello[1]);
    const auto world = static_cast<int>(hello[2]);
    const std::uint32_t nonce = hello[4];
    if (hello[3] != job_key(options)) {
      send_words(peer.fd(), {kOtherJobMagic, job_key(options), 0}, peer_deadline);
      other_job_ranks.insert(static_cast<int>(hello[1]));
      continue;
    }
    if (!send_words(
            peer.fd(),
            {kReplyMagic, static_cast<std::uint32_t>(launch.world_size), static_cast<std::uint32_t>(blob.size())},
            peer_deadline)) {
      continue;
    }
    // Told too, under a key no rank has, where the job fails for it.
    const int unranked = launch.world_size + static_cast<int>(held.size());
    if (world != launch.world_size) {
      held.emplace(unranked, Held{std::move(peer), nonce});
      fail(
          fmt::format("rank {} connected saying the job has {} ranks, rank 0 says {}", rank, world, launch.world_size));
    }
    drop_closed();  // a rank whose earlier process died, or whose own connection closed, is waited for
    const auto same = held.find(rank);
    if (same != held.end() && same->second.nonce == nonce) {
      same->second.socket = std::move(peer);  // the same process again: its connection replaced
      continue;
    }
    if (rank < 1 || rank >= launch.world_size || !waiting.contains(rank)) {
      held.emplace(unranked, Held{std::move(peer), nonce});
      fail(fmt::format("a second process connected as rank {} of {} (rank {} is claimed twice)", rank, world, rank));
    }
    waiting.erase(rank);
    held.emplace(rank, Held{std::move(peer), nonce});
  }
}

constexpr const char* kOtherJobAnswered = "the rank 0 listening there is another job's";

std::vector<std::uint8_t> share_by_tcp_other(const LaunchInfo& launch, const RendezvousOptions& options,
                                             std::size_t size) {
  const std::string where = "rendezvous via " + rendezvous_name(options);
  const Deadline deadline(options.timeout_s);
  std::string last_error = "no attempt";
  // Where another job's rank 0 answered, said whatever the last attempt met: the final attempt
  // runs out of time mid-connect and would otherwise leave only "timed out" to report.
  bool other_job_answered = false;
  // This process's, so that rank 0 tells its reconnection (which replaces its own held connection)
  // from a second process given the same rank.
  const std::uint32_t nonce = std::random_device{}();
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
      if (!send_words(s.fd(),
                      {kHelloMagic, static_cast<std::uint32_t>(launch.rank),
                       static_cast<std::uint32_t>(launch.world_size), job_key(options), nonce},
                      deadline) ||
          !recv_words(s.fd(), reply, 3, deadline)) {
        last_error = "connection closed before rank 0 answered";
        continue;
      }
      if (reply[0] == kOtherJobMagic) {  // its own job's rank 0 may listen there later
        other_job_answered = true;
        last_error = kOtherJobAnswered;
        break;
      }
      if (reply[0] != kReplyMagic) {
        throw_runtime_error("{}: something other than a zerotrain rank 0 of this build answers there", where);
      }
      if (reply[1] != static_cast<std::uint32_t>(launch.world_size) || reply[2] != size) {
        throw_runtime_error("{}: rank 0 has {} ranks ({} bytes), but this is rank {} of {} ({} bytes)", where, reply[1],
                            reply[2], launch.rank, launch.world_size, size);
      }
      // Held until every rank has connected: then the id and, once every rank has it, the commit;
      // or, either time, why the job failed.
      const auto held_since = Clock::now();
      const Deadline held(deadline.remaining_ms() / 1000.0 + kHeldGraceS);
      bool closed = false;
      const auto word_from_rank0 = [&](std::uint32_t expected) {
        std::uint32_t word[2];
        if (!recv_words(s.fd(), word, 2, held)) {
          if (held.passed()) {
            throw_runtime_error(
                "{}: rank {} of {} was held by rank 0 for {:.0f} s with no word from it before this rank's timeout "
                "(rank 0 waits for every rank to connect: start them within ZT_RENDEZVOUS_TIMEOUT of each other)",
                where, launch.rank, launch.world_size,
                std::chrono::duration<double>(Clock::now() - held_since).count());
          }
          closed = true;
          return false;
        }
        if (word[0] == kAbortMagic) {
          throw_runtime_error("{}: rank 0 ended the rendezvous, so this rank {} of {} does too: {}", where, launch.rank,
                              launch.world_size, abort_reason(s.fd(), word[1], held));
        }
        if (word[0] != expected)
          throw_runtime_error("{}: something other than a zerotrain rank 0 answers there", where);
        return true;
      };
      std::vector<std::uint8_t> blob(size);
      std::uint8_t ack = 1;
      if (word_from_rank0(kGoMagic) && transfer(s.fd(), blob.data(), size, false, held) &&
          transfer(s.fd(), &ack, 1, true, held)) {
        // In the go phase, whatever is left of this rank's own time: rank 0 waits up to its
        // window for every acknowledgement, then commits or aborts.
        std::uint32_t word[2] = {0, 0};
        if (recv_words(s.fd(), word, 2, Deadline(kCommitWaitS)) && word[0] == kCommitMagic) return blob;
        throw_runtime_error("{}: rank 0 ended the rendezvous, so this rank {} of {} does too: {}", where, launch.rank,
                            launch.world_size,
                            word[0] == kAbortMagic
                                ? abort_reason(s.fd(), word[1], Deadline(1.0))
                                : std::string("no word from rank 0 after this rank took the id (rank 0 failed or "
                                              "ended)"));
      }
      last_error =
          closed ? "rank 0 closed the connection while this rank was held" : "connection closed while receiving the id";
    }
  }
  std::string said = last_error;
  if (other_job_answered) {
    const std::string other =
        fmt::format("{} (this job: {})", kOtherJobAnswered, options.job.empty() ? "none named" : options.job);
    said = last_error == kOtherJobAnswered ? other : fmt::format("{}; before it, {}", last_error, other);
  }
  throw_runtime_error("{}: rank {} timed out after {:g} s connecting to rank 0 (last error: {})", where, launch.rank,
                      options.timeout_s, said);
}

}  // namespace zt::detail
