// What travels between two ranks' stream relays (stream_relay.h): a
// header, then `bytes` of data for `offset` in the sender's segment (the
// receiver's mirror of it). The kinds, and the check every header from a
// peer passes before its data is placed (fuzz/fuzz_stream_relay.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/relay/stream_records.h"

namespace hetccl {

struct RelayMessage {
  uint32_t kind;   // relay_kind::
  uint32_t slot;
  uint32_t value;
  uint32_t more;   // the link's own (the plugin link: 2 when the data travels apart)
  uint64_t offset;
  uint64_t bytes;
};

namespace relay_kind {
// A slot's flag (posted, consumed, reduced, gathered), after its data.
constexpr uint32_t kPosted = 0, kConsumed = 1, kReduced = 2, kGathered = 3;
constexpr uint32_t kBroken = 4;      // the peer gave up (value: its rank + 1)
constexpr uint32_t kCall = 5;        // a call record (stream_layout::CallRecord)
constexpr uint32_t kBye = 6;         // the peer is done with the communicator
constexpr uint32_t kFlagLine = 7;    // a send/recv flag: `slot` is the flag line
constexpr uint32_t kP2pRecord = 8;   // a send's size (stream_layout::P2pRecord)
constexpr uint32_t kLowLatency = 9;  // a low-latency call's words (value: the call), for the mirror's landing area
constexpr uint32_t kLowLatencyLanded = 10;  // the reply: that call's words are in the mirror (no data)
constexpr uint32_t kP2pWords = 11;  // a small send's words (value: the piece), for the slot's data part
}  // namespace relay_kind

// Whether a peer's header fits its mirror (`mirrorBytes` long, `slots`
// slots, `flagLines` flag lines): a known kind, a slot (or flag line) that
// exists, data inside the mirror, a record of exactly a record's size, and
// low-latency words whole (and a collective's aligned; a small send's
// land in a data part, which may start anywhere).
inline bool relayMessageFits(const RelayMessage& m, size_t mirrorBytes, size_t slots, size_t flagLines) {
  using namespace relay_kind;
  const size_t slotLimit = m.kind == kFlagLine ? flagLines : slots;
  return m.kind <= kP2pWords && m.slot < slotLimit && m.offset <= mirrorBytes && m.bytes <= mirrorBytes - m.offset &&
         (m.kind != kLowLatency || (m.offset % 8 == 0 && m.bytes % 16 == 0)) && (m.kind != kP2pWords || m.bytes % 16 == 0) &&
         (m.kind != kLowLatencyLanded || m.bytes == 0) &&
         (m.kind != kCall || m.bytes == sizeof(stream_layout::CallRecord)) &&
         (m.kind != kP2pRecord || m.bytes == sizeof(stream_layout::P2pRecord));
}

}  // namespace hetccl
