// The layout of a rank's shared-memory segment for the stream collectives
// (stream_collectives.h): flags, the published call records
// (stream_records.h), then per slot one send part per rank and the rank's
// reduced part. Shared by the data path (stream_collectives.cc) and
// failure detection (stream_watchdog.cc).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "common/error.h"
#include "kernels/low_latency.h"
#include "kernels/low_latency_p2p.h"
#include "plan/stream/stream_collectives.h"
#include "runtime/owned.h"
#include "runtime/runtime.h"
#include "transport/relay/stream_records.h"
#include "transport/shm/shm_segment.h"

namespace hetccl {

namespace stream_layout {

constexpr size_t kLine = 64;      // one flag per cache line
constexpr size_t kPage = 4096;

constexpr size_t alignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace stream_layout

// A rank's segment: flags, published calls, then per slot one send part
// per rank (the part that rank owns) and the rank's reduced part; with
// send/recv on the streams (p2pSlots > 0) also per peer: posted/consumed
// flags, the published sizes of my sends to it, p2pSlots parts of data
// for it and as many areas for small sends' words; then the low-latency
// kernel's words (two buffers and two landing areas) and the one-shot
// collectives' two buffers.
// The flags and records stay registered (pinned) while the communicator
// lives; the data (from dataOffset()) is registered apart, so that
// ncclCommSuspend can give it back (StreamCollectives::suspend).
struct StreamCollectives::Segment {
  SharedSegment shared;
  // As pinned memory with this process's runtime (they go before the mapping).
  HostRegistration registration;      // [0, dataOffset())
  HostRegistration dataRegistration;  // [dataOffset(), shared.bytes())
  size_t slots = 0, nranks = 0, partBytes = 0, p2pSlots = 0;
  size_t lowLatencyBytes = 0;  // the largest a rank posts in a low-latency collective (0: no buffers)
  size_t oneShotBytes = 0;     // the most a rank reads (and so posts) in a one-shot one (0: no buffers)

  char* data() const { return shared.base() + dataOffset(); }
  size_t dataBytes() const { return shared.bytes() - dataOffset(); }
  ncclResult_t registerData(Runtime& rt) { return registerHost(rt, data(), dataBytes(), &dataRegistration); }
  ncclResult_t registerAll(Runtime& rt) {
    if (!registration) HETCCL_TRY(registerHost(rt, shared.base(), dataOffset(), &registration));
    return dataRegistration ? ncclSuccess : registerData(rt);
  }
  size_t registeredBytes() const { return (registration ? dataOffset() : 0) + (dataRegistration ? dataBytes() : 0); }

  size_t flagLines() const { return 4 * slots + 5 + 2 * nranks * p2pSlots + 2; }
  size_t flagsBytes() const { return stream_layout::alignUp(flagLines() * stream_layout::kLine, stream_layout::kPage); }
  size_t p2pRecordsOffset() const { return flagsBytes() + stream_layout::kCallRing * sizeof(stream_layout::CallRecord); }
  size_t dataOffset() const {
    return stream_layout::alignUp(p2pRecordsOffset() + nranks * stream_layout::kP2pRing * sizeof(stream_layout::P2pRecord),
                                  stream_layout::kPage);
  }
  size_t p2pDataOffset() const { return dataOffset() + slots * (nranks + 1) * partBytes; }
  size_t p2pWordsOffset() const {
    return stream_layout::alignUp(p2pDataOffset() + nranks * p2pSlots * partBytes, stream_layout::kLine);
  }
  // The most a small send carries as words (low_latency_p2p.h); its words
  // fit a data part, where a relayed mirror lands them.
  size_t p2pLowLatencyBytes() const {
    return lowLatencyBytes ? std::min({lowLatencyBytes, low_latency::kMostP2pBytes, partBytes / 16 * 8}) : 0;
  }
  size_t p2pWordsBytes() const {
    return stream_layout::alignUp(low_latency::bufferBytes(p2pLowLatencyBytes()), stream_layout::kLine);
  }
  size_t lowLatencyOffset() const {
    return stream_layout::alignUp(p2pWordsOffset() + nranks * p2pSlots * p2pWordsBytes(), stream_layout::kPage);
  }
  size_t oneShotOffset() const {
    return stream_layout::alignUp(lowLatencyOffset() + 4 * low_latency::bufferBytes(lowLatencyBytes), stream_layout::kPage);
  }
  size_t oneShotBufferBytes() const { return stream_layout::alignUp(oneShotBytes, stream_layout::kPage); }
  size_t bytes() const { return oneShotOffset() + 2 * oneShotBufferBytes(); }

  volatile uint32_t* line(size_t index) const {
    return reinterpret_cast<volatile uint32_t*>(shared.base() + index * stream_layout::kLine);
  }
  volatile uint32_t* flag(size_t kind, size_t slot) const { return line(kind * slots + slot); }
  // posted: the send parts of the slot are written; consumed: this rank has
  // read its part from every peer's slot; reduced: the reduced part is
  // written; gathered: this rank has read every peer's reduced part.
  volatile uint32_t* posted(size_t slot) const { return flag(0, slot); }
  volatile uint32_t* consumed(size_t slot) const { return flag(1, slot); }
  volatile uint32_t* reduced(size_t slot) const { return flag(2, slot); }
  volatile uint32_t* gathered(size_t slot) const { return flag(3, slot); }
  // Raised (to a rank number + 1) when that rank gave up after an error.
  volatile uint32_t* broken() const { return flag(4, 0); }
  // Stream i (send, reduce, result, gather) has finished call `ticket`: the caller's stream waits for all four.
  volatile uint32_t* done(size_t stream) const { return flag(4, 1 + stream); }
  stream_layout::CallRecord* call(uint64_t index) const {
    return reinterpret_cast<stream_layout::CallRecord*>(shared.base() + flagsBytes()) + index % stream_layout::kCallRing;
  }
  char* sendPart(size_t slot, int owner) const {
    return shared.base() + dataOffset() + (slot * (nranks + 1) + static_cast<size_t>(owner)) * partBytes;
  }
  char* reducedPart(size_t slot) const { return shared.base() + dataOffset() + (slot * (nranks + 1) + nranks) * partBytes; }

  // Send/recv with peer q: my data for q is in p2pData(q, s) once
  // p2pPosted(q, s) reaches the pair's piece number; p2pConsumed(q, s):
  // I have read q's piece of that number from q's segment.
  volatile uint32_t* p2pPosted(int q, size_t s) const { return line(4 * slots + 5 + static_cast<size_t>(q) * p2pSlots + s); }
  volatile uint32_t* p2pConsumed(int q, size_t s) const {
    return line(4 * slots + 5 + (nranks + static_cast<size_t>(q)) * p2pSlots + s);
  }
  // The low-latency collectives (kernels/low_latency.h): my words of the
  // calls of one parity, and the last call whose words I have read. In a
  // relayed mirror, a call's words land first in the landing area of its
  // parity, whence the relay stores them word by word (a word must never
  // be seen half written).
  size_t lowLatencyWordsOffset(uint32_t call) const {
    return lowLatencyOffset() + (call % 2) * low_latency::bufferBytes(lowLatencyBytes);
  }
  size_t lowLatencyLandingOffset(uint32_t call) const {
    return lowLatencyOffset() + (2 + call % 2) * low_latency::bufferBytes(lowLatencyBytes);
  }
  // The one-shot collectives (stream_one_shot.cc): my input of the calls
  // of one parity, and the last call whose input I have posted there.
  char* oneShotData(uint32_t call) const { return shared.base() + oneShotOffset() + (call % 2) * oneShotBufferBytes(); }
  volatile uint32_t* oneShotPosted() const { return line(4 * slots + 5 + 2 * nranks * p2pSlots + 1); }
  volatile uint32_t* lowLatencyRead() const { return line(4 * slots + 5 + 2 * nranks * p2pSlots); }

  char* p2pData(int q, size_t s) const {
    return shared.base() + p2pDataOffset() + (static_cast<size_t>(q) * p2pSlots + s) * partBytes;
  }
  // A small send's words for q in slot s (kernels/low_latency_p2p.h): an
  // area of words only, so that a receive polling it never takes a copied
  // piece's bytes for words of its number. In a relayed mirror, the words
  // land first in the slot's data part (which the pair's protocol leaves
  // free until the piece is consumed), whence the relay stores them word
  // by word.
  uint64_t* p2pWords(int q, size_t s) const {
    return reinterpret_cast<uint64_t*>(shared.base() + p2pWordsOffset() +
                                       (static_cast<size_t>(q) * p2pSlots + s) * p2pWordsBytes());
  }
  stream_layout::P2pRecord* p2pRecord(int q, uint64_t call) const {
    return reinterpret_cast<stream_layout::P2pRecord*>(shared.base() + p2pRecordsOffset()) +
           static_cast<size_t>(q) * stream_layout::kP2pRing + call % stream_layout::kP2pRing;
  }
};

}  // namespace hetccl
