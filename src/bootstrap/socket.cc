#include "bootstrap/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "bootstrap/peer_process.h"
#include "common/error.h"
#include "common/name_list.h"
#include "common/params.h"

namespace hetccl {

std::string SocketAddress::toString() const {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (family() == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&storage);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (family() == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
    return std::string("[") + host + "]:" + std::to_string(port);
  }
  return "<none>";
}

void SocketAddress::setPort(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
}

ncclResult_t SocketAddress::parse(const std::string& text, SocketAddress* out) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return fail(ncclInvalidArgument, "address '%s' is not of the form host:port", text.c_str());
  std::string host = text.substr(0, colon);
  std::string port = text.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || !res) return fail(ncclInvalidArgument, "cannot resolve '%s': %s", text.c_str(), gai_strerror(rc));
  memcpy(&out->storage, res->ai_addr, res->ai_addrlen);
  out->length = res->ai_addrlen;
  freeaddrinfo(res);
  return ncclSuccess;
}


ncclResult_t findInterfaceAddress(SocketAddress* out, std::string* ifname) {
  return findInterfaceAddress(params().socketIfname, params().socketFamily, out, ifname);
}

ncclResult_t findInterfaceAddress(const std::string& ifnameFilter, int family, SocketAddress* out,
                                  std::string* ifname) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return fail(ncclSystemError, "getifaddrs failed: %s", strerror(errno));
  const ifaddrs* best = nullptr;
  const ifaddrs* loopback = nullptr;
  for (const ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    int fam = i->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (family && fam != family) continue;
    if (fam == AF_INET6) {
      auto* a6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr)) continue;  // needs a scope id; skip
    }
    if (!nameListMatches(ifnameFilter, i->ifa_name)) continue;
    bool isLoop = (i->ifa_flags & IFF_LOOPBACK) != 0;
    if (!ifnameFilter.empty() || !isLoop) {
      best = i;
      break;
    }
    if (!loopback) loopback = i;
  }
  if (!best) best = loopback;
  if (!best) {
    freeifaddrs(list);
    return fail(ncclSystemError, "no network interface matches NCCL_SOCKET_IFNAME='%s'%s", ifnameFilter.c_str(),
                family == AF_INET6 ? " with an IPv6 address" : family == AF_INET ? " with an IPv4 address" : "");
  }
  out->length = best->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  memcpy(&out->storage, best->ifa_addr, out->length);
  if (ifname) *ifname = best->ifa_name;
  freeifaddrs(list);
  return ncclSuccess;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Socket::setNonBlocking() const { fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK); }

bool Socket::peerClosed() const {
  pollfd p{fd_, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

void Socket::setNoDelay() const {
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

ncclResult_t Socket::listen(const SocketAddress& addr, Socket* out, SocketAddress* bound) {
  Socket s(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return fail(ncclSystemError, "socket() failed: %s", strerror(errno));
  int one = 1;
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(s.fd(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.length) != 0)
    return fail(ncclSystemError, "bind to %s failed: %s", addr.toString().c_str(), strerror(errno));
  if (::listen(s.fd(), 1024) != 0) return fail(ncclSystemError, "listen failed: %s", strerror(errno));
  bound->length = sizeof(bound->storage);
  getsockname(s.fd(), reinterpret_cast<sockaddr*>(&bound->storage), &bound->length);
  s.setNonBlocking();
  *out = std::move(s);
  return ncclSuccess;
}

ncclResult_t Socket::connect(const SocketAddress& addr, const Deadline& deadline, const AbortFlag* abort,
                             Socket* out, int peerPid) {
  int delayMs = 1;
  for (;;) {
    if (abort && abort->load()) return fail(ncclInvalidUsage, "communicator aborted while connecting");
    Socket s(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.valid()) return fail(ncclSystemError, "socket() failed: %s", strerror(errno));
    if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.length) == 0) {
      s.setNoDelay();
      s.setNonBlocking();
      *out = std::move(s);
      return ncclSuccess;
    }
    int err = errno;
    if (err != ECONNREFUSED && err != ETIMEDOUT && err != EAGAIN && err != ECONNRESET && err != EINTR)
      return fail(ncclSystemError, "connect to %s failed: %s", addr.toString().c_str(), strerror(err));
    if (deadline.expired())
      return timedOut("connect to %s timed out (HETCCL_TIMEOUT): %s", addr.toString().c_str(),
                  strerror(err));
    if (peerPid > 0 && processGone(peerPid))
      return fail(ncclRemoteError, "connect to %s: the process listening there (pid %d) has exited",
                  addr.toString().c_str(), peerPid);
    std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
    delayMs = delayMs < 50 ? delayMs * 2 : 50;
  }
}

ncclResult_t Socket::acceptWithin(int waitMs, Socket* out, bool* accepted) const {
  *accepted = false;
  for (int attempt = 0; attempt < 2; ++attempt) {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      Socket s(fd);
      s.setNoDelay();
      s.setNonBlocking();
      *out = std::move(s);
      *accepted = true;
      return ncclSuccess;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
      return fail(ncclSystemError, "accept failed: %s", strerror(errno));
    if (attempt == 0) {
      pollfd p{fd_, POLLIN, 0};
      ::poll(&p, 1, waitMs);
    }
  }
  return ncclSuccess;
}

ncclResult_t Socket::accept(const Deadline& deadline, const AbortFlag* abort, Socket* out) const {
  for (;;) {
    bool accepted = false;
    HETCCL_TRY(acceptWithin(deadline.remainingMs(100), out, &accepted));
    if (accepted) return ncclSuccess;
    if (abort && abort->load()) return fail(ncclInvalidUsage, "communicator aborted while waiting for a peer");
    if (deadline.expired()) return timedOut("timed out waiting for a peer to connect (HETCCL_TIMEOUT)");
  }
}

ncclResult_t Socket::sendSome(const void* data, size_t size, size_t* done) const {
  while (*done < size) {
    ssize_t n = ::send(fd_, static_cast<const char*>(data) + *done, size - *done, MSG_NOSIGNAL);
    if (n > 0) { *done += static_cast<size_t>(n); continue; }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return ncclSuccess;
    return fail(ncclRemoteError, "send to peer failed: %s", n == 0 ? "connection closed" : strerror(errno));
  }
  return ncclSuccess;
}

ncclResult_t Socket::recvSome(void* data, size_t size, size_t* done) const {
  while (*done < size) {
    ssize_t n = ::recv(fd_, static_cast<char*>(data) + *done, size - *done, 0);
    if (n > 0) { *done += static_cast<size_t>(n); continue; }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return ncclSuccess;
    return fail(ncclRemoteError, "peer closed the connection%s%s", n == 0 ? "" : ": ", n == 0 ? "" : strerror(errno));
  }
  return ncclSuccess;
}

namespace {
template <typename Step>
ncclResult_t moveAll(int fd, short events, size_t size, const Deadline& deadline, const AbortFlag* abort,
                     Step step) {
  size_t done = 0;
  for (;;) {
    HETCCL_TRY(step(&done));
    if (done == size) return ncclSuccess;
    if (abort && abort->load()) return fail(ncclInvalidUsage, "communicator aborted during bootstrap exchange");
    if (deadline.expired()) return timedOut("bootstrap exchange with a peer timed out (HETCCL_TIMEOUT)");
    pollfd p{fd, events, 0};
    ::poll(&p, 1, deadline.remainingMs(100));
  }
}
}  // namespace

ncclResult_t Socket::sendAll(const void* data, size_t size, const Deadline& deadline, const AbortFlag* abort) const {
  return moveAll(fd_, POLLOUT, size, deadline, abort, [&](size_t* done) { return sendSome(data, size, done); });
}

ncclResult_t Socket::recvAll(void* data, size_t size, const Deadline& deadline, const AbortFlag* abort) const {
  return moveAll(fd_, POLLIN, size, deadline, abort, [&](size_t* done) { return recvSome(data, size, done); });
}

}  // namespace hetccl
