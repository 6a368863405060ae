#include "plan/stream_collectives.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "common/error.h"
#include "common/log.h"
#include "plan/host_staging.h"

namespace hetccl {

namespace {

constexpr size_t kLine = 64;      // one flag per cache line
constexpr size_t kCallRing = 64;  // calls whose shapes a rank keeps published
constexpr size_t kPage = 4096;

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

size_t alignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

// A rank's segment: flags, published calls, then per slot one send part
// per rank (the part that rank owns) and the rank's reduced part.
struct StreamCollectives::Segment {
  SharedSegment shared;
  size_t slots = 0, nranks = 0, partBytes = 0;
  bool registered = false;  // as pinned memory with this process's runtime

  static size_t flagsBytes(size_t slots) { return alignUp((4 * slots + 5) * kLine, kPage); }
  static size_t dataOffset(size_t slots) { return alignUp(flagsBytes(slots) + kCallRing * sizeof(CallRecord), kPage); }
  static size_t bytesFor(size_t slots, size_t nranks, size_t partBytes) {
    return dataOffset(slots) + slots * (nranks + 1) * partBytes;
  }
  volatile uint32_t* flag(size_t kind, size_t slot) const {
    return reinterpret_cast<volatile uint32_t*>(shared.base() + (kind * slots + slot) * kLine);
  }
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
  CallRecord* call(uint64_t index) const {
    return reinterpret_cast<CallRecord*>(shared.base() + flagsBytes(slots)) + index % kCallRing;
  }
  char* sendPart(size_t slot, int owner) const {
    return shared.base() + dataOffset(slots) + (slot * (nranks + 1) + static_cast<size_t>(owner)) * partBytes;
  }
  char* reducedPart(size_t slot) const { return shared.base() + dataOffset(slots) + (slot * (nranks + 1) + nranks) * partBytes; }
};

StreamCollectives::StreamCollectives(const StreamSetup& setup)
    : setup_(setup), rt_(*setup.runtime), rank_(setup.rank), nranks_(setup.nranks), slots_(std::max(2, setup.slots)),
      partBytes_(alignUp(std::max<size_t>(setup.partBytes, 4096), 256)) {}

ncclResult_t StreamCollectives::create(const StreamSetup& setup, std::unique_ptr<StreamCollectives>* out) {
  out->reset();
  std::unique_ptr<StreamCollectives> s(new StreamCollectives(setup));
  // What each rank can set up alone (memory, registration, streams) may
  // fail on some rank; the ranks agree before anyone waits for a peer, and
  // then all use the path or none does (host staging stays correct).
  ncclResult_t local = setup.failSetupForTest ? fail(ncclSystemError, "stream setup failed on purpose (test)")
                                              : s->prepare();
  if (local != ncclSuccess)
    HETCCL_WARN("rank %d: stream collectives unavailable here (%s); every rank takes the host-staged path", setup.rank,
                lastError());
  std::vector<uint8_t> ready(static_cast<size_t>(setup.nranks), 0);
  ready[static_cast<size_t>(setup.rank)] = local == ncclSuccess ? 1 : 0;
  HETCCL_TRY(setup.ring->allGather(ready.data(), 1, Deadline(setup.timeoutSeconds), setup.abort));
  for (int r = 0; r < setup.nranks; ++r)
    if (!ready[static_cast<size_t>(r)]) {
      HETCCL_INFO("rank %d: stream collectives off: rank %d could not set them up", setup.rank, r);
      return ncclSuccess;
    }
  HETCCL_TRY(s->join());
  s->watchdog_ = std::thread(&StreamCollectives::watch, s.get());
  s->issuer_ = std::thread(&StreamCollectives::issueLoop, s.get());
  *out = std::move(s);
  return ncclSuccess;
}

ncclResult_t StreamCollectives::prepare() {
  HETCCL_TRY(rt_.currentDevice(&device_));
  HETCCL_TRY(makeReducer(rt_, &reducer_));
  removeStaleSegments();
  segments_.resize(static_cast<size_t>(nranks_));
  for (int r = 0; r < nranks_; ++r) {
    auto seg = std::make_unique<Segment>();
    seg->slots = static_cast<size_t>(slots_);
    seg->nranks = static_cast<size_t>(nranks_);
    seg->partBytes = partBytes_;
    segments_[static_cast<size_t>(r)] = std::move(seg);
  }
  Segment& mine = *segments_[static_cast<size_t>(rank_)];
  HETCCL_TRY(mine.shared.create(sharedSegmentName(setup_.secret, "stream", rank_, rank_, getpid()), segmentBytes()));
  HETCCL_TRY(rt_.registerHost(mine.shared.base(), mine.shared.bytes()));
  mine.registered = true;
  void* incoming = nullptr;
  HETCCL_TRY(rt_.allocDevice(&incoming, static_cast<size_t>(slots_) * static_cast<size_t>(nranks_) * partBytes_));
  incoming_ = static_cast<char*>(incoming);
  void* outgoing = nullptr;
  HETCCL_TRY(rt_.allocDevice(&outgoing, static_cast<size_t>(nranks_) * partBytes_));
  outgoing_ = static_cast<char*>(outgoing);
  for (Stream* s : {&send_, &reduce_, &result_, &gather_}) HETCCL_TRY(rt_.createStream(s));
  for (Event& e : startEvents_) HETCCL_TRY(rt_.createEvent(&e));
  reduced_.assign(static_cast<size_t>(slots_), nullptr);
  for (Event& e : reduced_) HETCCL_TRY(rt_.createEvent(&e));
  return ncclSuccess;
}

size_t StreamCollectives::segmentBytes() const {
  return Segment::bytesFor(static_cast<size_t>(slots_), static_cast<size_t>(nranks_), partBytes_);
}

ncclResult_t StreamCollectives::join() {
  const size_t bytes = segmentBytes();
  const Deadline deadline(setup_.timeoutSeconds);
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    SharedSegment& peer = segments_[static_cast<size_t>(r)]->shared;
    HETCCL_TRY(peer.open(sharedSegmentName(setup_.secret, "stream", r, r, setup_.pids[static_cast<size_t>(r)]), bytes,
                         deadline, setup_.abort));
    if (peer.bytes() != bytes)
      return fail(ncclInternalError, "rank %d's stream staging has %zu bytes, rank %d's %zu", r, peer.bytes(), rank_,
                  bytes);
  }
  HETCCL_TRY(setup_.ring->barrier(deadline, setup_.abort));  // everyone holds every segment: drop the names
  for (auto& seg : segments_) seg->shared.unlink();
  for (auto& seg : segments_) {
    if (seg->registered) continue;
    HETCCL_TRY(rt_.registerHost(seg->shared.base(), seg->shared.bytes()));
    seg->registered = true;
  }
  return ncclSuccess;
}

StreamCollectives::~StreamCollectives() {
  // Queued calls are issued, then the streams finish them (the watchdog,
  // still running, releases them if a peer is gone).
  {
    std::lock_guard<std::mutex> lock(queueMutex_);
    stopIssuing_ = true;
  }
  queueCv_.notify_all();
  if (issuer_.joinable()) issuer_.join();
  for (Stream s : {send_, reduce_, result_, gather_})
    if (s) rt_.synchronize(s);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  for (Stream s : {send_, reduce_, result_, gather_})
    if (s) rt_.destroyStream(s);
  for (Event e : reduced_)
    if (e) rt_.destroyEvent(e);
  for (Event e : startEvents_)
    if (e) rt_.destroyEvent(e);
  if (incoming_) rt_.freeDevice(incoming_);
  if (outgoing_) rt_.freeDevice(outgoing_);
  for (auto& seg : segments_)
    if (seg->registered) rt_.unregisterHost(seg->shared.base());
}

StreamCollectives::Part StreamCollectives::partOf(size_t start, size_t length, int owner) const {
  const size_t n = static_cast<size_t>(nranks_), q = static_cast<size_t>(owner);
  const size_t begin = length * q / n, end = length * (q + 1) / n;
  return Part{start + begin, end - begin};
}

ncclResult_t StreamCollectives::checkBuffers(const Op& op) {
  const Extents used = extentsOf(op, rank_, nranks_);  // e.g. a broadcast's sendbuff only at the root
  const struct {
    const void* p;
    const char* what;
  } buffers[] = {{used.sendBytes ? op.sendbuff : nullptr, "sendbuff"}, {used.recvBytes ? op.recvbuff : nullptr, "recvbuff"}};
  for (const auto& b : buffers) {
    if (!b.p || b.p == checked_[0] || b.p == checked_[1]) continue;  // the last two are known good
    HETCCL_TRY(checkDeviceBuffer(rt_, b.p, b.what, op.kind));
    checked_[1] = checked_[0];
    checked_[0] = b.p;
  }
  return refuseCapture(rt_, op.stream, op.kind);
}

ncclResult_t StreamCollectives::publishCall(const Op& op, uint64_t call) {
  // Published first, so that a peer's watchdog sees a mismatch too.
  CallRecord* slot = segments_[static_cast<size_t>(rank_)]->call(call);
  __atomic_store_n(&slot->call, 0, __ATOMIC_RELEASE);  // readers skip a record being written
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  slot->count = op.count;
  slot->type = static_cast<uint32_t>(op.type);
  slot->kind = static_cast<uint32_t>(op.red.kind);
  slot->average = op.red.average ? 1u : 0u;
  slot->collective = static_cast<uint32_t>(op.kind);
  const bool rooted = op.kind == OpKind::Broadcast || op.kind == OpKind::Reduce || op.kind == OpKind::Gather ||
                     op.kind == OpKind::Scatter;
  slot->root = rooted ? op.root : -1;
  __atomic_store_n(&slot->call, call, __ATOMIC_RELEASE);
  return checkCall(call);
}

namespace {
// A consistent copy of the record of `call`, or false (not published, or
// being rewritten).
bool readCall(const CallRecord* slot, uint64_t call, CallRecord* out) {
  if (__atomic_load_n(&slot->call, __ATOMIC_ACQUIRE) != call) return false;
  out->count = __atomic_load_n(&slot->count, __ATOMIC_RELAXED);
  out->type = __atomic_load_n(&slot->type, __ATOMIC_RELAXED);
  out->kind = __atomic_load_n(&slot->kind, __ATOMIC_RELAXED);
  out->average = __atomic_load_n(&slot->average, __ATOMIC_RELAXED);
  out->collective = __atomic_load_n(&slot->collective, __ATOMIC_RELAXED);
  out->root = __atomic_load_n(&slot->root, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  return __atomic_load_n(&slot->call, __ATOMIC_RELAXED) == call;
}
}  // namespace

ncclResult_t StreamCollectives::checkCall(uint64_t call) const {
  CallRecord mine, theirs;
  if (!readCall(segments_[static_cast<size_t>(rank_)]->call(call), call, &mine)) return ncclSuccess;
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    if (readCall(segments_[static_cast<size_t>(r)]->call(call), call, &theirs) &&
        (theirs.count != mine.count || theirs.type != mine.type || theirs.kind != mine.kind ||
         theirs.average != mine.average || theirs.collective != mine.collective || theirs.root != mine.root))
      return fail(ncclInvalidUsage,
                  "collective call %llu across domains does not match across ranks: rank %d has %s of count %llu, "
                  "type %u, rank %d %s of count %llu, type %u (or a different op or root)",
                  static_cast<unsigned long long>(call), r, opKindName(static_cast<OpKind>(theirs.collective)),
                  static_cast<unsigned long long>(theirs.count), theirs.type, rank_,
                  opKindName(static_cast<OpKind>(mine.collective)), static_cast<unsigned long long>(mine.count), mine.type);
  }
  return ncclSuccess;
}

ncclResult_t StreamCollectives::enqueue(const Op& op) {
  if (released_.load()) return fail(ncclRemoteError, "%s: the communicator's streams were released after an error", opKindName(op.kind));
  if (uint32_t who = __atomic_load_n(segments_[static_cast<size_t>(rank_)]->broken(), __ATOMIC_ACQUIRE)) {
    ncclResult_t r = fail(ncclRemoteError, "%s: rank %u gave up after an error", opKindName(op.kind), who - 1);
    if (setup_.onError) setup_.onError(r);
    released_.store(true);
    return r;
  }
  HETCCL_TRY(checkBuffers(op));
  if (ncclResult_t r = publishCall(op, ++calls_); r != ncclSuccess) {
    // The ranks' calls are out of step: no later call can be right.
    if (setup_.onError) setup_.onError(r);
    release();
    return r;
  }
  if (op.count == 0) return ncclSuccess;
  // The call only marks its place on the caller's stream (an event the
  // issuing thread makes the streams wait for; flags the caller's stream
  // waits for) and hands the pieces to the issuing thread.
  std::unique_lock<std::mutex> lock(queueMutex_);
  const uint32_t ticket = ++tickets_;
  queueCv_.wait(lock, [&] { return ticket - issuedCalls_ <= kStartEvents || released_.load(); });  // its event is free
  if (released_.load())
    return fail(ncclRemoteError, "%s: the communicator's streams were released after an error", opKindName(op.kind));
  Event start = startEvents_[ticket % kStartEvents];
  HETCCL_TRY(rt_.recordEvent(start, op.stream));
  jobs_.push_back(Job{op, ticket, start});
  lock.unlock();
  queueCv_.notify_all();
  // (A host rank's "stream" waits right here, until the pieces are done.)
  const Segment& mine = *segments_[static_cast<size_t>(rank_)];
  for (size_t i = 0; i < 4; ++i) HETCCL_TRY(rt_.waitFlag(op.stream, mine.done(i), ticket));
  return ncclSuccess;
}

void StreamCollectives::issueLoop() {
  rt_.setDevice(device_);  // the streams, events and kernels are this rank's device's
  std::unique_lock<std::mutex> lock(queueMutex_);
  for (;;) {
    queueCv_.wait(lock, [&] { return stopIssuing_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, nothing left
    Job job = jobs_.front();
    jobs_.pop_front();
    lock.unlock();
    ncclResult_t r = released_.load() ? ncclRemoteError : issue(job);
    if (r != ncclSuccess && !released_.load()) {
      HETCCL_WARN("rank %d: could not queue a collective: %s", rank_, lastError());
      if (setup_.onError) setup_.onError(r);
      release();  // also raises the flags the caller's stream waits for
    }
    lock.lock();
    issuedCalls_ = job.ticket;
    queueCv_.notify_all();
  }
}

ncclResult_t StreamCollectives::issue(const Job& job) {
  const Op& op = job.op;
  Stream streams[4] = {send_, reduce_, result_, gather_};
  for (Stream s : streams) HETCCL_TRY(rt_.waitEvent(s, job.start));
  const size_t es = typeSize(op.type);
  // All-reduce cuts a piece into one part per rank; the others move one
  // part-sized slice of every rank's block per piece.
  const size_t perPiece = op.kind == OpKind::AllReduce ? static_cast<size_t>(nranks_) : 1;
  size_t pieceElems = perPiece * (partBytes_ / es);
  // HETCCL_STREAM_MIN_PIECES: a message that fits in fewer pieces is cut
  // into that many (not below 16 KiB per part), so its copies overlap.
  const size_t floorElems = perPiece * std::max<size_t>(1, (16 << 10) / es);
  const size_t wanted = (op.count + setup_.minPieces - 1) / setup_.minPieces;
  pieceElems = std::min(pieceElems, std::max(floorElems, wanted));
  // My own input's place in my output, copied once, unless in place.
  const size_t block = op.count * es, mineAt = static_cast<size_t>(rank_) * block;
  char* recv = static_cast<char*>(op.recvbuff);
  const char* send = static_cast<const char*>(op.sendbuff);
  const bool root = rank_ == op.root;
  char* ownTo = nullptr;
  const char* ownFrom = send;
  switch (op.kind) {
    case OpKind::AllGather: ownTo = recv + mineAt; break;
    case OpKind::AlltoAll: ownTo = recv + mineAt; ownFrom = send + mineAt; break;
    case OpKind::Broadcast: ownTo = root ? recv : nullptr; break;
    case OpKind::Gather: ownTo = root ? recv + mineAt : nullptr; break;
    case OpKind::Scatter: ownTo = root ? recv : nullptr; ownFrom = send + mineAt; break;
    default: break;
  }
  if (ownTo && ownTo != ownFrom) HETCCL_TRY(rt_.copyAsync(ownTo, ownFrom, block, gather_));
  for (size_t start = 0; start < op.count; start += pieceElems) {
    const uint32_t seq = issued_.load() + 1;
    issued_.store(seq);  // in flight from now on (a host rank's "stream" may block in it)
    cv_.notify_all();
    HETCCL_TRY(queuePiece(op, start, std::min(pieceElems, op.count - start), seq));
  }
  const Segment& mine = *segments_[static_cast<size_t>(rank_)];
  for (size_t i = 0; i < 4; ++i) HETCCL_TRY(rt_.writeFlag(streams[i], mine.done(i), job.ticket));
  return ncclSuccess;
}

void StreamCollectives::shapeOf(const Op& op, size_t start, size_t length, Shape* out) const {
  // Filled in place: the issuing thread reuses one Shape (no allocation per piece).
  Shape& sh = *out;
  const size_t n = static_cast<size_t>(nranks_);
  sh.reduces = sh.gathers = sh.exchanges = sh.mineFromSend = false;
  sh.reducedAt = 0;
  sh.mine = Part{0, 0};
  sh.toRank.assign(n, Part{0, 0});
  sh.fromRank.assign(n, Part{0, 0});
  sh.landsAt.assign(n, Part{0, 0});
  switch (op.kind) {
    case OpKind::AllReduce:  // part q of the piece is reduced by rank q, then gathered everywhere
      sh.reduces = sh.gathers = true;
      for (int q = 0; q < nranks_; ++q) {
        sh.toRank[static_cast<size_t>(q)] = partOf(start, length, q);
        sh.landsAt[static_cast<size_t>(q)] = sh.toRank[static_cast<size_t>(q)];
      }
      sh.reducedAt = sh.toRank[static_cast<size_t>(rank_)].offset;
      sh.mine = sh.toRank[static_cast<size_t>(rank_)];
      break;
    case OpKind::ReduceScatter:  // the slice of block q goes to rank q
      sh.reduces = true;
      for (size_t q = 0; q < n; ++q) sh.toRank[q] = Part{q * op.count + start, length};
      sh.reducedAt = start;
      break;
    case OpKind::Reduce:  // every rank's slice goes to the root, which reduces it
      sh.reduces = true;
      sh.toRank[static_cast<size_t>(op.root)] = Part{start, length};
      sh.reducedAt = start;
      break;
    case OpKind::Broadcast:  // the root's slice goes to every rank
      sh.gathers = true;
      sh.mineFromSend = true;
      if (rank_ == op.root) sh.mine = Part{start, length};
      sh.landsAt[static_cast<size_t>(op.root)] = Part{start, length};
      break;
    case OpKind::AlltoAll:  // block q's slice goes to rank q, which puts it in its block `rank_`
      sh.exchanges = true;
      for (size_t q = 0; q < n; ++q) sh.toRank[q] = sh.fromRank[q] = Part{q * op.count + start, length};
      break;
    case OpKind::Gather:  // every rank's slice goes to the root's block of that rank
      sh.exchanges = true;
      sh.toRank[static_cast<size_t>(op.root)] = Part{start, length};
      if (rank_ == op.root)
        for (size_t q = 0; q < n; ++q) sh.fromRank[q] = Part{q * op.count + start, length};
      break;
    case OpKind::Scatter:  // the root's block q goes to rank q
      sh.exchanges = true;
      if (rank_ == op.root)
        for (size_t q = 0; q < n; ++q) sh.toRank[q] = Part{q * op.count + start, length};
      sh.fromRank[static_cast<size_t>(op.root)] = Part{start, length};
      break;
    default:  // all-gather: my slice goes to every rank's block `rank_`
      sh.gathers = true;
      sh.mineFromSend = true;
      sh.mine = Part{start, length};
      for (size_t q = 0; q < n; ++q) sh.landsAt[q] = Part{q * op.count + start, length};
      break;
  }
}

ncclResult_t StreamCollectives::queuePiece(const Op& op, size_t start, size_t length, uint32_t seq) {
  const size_t slot = (seq - 1) % static_cast<size_t>(slots_);
  const uint32_t reuse = seq > static_cast<uint32_t>(slots_) ? seq - static_cast<uint32_t>(slots_) : 0;
  const size_t es = typeSize(op.type);
  const char* send = static_cast<const char*>(op.sendbuff);
  char* recv = static_cast<char*>(op.recvbuff);
  Segment& mine = *segments_[static_cast<size_t>(rank_)];
  auto peer = [&](int r) -> Segment& { return *segments_[static_cast<size_t>(r)]; };
  shapeOf(op, start, length, &shape_);
  const Shape& sh = shape_;
  // Every piece raises every flag, also for a phase its collective skips,
  // so slots are reused the same way whatever ran in them before.

  // Phase 1 (reduce-scatter). Send stream: the parts the peers reduce,
  // into my slot, once they have all read what the slot held before.
  for (int q = 0; q < nranks_; ++q) {
    if (q == rank_) continue;
    if (reuse) HETCCL_TRY(rt_.waitFlag(send_, peer(q).consumed(slot), reuse));
    const Part p = sh.reduces || sh.exchanges ? sh.toRank[static_cast<size_t>(q)] : Part{0, 0};
    if (!p.count) continue;
    const void* from = send + p.offset * es;
    if (op.red.kind == RedKind::PreMulSum) {  // each rank scales its own input by its own scalar
      char* scaled = outgoing_ + static_cast<size_t>(q) * partBytes_;
      HETCCL_TRY(reducer_->prepare(op.red, scaled, from, p.count, send_));
      from = scaled;
    }
    HETCCL_TRY(rt_.copyAsync(mine.sendPart(slot, q), from, p.count * es, send_));
  }
  HETCCL_TRY(rt_.writeFlag(send_, mine.posted(slot), seq));

  // Reduce stream: every peer's copy of my part, then the reduction (my own
  // input first, then the peers' in rank order) into the output.
  const Part own = sh.reduces ? sh.toRank[static_cast<size_t>(rank_)] : Part{0, 0};
  auto incoming = [&](int q) {
    return incoming_ + (slot * static_cast<size_t>(nranks_) + static_cast<size_t>(q)) * partBytes_;
  };
  // Exchanges land in the output, which in place is also the input: only
  // once my own send stream has read this piece.
  if (sh.exchanges) HETCCL_TRY(rt_.waitFlag(reduce_, mine.posted(slot), seq));
  for (int q = 0; q < nranks_; ++q) {
    if (q == rank_) continue;
    HETCCL_TRY(rt_.waitFlag(reduce_, peer(q).posted(slot), seq));
    const Part from = sh.fromRank[static_cast<size_t>(q)];
    if (sh.exchanges && from.count)
      HETCCL_TRY(rt_.copyAsync(recv + from.offset * es, peer(q).sendPart(slot, rank_), from.count * es, reduce_));
    if (own.count) HETCCL_TRY(rt_.copyAsync(incoming(q), peer(q).sendPart(slot, rank_), own.count * es, reduce_));
  }
  HETCCL_TRY(rt_.writeFlag(reduce_, mine.consumed(slot), seq));
  if (own.count) {
    char* out = recv + sh.reducedAt * es;
    const Reduction& red = op.red;
    const Reduction merge = red.merging();  // the peers' parts come scaled already
    const void* acc = send + own.offset * es;
    if (red.kind == RedKind::PreMulSum) {
      HETCCL_TRY(reducer_->prepare(red, out, acc, own.count, reduce_));
      acc = out;
    }
    for (int q = 0; q < nranks_; ++q) {
      if (q == rank_) continue;
      HETCCL_TRY(reducer_->reduce(merge, out, acc, incoming(q), own.count, reduce_));
      acc = out;
    }
    if (red.average) HETCCL_TRY(reducer_->average(red, out, own.count, nranks_, reduce_));
  }
  HETCCL_TRY(rt_.recordEvent(reduced_[slot], reduce_));

  // Phase 2 (all-gather). Result stream: my part (reduced, or my input),
  // for the peers.
  HETCCL_TRY(rt_.waitEvent(result_, reduced_[slot]));
  for (int q = 0; q < nranks_ && reuse; ++q)
    if (q != rank_) HETCCL_TRY(rt_.waitFlag(result_, peer(q).gathered(slot), reuse));
  if (sh.gathers && sh.mine.count) {
    const char* from = (sh.mineFromSend ? send : recv) + sh.mine.offset * es;
    HETCCL_TRY(rt_.copyAsync(mine.reducedPart(slot), from, sh.mine.count * es, result_));
  }
  HETCCL_TRY(rt_.writeFlag(result_, mine.reduced(slot), seq));

  // Gather stream: the peers' parts, into the output.
  for (int q = 0; q < nranks_; ++q) {
    if (q == rank_) continue;
    HETCCL_TRY(rt_.waitFlag(gather_, peer(q).reduced(slot), seq));
    const Part p = sh.gathers ? sh.landsAt[static_cast<size_t>(q)] : Part{0, 0};
    if (p.count) HETCCL_TRY(rt_.copyAsync(recv + p.offset * es, peer(q).reducedPart(slot), p.count * es, gather_));
  }
  return rt_.writeFlag(gather_, mine.gathered(slot), seq);
}

uint32_t StreamCollectives::completedPieces() const {
  // The gather stream raises its flags in sequence order: the highest is
  // the last piece this rank has finished.
  uint32_t best = 0;
  const Segment& mine = *segments_[static_cast<size_t>(rank_)];
  for (size_t s = 0; s < static_cast<size_t>(slots_); ++s)
    best = std::max(best, __atomic_load_n(mine.gathered(s), __ATOMIC_ACQUIRE));
  return best;
}

ncclResult_t StreamCollectives::checkPeers() {
  for (int r = 0; r < nranks_; ++r)
    if (r != rank_) HETCCL_TRY(peerAlive(setup_.pids[static_cast<size_t>(r)], r));
  // Calls both sides have published must match (the calling thread checks
  // too, but only against calls the peer had already made).
  const uint64_t calls = calls_.load();
  for (uint64_t c = calls > kCallRing ? calls - kCallRing + 1 : 1; c <= calls; ++c) HETCCL_TRY(checkCall(c));
  return ncclSuccess;
}

void StreamCollectives::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  uint32_t lastDone = 0;
  auto lastMove = std::chrono::steady_clock::now();
  while (!stop_) {
    const uint32_t issued = issued_.load();
    cv_.wait_for(lock, std::chrono::milliseconds(issued > lastDone ? 20 : 200));
    if (stop_ || released_.load()) continue;
    if (uint32_t who = __atomic_load_n(segments_[static_cast<size_t>(rank_)]->broken(), __ATOMIC_ACQUIRE)) {
      // A peer gave up (and raised the flags): what is in flight is wrong.
      ncclResult_t r = fail(ncclRemoteError, "collective across domains: rank %u gave up after an error", who - 1);
      if (setup_.onError) setup_.onError(r);
      released_.store(true);
      continue;
    }
    const uint32_t done = completedPieces();
    const auto now = std::chrono::steady_clock::now();
    if (done != lastDone) {
      lastDone = done;
      lastMove = now;
    }
    if (issued_.load() <= done) {
      lastMove = now;
      continue;
    }
    ncclResult_t r = checkPeers();
    if (r == ncclSuccess && std::chrono::duration<double>(now - lastMove).count() > setup_.timeoutSeconds)
      r = fail(ncclRemoteError, "collective across domains made no progress for %.0f s (HETCCL_TIMEOUT): a peer "
               "has not made the matching call", setup_.timeoutSeconds);
    if (r != ncclSuccess) {
      HETCCL_WARN("rank %d: %s; releasing the streams", rank_, lastError());
      if (setup_.onError) setup_.onError(r);
      lock.unlock();
      release();
      lock.lock();
    }
  }
}

void StreamCollectives::release() {
  released_.store(true);
  for (auto& seg : segments_)  // the peers learn that this rank gave up
    if (seg->shared.base()) __atomic_store_n(seg->broken(), static_cast<uint32_t>(rank_ + 1), __ATOMIC_RELEASE);
  // Every flag far above any value a stream can wait for (also a peer that
  // queued more pieces; GPUs compare modulo 2^32, within 2^31): the waits
  // end (the data is then meaningless; the error says so).
  const uint32_t high = issued_.load() + (1u << 30);
  for (auto& seg : segments_) {
    if (!seg->shared.base()) continue;
    for (size_t kind = 0; kind < 4; ++kind)
      for (size_t s = 0; s < static_cast<size_t>(slots_); ++s) __atomic_store_n(seg->flag(kind, s), high, __ATOMIC_RELEASE);
  }
  const Segment& mine = *segments_[static_cast<size_t>(rank_)];
  if (mine.shared.base())
    for (size_t i = 0; i < 4; ++i) __atomic_store_n(mine.done(i), tickets_.load() + (1u << 30), __ATOMIC_RELEASE);
  queueCv_.notify_all();
}

}  // namespace hetccl
