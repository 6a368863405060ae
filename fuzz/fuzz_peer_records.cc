// libFuzzer target: the records transports take from a peer's bytes
// (src/transport/peer_records.h): the net plugin handshake, a net plugin
// chunk against the receive it lands in, the RDMA network's listen handle
// (which arrives inside the handshakes), the stream relay's plugin
// handshake and a UCX address length. The
// first byte picks one. What an accepted record promises is checked here:
// strings ended, sizes within bounds, copies inside their buffers.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "transport/peer_records.h"

namespace {

template <typename T>
bool take(const uint8_t** data, size_t* size, T* out) {
  if (*size < sizeof(T)) return false;
  memcpy(out, *data, sizeof(T));
  *data += sizeof(T);
  *size -= sizeof(T);
  return true;
}

void pluginHello(const uint8_t* data, size_t size) {
  uint32_t maxMessageBytes = 0;
  hetccl::PluginHello hello{};
  if (!take(&data, &size, &maxMessageBytes) || !take(&data, &size, &hello)) return;
  if (hetccl::checkPluginHello(&hello, maxMessageBytes, 1) != ncclSuccess) return;
  if (!memchr(hello.plugin, 0, sizeof hello.plugin)) __builtin_trap();
  if (hello.slotBytes <= sizeof(hetccl::ChunkHeader) || hello.slotBytes > maxMessageBytes) __builtin_trap();
}

// A receive of `messageBytes` whose chunk at `offset` (the receiver's own
// bookkeeping: always inside the message) is `payload` long; the slot
// holds what the peer sent. Accepted: the payload is copied as the
// transport does, from inside the slot to inside the message.
void chunk(const uint8_t* data, size_t size) {
  uint16_t messageBytes = 0, offset = 0, payload = 0;
  uint64_t tag = 0;
  if (!take(&data, &size, &messageBytes) || !take(&data, &size, &offset) || !take(&data, &size, &payload) ||
      !take(&data, &size, &tag))
    return;
  offset = messageBytes ? offset % (messageBytes + 1) : 0;
  payload = static_cast<uint16_t>(payload % (messageBytes - offset + 1));
  const std::vector<char> slot(data, data + size);  // exactly what arrived
  std::vector<char> message(messageBytes);
  if (hetccl::checkChunk(slot.data(), slot.size(), tag, messageBytes, offset, payload, 1) != ncclSuccess) return;
  if (slot.size() != sizeof(hetccl::ChunkHeader) + payload) __builtin_trap();
  if (payload) memcpy(message.data() + offset, slot.data() + sizeof(hetccl::ChunkHeader), payload);
}

void verbsHandle(const uint8_t* data, size_t size) {
  hetccl::VerbsListenHandle handle{};
  if (!take(&data, &size, &handle)) return;
  hetccl::SocketAddress to;
  if (hetccl::verbsHandleAddress(handle, &to) != ncclSuccess) return;
  if (to.family() != AF_INET && to.family() != AF_INET6) __builtin_trap();
  if (to.length != (to.family() == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6))) __builtin_trap();
}

void relayHandshake(const uint8_t* data, size_t size) {
  hetccl::RelayPluginHandshake h{};
  if (!take(&data, &size, &h)) return;
  if (hetccl::checkRelayPluginHandshake(&h, 4096, 1) != ncclSuccess) return;
  if (!memchr(h.plugin, 0, sizeof h.plugin) || h.slotBytes < 4096 || h.pieceBytes == 0) __builtin_trap();
}

void ucxAddressBytes(const uint8_t* data, size_t size) {
  uint32_t bytes = 0;
  if (!take(&data, &size, &bytes)) return;
  if (hetccl::checkUcxAddressBytes(bytes, 1) != ncclSuccess) return;
  if (bytes == 0 || bytes > (1u << 20)) __builtin_trap();
  std::vector<char> address(bytes);  // what the receiver then allocates and reads
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  switch (data[0] % 5) {
    case 0: pluginHello(data + 1, size - 1); break;
    case 1: chunk(data + 1, size - 1); break;
    case 2: verbsHandle(data + 1, size - 1); break;
    case 4: relayHandshake(data + 1, size - 1); break;
    default: ucxAddressBytes(data + 1, size - 1); break;
  }
  return 0;
}
