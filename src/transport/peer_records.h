// Records the transports take from a peer's bytes, and the checks that
// stand between them and this rank's memory: the net plugin transport's
// handshake (PluginHello) and its chunks' headers (ChunkHeader), the stream
// relay's plugin handshake (RelayPluginHandshake), the listen handle of
// hetccl's RDMA network (VerbsListenHandle, which reaches it inside a
// peer's handshake), and the length of a peer's UCX worker address. Pure functions, so that fuzz/fuzz_peer_records.cc can feed them
// anything.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>

#include "bootstrap/socket.h"
#include "nccl.h"
#include "transport/net_plugin/net_plugin_abi.h"

namespace hetccl {

// What the receiving side of a net plugin connection tells the sender.
constexpr uint64_t kPluginHelloMagic = 0x4e455450;
struct PluginHello {
  uint64_t magic;
  uint64_t slotBytes;  // chunks are at most this long, header included
  char plugin[64];
  char handle[netabi::kHandleBytes];
};

// Each chunk of a message on a net plugin connection starts with this.
constexpr uint64_t kChunkMagic = 0x6b6e756863636368ull;
struct ChunkHeader {
  uint64_t magic;
  uint64_t tag;           // hetccl's
  uint64_t messageBytes;  // the whole message's
  uint64_t offset;        // of this chunk's payload in the message
};

// Ends the plugin's name within its array; ncclInternalError for a wrong
// magic, ncclInvalidUsage for slots that cannot hold a chunk header or
// exceed what this rank's plugin sends at once (`maxMessageBytes`).
ncclResult_t checkPluginHello(PluginHello* hello, size_t maxMessageBytes, int peer);

// `bytes` arrived in the slot meant for `payload` bytes at `offset` of a
// receive of `messageBytes` tagged `tag`: ncclSuccess when they are that
// chunk, ncclInternalError when malformed, ncclInvalidUsage when they are
// another call's (the payload then is not copied).
ncclResult_t checkChunk(const char* data, size_t bytes, uint64_t tag, size_t messageBytes, size_t offset, size_t payload,
                        int peer);

// Where hetccl's RDMA network listens (a TCP address for the handshake);
// `connecting` and `key` are the connecting side's own progress: a connect
// in progress is found by both, and the key is this process's secret, so
// a handle forged by a peer never finds another connect's.
constexpr uint32_t kVerbsHandleMagic = 0x52444d41;
struct VerbsListenHandle {
  uint32_t magic;
  uint32_t addressBytes;
  unsigned char address[sizeof(sockaddr_in6)];
  uint64_t connecting;  // 0: not begun
  uint64_t key;
};
static_assert(sizeof(VerbsListenHandle) <= netabi::kHandleBytes, "the listen handle outgrows the plugin ABI's");

// The IPv4 or IPv6 address a handle names (ncclInternalError otherwise).
ncclResult_t verbsHandleAddress(const VerbsListenHandle& handle, SocketAddress* to);

// What the two ends of a stream relay link over a net plugin tell each
// other (src/transport/net_plugin/relay_link_plugin.cc).
struct RelayPluginHandshake {
  char handle[netabi::kHandleBytes];      // headers
  char dataHandle[netabi::kHandleBytes];  // data
  uint64_t slotBytes;   // the sender's header receive slots
  uint64_t pieceBytes;  // its largest data message
  char plugin[64];
};

// Ends the plugin's name; ncclInternalError for slots under
// `minSlotBytes` or no data messages.
ncclResult_t checkRelayPluginHandshake(RelayPluginHandshake* handshake, size_t minSlotBytes, int peer);

// A UCX worker address's length as a peer announced it, before it is read.
ncclResult_t checkUcxAddressBytes(uint32_t bytes, int peer);

}  // namespace hetccl
