// TCP sockets with deadlines: the addresses, listening, connecting and the
// all-or-nothing send/receive used by the bootstrap and the socket transport.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/deadline.h"
#include "nccl.h"

namespace hetccl {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  int family() const { return storage.ss_family; }
  void setPort(uint16_t port);
  std::string toString() const;
  // "host:port", "[v6]:port" or "v6:port" (last colon separates the port).
  static ncclResult_t parse(const std::string& text, SocketAddress* out);
};

// The address this process should be reached at: the first interface that
// matches NCCL_SOCKET_IFNAME ("eth", "^docker", "=eth0"), and NCCL_SOCKET_FAMILY;
// by default a non-loopback interface, or loopback when there is no other.
ncclResult_t findInterfaceAddress(SocketAddress* out, std::string* ifname);
// The same with explicit settings (family 0 = any).
ncclResult_t findInterfaceAddress(const std::string& ifnameFilter, int family, SocketAddress* out,
                                  std::string* ifname);

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept {
    if (this != &o) { close(); fd_ = o.fd_; o.fd_ = -1; }
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();

  // Binds to `addr` (port 0 picks one) and listens; `bound` gets the port.
  static ncclResult_t listen(const SocketAddress& addr, Socket* out, SocketAddress* bound);
  // Connects, retrying refused connections until the deadline, or until
  // the process `peerPid` (one of this host's, listening there; 0: not
  // known) has exited.
  static ncclResult_t connect(const SocketAddress& addr, const Deadline& deadline, const AbortFlag* abort,
                              Socket* out, int peerPid = 0);
  ncclResult_t accept(const Deadline& deadline, const AbortFlag* abort, Socket* out) const;
  // Accepts a connection if one arrives within `waitMs` (*accepted says).
  ncclResult_t acceptWithin(int waitMs, Socket* out, bool* accepted) const;

  ncclResult_t sendAll(const void* data, size_t size, const Deadline& deadline, const AbortFlag* abort) const;
  ncclResult_t recvAll(void* data, size_t size, const Deadline& deadline, const AbortFlag* abort) const;

  // Non-blocking progress: moves what the kernel takes now; *done grows.
  // Returns ncclRemoteError when the peer closed the connection.
  ncclResult_t sendSome(const void* data, size_t size, size_t* done) const;
  ncclResult_t recvSome(void* data, size_t size, size_t* done) const;

  void setNonBlocking() const;
  void setNoDelay() const;
  // Whether the peer closed its end (or the connection broke); never waits.
  bool peerClosed() const;

 private:
  int fd_ = -1;
};

}  // namespace hetccl
