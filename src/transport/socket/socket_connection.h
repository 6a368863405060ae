// One direction of the TCP transport between two ranks: several sockets;
// a message of 64 KiB or more is striped over all of them. Each message
// starts with a header {tag, size} on the first socket; a receive whose
// header differs fails as a mismatched operation.
// Notes, 16 bytes each, on the first socket:
// - a rank that stops says why (a gone note: {kGoneTag, kGoneMagic +
//   reason}): a sender in place of its next message (mid-message it shuts
//   the sockets instead, and the peer sees them close), a receiver on the
//   socket's reverse direction, which only notes use. So a peer waiting on
//   this rank fails at once, with ncclInvalidUsage when this rank found a
//   mismatch;
// - a receiver stuck on the peer says which of its messages it waits for
//   (a wait note: {kWaitTag, number}, on the reverse direction). A sender
//   that is itself stuck on that peer, and has not sent that message nor
//   queued it, knows the two wait for each other: a mismatched call.
#pragma once

#include <memory>
#include <vector>

#include "bootstrap/socket.h"
#include "transport/transport.h"

namespace hetccl {

struct SocketHeader {
  uint64_t tag;
  uint64_t size;
};

constexpr uint64_t kGoneTag = 0x656e6f67ull << 32;  // "gone"
constexpr uint64_t kGoneMagic = 0x68657463636c0000ull;
constexpr uint64_t kWaitTag = 0x74696177ull << 32;  // "wait"

// The reason a gone note gives (Connection::GoneReason), 0 if `h` is none.
inline uint32_t goneNoteReason(const SocketHeader& h) {
  if (h.tag != kGoneTag) return 0;
  const uint64_t reason = h.size - kGoneMagic;
  return reason == Connection::kGoneLeft || reason == Connection::kGoneMismatch ? static_cast<uint32_t>(reason) : 0;
}

// `sockets` are connected (non-blocking); `sender`: this side sends.
std::unique_ptr<Connection> makeSocketConnection(std::vector<Socket> sockets, bool sender, int peer);

}  // namespace hetccl
