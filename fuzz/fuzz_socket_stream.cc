// libFuzzer target: the bytes a peer sends on the TCP transport's sockets
// (src/transport/socket/socket_connection.h), read by a receive whose size, sink
// and socket count the input picks; or the bytes on a sender's reverse
// direction, where the peer's notes stand (gone, wait). A receive completes only
// when the header was its own, and then holds exactly the bytes sent; no
// input makes it write outside its buffer (AddressSanitizer) or hang.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "transport/socket/socket_connection.h"

namespace {

constexpr uint64_t kTag = 0x7461672d66757a7aull;

// Copies each piece it is handed to where it belongs in `out`.
class CopySink : public hetccl::RecvSink {
 public:
  explicit CopySink(std::vector<char>* out) : out_(out) {}
  void consume(const void* src, size_t offset, size_t length) override {
    if (offset > out_->size() || length > out_->size() - offset) __builtin_trap();
    memcpy(out_->data() + offset, src, length);
  }

 private:
  std::vector<char>* out_;
};

// A connected pair: `ours` for the connection, `theirs` written by the peer.
bool pair(hetccl::Socket* ours, int* theirs) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) return false;
  *ours = hetccl::Socket(fds[0]);
  *theirs = fds[1];
  return true;
}

void writeAll(int fd, const uint8_t* data, size_t size) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n <= 0) return;  // the buffer is full: the rest is lost, as if the peer died
    data += n;
    size -= static_cast<size_t>(n);
  }
}

void senderNotes(const uint8_t* data, size_t size) {
  hetccl::Socket ours;
  int theirs = -1;
  if (!pair(&ours, &theirs)) return;
  writeAll(theirs, data, size);
  std::vector<hetccl::Socket> sockets;
  sockets.push_back(std::move(ours));
  auto connection = hetccl::makeSocketConnection(std::move(sockets), true, 1);
  const uint32_t reason = connection->peerGoneReason();
  const bool stuck = connection->peerStuckOnUs();
  // The notes, 16 bytes each: the first gone note gives the reason, the
  // last wait note the message the peer waits for (none sent here).
  uint32_t expectedReason = 0;
  uint64_t waitsFor = 0;
  for (size_t at = 0; at + sizeof(hetccl::SocketHeader) <= size; at += sizeof(hetccl::SocketHeader)) {
    hetccl::SocketHeader h{};
    memcpy(&h, data + at, sizeof h);
    if (h.tag == hetccl::kWaitTag) waitsFor = h.size;
    else if (!expectedReason) expectedReason = hetccl::goneNoteReason(h);
  }
  if (reason != expectedReason || stuck != (waitsFor > 0)) __builtin_trap();
  close(theirs);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const uint8_t mode = data[0];
  if (mode & 0x80) {
    senderNotes(data + 1, size - 1);
    return 0;
  }
  const size_t socketCount = 1 + (mode & 1);
  const bool useSink = mode & 2;
  // Bit 2: the stream starts with the receive's own header (the payload
  // path); else the input's bytes are the header too.
  const bool ownHeader = mode & 4;
  // Bit 3: a size of 64 KiB or more, striped over the sockets.
  size_t want = (static_cast<size_t>(data[1]) << 8 | data[2]) % (size + 1);
  if (mode & 8) want += 64 << 10;
  data += 3;
  size -= 3;

  std::vector<hetccl::Socket> ours(socketCount);
  std::vector<int> theirs(socketCount, -1);
  for (size_t i = 0; i < socketCount; ++i)
    if (!pair(&ours[i], &theirs[i])) return 0;
  const hetccl::SocketHeader own{kTag, want};
  if (ownHeader) writeAll(theirs[0], reinterpret_cast<const uint8_t*>(&own), sizeof own);
  // The first half of the bytes on the first socket, the rest on the second.
  const size_t first = socketCount == 1 ? size : size / 2;
  writeAll(theirs[0], data, first);
  if (socketCount == 2) writeAll(theirs[1], data + first, size - first);
  for (int fd : theirs) close(fd);  // the peer is done: an unfinished receive ends in an error

  auto connection = hetccl::makeSocketConnection(std::move(ours), false, 1);
  std::vector<char> out(want, 0);
  CopySink sink(&out);
  hetccl::Request r;
  r.recvData = out.data();
  r.sink = useSink ? &sink : nullptr;
  r.size = want;
  r.tag = kTag;
  if (connection->irecv(&r) != ncclSuccess) __builtin_trap();
  ncclResult_t result = ncclSuccess;
  for (int step = 0; step < 100000 && !r.complete && result == ncclSuccess; ++step) {
    bool moved = false;
    result = connection->progress(&moved);
    if (connection->peerGoneReason() && result == ncclSuccess && !r.complete && !moved) break;
  }
  if (!r.complete) {
    if (result == ncclSuccess && connection->peerGoneReason() == 0) __builtin_trap();  // stuck without a reason
    return 0;
  }
  // Complete: the header was its own, and one socket's payload is the bytes after it.
  if (result != ncclSuccess) __builtin_trap();
  const uint8_t* payload = data;
  if (!ownHeader) {
    hetccl::SocketHeader h{};
    if (first < sizeof h) __builtin_trap();
    memcpy(&h, data, sizeof h);
    if (h.tag != kTag || h.size != want) __builtin_trap();
    payload += sizeof h;
  }
  if (socketCount == 1 && want > 0 && memcmp(out.data(), payload, want) != 0) __builtin_trap();
  return 0;
}
