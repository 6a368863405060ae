// libFuzzer target: a stream relay header from a peer (src/plan/
// relay_message.h) against a mirror of the segment geometry the input
// picks, and two ranks' call records (src/transport/relay/stream_records.h) as a
// peer may have left them. An accepted header places its data inside the
// mirror, names a slot or flag line that exists and carries a record of
// exactly a record's size; the flag it raises (kinds 0-3: line kind *
// slots + slot) is one of the mirror's flag lines.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "transport/relay/relay_message.h"
#include "transport/relay/stream_records.h"

namespace {

void header(const uint8_t* data, size_t size) {
  struct {
    uint64_t mirrorBytes;
    uint16_t slots, p2pLines;
  } geometry{};
  hetccl::RelayMessage m{};
  if (size < sizeof geometry + sizeof m) return;
  memcpy(&geometry, data, sizeof geometry);
  memcpy(&m, data + sizeof geometry, sizeof m);
  const size_t slots = geometry.slots % 64 + 2;
  const size_t flagLines = 4 * slots + 5 + geometry.p2pLines % 256;  // as StreamCollectives::Segment lays them out
  const size_t mirrorBytes = geometry.mirrorBytes >> (geometry.mirrorBytes & 63);
  if (!hetccl::relayMessageFits(m, mirrorBytes, slots, flagLines)) return;
  using namespace hetccl::relay_kind;
  using u128 = unsigned __int128;
  if (m.kind > kP2pWords) __builtin_trap();
  if (m.kind == kP2pWords && m.bytes % 16 != 0) __builtin_trap();
  if (m.kind == kLowLatencyLanded && m.bytes) __builtin_trap();
  if (m.kind == kLowLatency && (m.offset % 8 != 0 || m.bytes % 16 != 0)) __builtin_trap();
  if (u128(m.offset) + m.bytes > mirrorBytes) __builtin_trap();
  if (m.kind == kCall && m.bytes != sizeof(hetccl::stream_layout::CallRecord)) __builtin_trap();
  if (m.kind == kP2pRecord && m.bytes != sizeof(hetccl::stream_layout::P2pRecord)) __builtin_trap();
  if (m.kind == kFlagLine && m.slot >= flagLines) __builtin_trap();
  if (m.kind <= kGathered && size_t{m.kind} * slots + m.slot >= flagLines) __builtin_trap();
}

// A record as a peer's segment holds it: read for call `call` (which a
// reader only takes when the record says so), compared with this rank's.
void records(const uint8_t* data, size_t size) {
  hetccl::stream_layout::CallRecord theirs{}, mine{}, read{};
  uint64_t call = 0;
  if (size < sizeof theirs + sizeof mine + sizeof call) return;
  memcpy(&theirs, data, sizeof theirs);
  memcpy(&mine, data + sizeof theirs, sizeof mine);
  memcpy(&call, data + sizeof theirs + sizeof mine, sizeof call);
  const bool taken = hetccl::stream_layout::readRecord(&theirs, call, &read);
  if (taken != (theirs.call == call)) __builtin_trap();
  if (!taken) return;
  if (!hetccl::stream_layout::sameShape(read, read) ||
      hetccl::stream_layout::sameShape(read, mine) != hetccl::stream_layout::sameShape(mine, read))
    __builtin_trap();
  if (hetccl::stream_layout::sameShape(read, mine) && (read.count != mine.count || read.root != mine.root)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if (data[0] & 1) records(data + 1, size - 1);
  else header(data + 1, size - 1);
  return 0;
}
