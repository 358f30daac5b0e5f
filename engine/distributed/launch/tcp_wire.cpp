// See the header.
#include "engine/distributed/launch/tcp_wire.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

namespace zt::detail {

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
  std::uint32_t wire[8];
  std::size_t i = 0;
  for (std::uint32_t w : words) wire[i++] = htonl(w);
  return transfer(fd, wire, i * 4, true, deadline);
}

bool recv_words(int fd, std::uint32_t* words, std::size_t count, const Deadline& deadline) {
  if (!transfer(fd, words, count * 4, false, deadline)) return false;
  for (std::size_t i = 0; i < count; ++i) words[i] = ntohl(words[i]);
  return true;
}

// Resolves host:port (host nullptr: the wildcard address of `family`); the error text, or "".
std::string resolve(const char* host, int port, int family, AddrInfo& out) {
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = host == nullptr ? AI_PASSIVE : 0;
  const int rc = ::getaddrinfo(host, std::to_string(port).c_str(), &hints, &out.list);
  return rc == 0 ? "" : fmt::format("cannot resolve {}: {}", host ? host : "*", ::gai_strerror(rc));
}

}  // namespace zt::detail
