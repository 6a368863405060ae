// The records each rank publishes in its stream segment (stream_segment.h)
// for its peers to check their own calls against: every call's shape, and
// the size of each send. Peers read them from shared memory, or from the
// relay's copy of it (relay_message.h): a peer's bytes, only compared,
// never used to size a copy.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hetccl {

namespace stream_layout {

constexpr size_t kCallRing = 64;  // calls whose shapes a rank keeps published

// One call's shape, published by each rank in its segment when queued.
struct CallRecord {
  uint64_t call;  // 1, 2, ...; 0: never written
  uint64_t count;
  uint32_t type;
  uint32_t kind;  // RedKind
  uint32_t average;
  uint32_t collective;  // OpKind
  int32_t root;         // broadcast, reduce
  uint32_t pad;
};

// Whether two ranks' records of one call describe the same call.
inline bool sameShape(const CallRecord& a, const CallRecord& b) {
  return a.count == b.count && a.type == b.type && a.kind == b.kind && a.average == b.average &&
         a.collective == b.collective && a.root == b.root;
}

// The size of the n-th send to a peer, published by the sender so the
// receiver can check its own call against it.
constexpr size_t kP2pRing = 16;
struct P2pRecord {
  uint64_t call;  // 1, 2, ...; 0: never written (or being rewritten)
  uint64_t bytes;
};

// Records are rewritten seqlock-style: `call` is cleared, the fields are
// stored, then `call` is set, and readers skip a record whose `call`
// changed meanwhile. Every access is atomic (relaxed for the fields):
// plain stores racing with the readers' loads would be a data race.
inline void storeFields(CallRecord* to, const CallRecord& from) {
  __atomic_store_n(&to->count, from.count, __ATOMIC_RELAXED);
  __atomic_store_n(&to->type, from.type, __ATOMIC_RELAXED);
  __atomic_store_n(&to->kind, from.kind, __ATOMIC_RELAXED);
  __atomic_store_n(&to->average, from.average, __ATOMIC_RELAXED);
  __atomic_store_n(&to->collective, from.collective, __ATOMIC_RELAXED);
  __atomic_store_n(&to->root, from.root, __ATOMIC_RELAXED);
}
inline void storeFields(P2pRecord* to, const P2pRecord& from) {
  __atomic_store_n(&to->bytes, from.bytes, __ATOMIC_RELAXED);
}
inline void loadFields(const CallRecord* from, CallRecord* to) {
  to->count = __atomic_load_n(&from->count, __ATOMIC_RELAXED);
  to->type = __atomic_load_n(&from->type, __ATOMIC_RELAXED);
  to->kind = __atomic_load_n(&from->kind, __ATOMIC_RELAXED);
  to->average = __atomic_load_n(&from->average, __ATOMIC_RELAXED);
  to->collective = __atomic_load_n(&from->collective, __ATOMIC_RELAXED);
  to->root = __atomic_load_n(&from->root, __ATOMIC_RELAXED);
}
inline void loadFields(const P2pRecord* from, P2pRecord* to) {
  to->bytes = __atomic_load_n(&from->bytes, __ATOMIC_RELAXED);
}
template <typename Record>
void writeRecord(Record* to, const Record& from) {
  __atomic_store_n(&to->call, uint64_t{0}, __ATOMIC_RELEASE);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  storeFields(to, from);
  __atomic_store_n(&to->call, from.call, __ATOMIC_RELEASE);
}
// A consistent copy of the record of `call`, or false (not written yet,
// or being rewritten).
template <typename Record>
bool readRecord(const Record* from, uint64_t call, Record* to) {
  if (__atomic_load_n(&from->call, __ATOMIC_ACQUIRE) != call) return false;
  *to = Record{};
  to->call = call;
  loadFields(from, to);
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  return __atomic_load_n(&from->call, __ATOMIC_RELAXED) == call;
}

}  // namespace stream_layout

}  // namespace hetccl
