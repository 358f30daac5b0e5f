// The TCP rendezvous's socket plumbing (engine/distributed/launch/rendezvous_tcp.cpp): an owned
// descriptor, name resolution, and reads and writes on non-blocking sockets that poll against the
// rendezvous deadline. Internal to the rendezvous, like rendezvous_methods.h.
#pragma once

#include <netdb.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "engine/distributed/launch/rendezvous_methods.h"

namespace zt::detail {

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
bool wait_ready(int fd, short events, const Deadline& deadline);

// Moves all of `bytes` through a non-blocking socket; false on timeout, error or a closed peer.
bool transfer(int fd, void* bytes, std::size_t n, bool sending, const Deadline& deadline);

// Whole 32-bit words, in network byte order on the wire (at most 8 sent at once).
bool send_words(int fd, std::initializer_list<std::uint32_t> words, const Deadline& deadline);
bool recv_words(int fd, std::uint32_t* words, std::size_t count, const Deadline& deadline);

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list != nullptr) ::freeaddrinfo(list);
  }
};

// Resolves host:port (host nullptr: the wildcard address of `family`); the error text, or "".
std::string resolve(const char* host, int port, int family, AddrInfo& out);

}  // namespace zt::detail
