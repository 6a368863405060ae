#include "transport/peer_records.h"

#include <sys/socket.h>

#include <cstring>

#include "common/error.h"

namespace hetccl {

ncclResult_t checkPluginHello(PluginHello* hello, size_t maxMessageBytes, int peer) {
  hello->plugin[sizeof hello->plugin - 1] = '\0';
  if (hello->magic != kPluginHelloMagic) return fail(ncclInternalError, "rank %d sent a malformed net plugin handshake", peer);
  if (hello->slotBytes <= sizeof(ChunkHeader) || hello->slotBytes > maxMessageBytes)
    return fail(ncclInvalidUsage, "rank %d's net plugin slots of %llu bytes do not fit this rank's plugin", peer,
                static_cast<unsigned long long>(hello->slotBytes));
  return ncclSuccess;
}

ncclResult_t checkChunk(const char* data, size_t bytes, uint64_t tag, size_t messageBytes, size_t offset, size_t payload,
                        int peer) {
  ChunkHeader h{};
  if (bytes >= sizeof h) memcpy(&h, data, sizeof h);
  if (bytes < sizeof h || h.magic != kChunkMagic)
    return fail(ncclInternalError, "net plugin: rank %d's message arrived malformed (%zu bytes)", peer, bytes);
  if (h.tag != tag || h.messageBytes != messageBytes || h.offset != offset || bytes != sizeof h + payload)
    return fail(ncclInvalidUsage,
                "mismatched operation with rank %d: it sent %llu bytes for a different call than this rank's "
                "receive of %zu bytes (ranks must call the same collectives with the same arguments in the same order)",
                peer, static_cast<unsigned long long>(h.messageBytes), messageBytes);
  return ncclSuccess;
}

ncclResult_t verbsHandleAddress(const VerbsListenHandle& handle, SocketAddress* to) {
  if (handle.magic != kVerbsHandleMagic) return fail(ncclInternalError, "RDMA: connect to a malformed handle");
  sa_family_t family = 0;
  if (handle.addressBytes >= sizeof family) memcpy(&family, handle.address, sizeof family);
  if (!((family == AF_INET && handle.addressBytes == sizeof(sockaddr_in)) ||
        (family == AF_INET6 && handle.addressBytes == sizeof(sockaddr_in6))))
    return fail(ncclInternalError, "RDMA: the handle's address is neither IPv4 nor IPv6 (%u bytes, family %u)",
                handle.addressBytes, family);
  *to = SocketAddress{};
  memcpy(&to->storage, handle.address, handle.addressBytes);
  to->length = handle.addressBytes;
  return ncclSuccess;
}

ncclResult_t checkRelayPluginHandshake(RelayPluginHandshake* handshake, size_t minSlotBytes, int peer) {
  handshake->plugin[sizeof handshake->plugin - 1] = '\0';
  if (handshake->slotBytes < minSlotBytes || handshake->pieceBytes == 0)
    return fail(ncclInternalError, "stream relay: rank %d's net plugin slots are too small (%llu bytes; data messages of "
                "%llu)", peer, static_cast<unsigned long long>(handshake->slotBytes),
                static_cast<unsigned long long>(handshake->pieceBytes));
  return ncclSuccess;
}

ncclResult_t checkUcxAddressBytes(uint32_t bytes, int peer) {
  if (bytes == 0 || bytes > (1u << 20))
    return fail(ncclInternalError, "rank %d sent a UCX worker address of %u bytes", peer, bytes);
  return ncclSuccess;
}

}  // namespace hetccl
