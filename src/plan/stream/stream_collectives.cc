#include "plan/stream/stream_collectives.h"

#include <unistd.h>

#include <algorithm>
#include <mutex>

#include "bootstrap/bootstrap.h"
#include "common/error.h"
#include "common/log.h"
#include "plan/host_staging/host_staging.h"
#include "plan/stream/stream_graph_lane.h"
#include "plan/stream/stream_relay.h"
#include "plan/stream/stream_segment.h"

namespace hetccl {

using namespace stream_layout;


StreamCollectives::StreamCollectives(const StreamSetup& setup)
    : setup_(setup), rt_(*setup.runtime), rank_(setup.rank), nranks_(setup.nranks), slots_(std::max(2, setup.slots)),
      p2pSlots_(setup.p2p ? static_cast<size_t>(std::min(slots_, 4)) : 0),
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
  // Each rank's byte: 1 set up.
  std::vector<uint8_t> ready(static_cast<size_t>(setup.nranks), 0);
  ready[static_cast<size_t>(setup.rank)] = local != ncclSuccess ? 0 : 1;
  HETCCL_TRY(setup.ring->allGather(ready.data(), 1, Deadline(setup.timeoutSeconds), setup.abort));
  for (int r = 0; r < setup.nranks; ++r)
    if (!ready[static_cast<size_t>(r)]) {
      HETCCL_INFO("rank %d: stream collectives off: rank %d could not set them up", setup.rank, r);
      return ncclSuccess;
    }
  HETCCL_TRY(s->join());
  HETCCL_TRY(s->startRelay());
  s->watchdog_ = std::thread(&StreamCollectives::watch, s.get());
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
    seg->p2pSlots = p2pSlots_;
    seg->lowLatencyBytes = setup_.lowLatencyBytes;
    seg->oneShotBytes = everyRankSharesMemory() ? setup_.oneShotBytes : 0;
    segments_[static_cast<size_t>(r)] = std::move(seg);
  }
  Segment& mine = *segments_[static_cast<size_t>(rank_)];
  // Named in /dev/shm only when a rank of this host maps it; the relay's
  // ranks read it through their mirrors.
  bool mapped = false;
  for (int r = 0; r < nranks_; ++r) mapped |= r != rank_ && sharesMemory(r);
  if (mapped)
    HETCCL_TRY(mine.shared.create(sharedSegmentName(setup_.secret, "stream", rank_, rank_, getpid()), segmentBytes()));
  else
    HETCCL_TRY(mine.shared.createPrivate(segmentBytes()));
  HETCCL_TRY(mine.registerAll(rt_));
  for (StreamOwner* s : {&send_, &reduce_, &result_, &gather_, &p2pSend_, &p2pRecv_}) HETCCL_TRY(createStream(rt_, s));
  for (OwnedEvent& e : startEvents_) HETCCL_TRY(createEvent(rt_, &e));
  for (OwnedEvent& e : finished_) HETCCL_TRY(createEvent(rt_, &e));
  sendSeq_.reset(new std::atomic<uint32_t>[static_cast<size_t>(nranks_)]());
  recvSeq_.reset(new std::atomic<uint32_t>[static_cast<size_t>(nranks_)]());
  sendCalls_.assign(static_cast<size_t>(nranks_), 0);
  recvCalls_.assign(static_cast<size_t>(nranks_), 0);
  reduced_.resize(static_cast<size_t>(slots_));
  for (OwnedEvent& e : reduced_) HETCCL_TRY(createEvent(rt_, &e));
  return ncclSuccess;
}

ncclResult_t StreamCollectives::makeBuffers() {
  HETCCL_TRY(allocDevice(rt_, static_cast<size_t>(slots_) * static_cast<size_t>(nranks_) * partBytes_, &incoming_));
  return allocDevice(rt_, static_cast<size_t>(nranks_) * partBytes_, &outgoing_);
}

size_t StreamCollectives::deviceBytes() const {
  size_t lane = 0;
  if (lane_ && lane_->incoming)
    lane = (GraphLane::kSlots + 1) * lane_->nranks * lane_->partBytes;  // its incoming and outgoing parts
  return (incoming_ ? bufferBytes() : 0) + lane + oneShotScratchBytes();
}

size_t StreamCollectives::sharedPinnedBytes() const {
  size_t bytes = 0;
  for (const auto& seg : segments_)
    if (seg) bytes += seg->registeredBytes();
  return bytes;
}

size_t StreamCollectives::releasableBytes() const {
  size_t bytes = (incoming_ ? bufferBytes() : 0) + oneShotScratchBytes();
  if (!relay_)
    for (const auto& seg : segments_)
      if (seg && seg->dataRegistration) bytes += seg->dataBytes();
  return bytes;
}

ncclResult_t StreamCollectives::suspend(bool ready) {
  DeviceGuard onMyDevice(rt_, device_);
  HETCCL_TRY(onMyDevice.status());
  bool idle = lowLatencyIdle();  // my last low-latency kernel has read every rank's words
  for (OwnedEvent& e : finished_) {  // the last call's end on each of my streams
    bool done = false;
    HETCCL_TRY(rt_.eventDone(e.get(), &done));
    idle &= done;
  }
  if (lowLatencyDone_) {  // and of the last low-latency or one-shot call (its reduction, after the read word)
    bool done = false;
    HETCCL_TRY(rt_.eventDone(lowLatencyDone_.get(), &done));
    idle &= done;
  }
  // Every rank agrees first: all suspend, or none does (and none waits).
  std::vector<uint8_t> can(static_cast<size_t>(nranks_), 0);
  can[static_cast<size_t>(rank_)] = ready && idle;
  const Deadline deadline(setup_.timeoutSeconds);
  HETCCL_TRY(setup_.ring->allGather(can.data(), 1, deadline, setup_.abort));
  if (!idle)
    return fail(ncclInvalidUsage, "ncclCommSuspend: a collective queued on this communicator is still running on the "
                                  "GPU; synchronize its stream first (no rank suspended)");
  for (int r = 0; r < nranks_; ++r)
    if (!can[static_cast<size_t>(r)])
      return fail(ncclInvalidUsage, "ncclCommSuspend: rank %d could not suspend (a call of its still runs); no rank "
                                    "suspended", r);
  incoming_.reset();
  outgoing_.reset();
  oneShotScratch_.reset();
  // The segments' data: every call of every rank is over (agreed above), so
  // nobody reads it; each process unpins all of it, each rank gives back
  // its own pages, and nobody pins them again (resume) before all have.
  // Not where the relay registered segments with a NIC.
  if (relay_) return ncclSuccess;
  for (auto& seg : segments_) seg->dataRegistration.reset();
  Segment& mine = *segments_[static_cast<size_t>(rank_)];
  HETCCL_TRY(mine.shared.discard(mine.dataOffset(), mine.dataBytes()));
  dataReleased_ = true;
  return setup_.ring->barrier(deadline, setup_.abort);
}

ncclResult_t StreamCollectives::resume() {
  if (!dataReleased_) return ncclSuccess;
  DeviceGuard onMyDevice(rt_, device_);
  HETCCL_TRY(onMyDevice.status());
  for (auto& seg : segments_) HETCCL_TRY(seg->registerAll(rt_));
  dataReleased_ = false;
  return mapLowLatency();
}

bool StreamCollectives::everyRankSharesMemory() const {
  for (int r = 0; r < nranks_; ++r)
    if (!sharesMemory(r)) return false;
  return true;
}

bool StreamCollectives::sharesMemory(int r) const {
  return setup_.sharesMemory.empty() || setup_.sharesMemory[static_cast<size_t>(r)];
}

ncclResult_t StreamCollectives::startRelay() {
  StreamRelaySetup rs;
  rs.rank = rank_;
  rs.nranks = nranks_;
  bool any = false;
  for (int r = 0; r < nranks_; ++r) {
    rs.segments.push_back(segments_[static_cast<size_t>(r)].get());
    rs.remote.push_back(r != rank_ && !sharesMemory(r));
    any |= rs.remote.back();
  }
  if (!any) return ncclSuccess;
  rs.links = setup_.relayLinks;
  rs.sameHost = setup_.sameHost;
  rs.netPluginDevice = setup_.netPluginDevice;
  rs.listener = setup_.listener;
  rs.addresses = setup_.addresses;
  rs.timeoutSeconds = setup_.timeoutSeconds;
  rs.abort = setup_.abort;
  rs.calls = &calls_;
  rs.onFailure = [this](ncclResult_t r) {
    if (released_.load()) return;
    if (setup_.onError) setup_.onError(r);
    release();
  };
  noteBytes_.assign(static_cast<size_t>(nranks_), 0);
  std::string which;
  for (int r = 0; r < nranks_; ++r)
    if (rs.remote[static_cast<size_t>(r)]) {
      if (!which.empty()) which += " ";
      which += std::to_string(r) + ":" + relayLinkKindName(rs.links[static_cast<size_t>(r)]);
    }
  HETCCL_INFO("rank %d: stream collectives reach ranks {%s} through the relay", rank_, which.c_str());
  return StreamRelay::create(rs, &relay_);
}

std::string StreamCollectives::relayLinks() const { return relay_ ? relay_->describeLinks() : std::string(); }

size_t StreamCollectives::segmentBytes() const {
  return segments_[static_cast<size_t>(rank_)]->bytes();
}

ncclResult_t StreamCollectives::join() {
  const size_t bytes = segmentBytes();
  const Deadline deadline(setup_.timeoutSeconds);
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    SharedSegment& peer = segments_[static_cast<size_t>(r)]->shared;
    if (!sharesMemory(r)) {  // a mirror of this process's own, kept current by the relay
      HETCCL_TRY(peer.createPrivate(bytes));
      continue;
    }
    HETCCL_TRY(peer.open(sharedSegmentName(setup_.secret, "stream", r, r, setup_.pids[static_cast<size_t>(r)]), bytes,
                         deadline, setup_.abort));
    if (peer.bytes() != bytes)
      return fail(ncclInternalError, "rank %d's stream staging has %zu bytes, rank %d's %zu", r, peer.bytes(), rank_,
                  bytes);
  }
  HETCCL_TRY(setup_.ring->barrier(deadline, setup_.abort));  // everyone holds every segment: drop the names
  for (auto& seg : segments_) seg->shared.unlink();
  for (auto& seg : segments_) HETCCL_TRY(seg->registerAll(rt_));
  return mapLowLatency();
}

StreamCollectives::~StreamCollectives() {
  // The streams finish what is queued (the watchdog, still running,
  // releases them if a peer is gone).
  for (const StreamOwner* s : {&send_, &reduce_, &result_, &gather_, &p2pSend_, &p2pRecv_})
    if (*s) rt_.synchronize(s->get());
  if (lane_ && lane_->anyChain) {  // the last replayable chain queued outside a capture (a graph must be done by now)
    bool done = false;
    while (rt_.eventDone(lane_->chainEnd.get(), &done) == ncclSuccess && !done) std::this_thread::yield();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  // The relay's thread may still read relay_ (a failure calls release()):
  // it ends before the pointer is cleared.
  if (relay_) relay_->finish();  // after it has sent the peers what they still need
  relay_.reset();
  // The streams, events, device memory and registrations go with their owners.
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
  return ncclSuccess;  // a capturing stream never gets here: dispatch sends captures to HostStaging::capture
}

ncclResult_t StreamCollectives::checkUsable(OpKind kind) {
  if (released_.load()) {
    std::lock_guard<std::mutex> lock(releaseMutex_);
    return fail(ncclRemoteError, "%s: the communicator's streams were released after an error: %s", opKindName(kind),
                releasedBecause_.c_str());
  }
  if (uint32_t who = __atomic_load_n(segments_[static_cast<size_t>(rank_)]->broken(), __ATOMIC_ACQUIRE)) {
    ncclResult_t r = fail(ncclRemoteError, "%s: rank %u gave up after an error", opKindName(kind), who - 1);
    if (setup_.onError) setup_.onError(r);
    release();  // my streams may wait for flags a relay will not bring any more
    return r;
  }
  return ncclSuccess;
}

ncclResult_t StreamCollectives::admitCall(const Op& op) {
  HETCCL_TRY(checkUsable(op.kind));
  HETCCL_TRY(checkBuffers(op));
  if (ncclResult_t r = publishCall(op, ++calls_); r != ncclSuccess) {
    // The ranks' calls are out of step: no later call can be right.
    if (setup_.onError) setup_.onError(r);
    release();
    return r;
  }
  return ncclSuccess;
}

ncclResult_t StreamCollectives::enqueue(const Op& op) {
  HETCCL_TRY(admitCall(op));
  if (op.count == 0) return ncclSuccess;
  // Every piece is queued on my streams now, then the caller's stream
  // waits for their ends (events recorded before the wait is queued, so
  // no stream ever waits for work queued after it). On my device: the
  // caller's current device may be another (one thread, several GPUs).
  DeviceGuard onMyDevice(rt_, device_);
  HETCCL_TRY(onMyDevice.status());
  switch (callPath(op)) {
    case CallPath::FlaggedWords: return enqueueLowLatency(op);
    case CallPath::OneShot: return enqueueOneShot(op);
    case CallPath::Pieces: break;
  }
  if (!incoming_) HETCCL_TRY(makeBuffers());  // at the first call in pieces, and again after a suspend
  const uint32_t ticket = ++tickets_;
  const Job job{op, ticket, startEvents_[ticket % kStartEvents].get()};
  HETCCL_TRY(rt_.recordEvent(job.start, op.stream));
  ncclResult_t r = issue(job);
  if (r != ncclSuccess) {
    if (setup_.onError) setup_.onError(r);
    release();
    return r;
  }
  const Stream streams[kStreams] = {send_.get(), reduce_.get(), result_.get(), gather_.get()};
  for (size_t i = 0; i < kStreams; ++i) {
    HETCCL_TRY(rt_.recordEvent(finished_[i].get(), streams[i]));
    HETCCL_TRY(rt_.waitEvent(op.stream, finished_[i].get()));
  }
  return ncclSuccess;
}

size_t StreamCollectives::pieceElemsOf(const Op& op, size_t partBytes) const {
  const size_t es = typeSize(op.type);
  // All-reduce cuts a piece into one part per rank; the others move one
  // part-sized slice of every rank's block per piece.
  const size_t perPiece = op.kind == OpKind::AllReduce ? static_cast<size_t>(nranks_) : 1;
  const size_t pieceElems = perPiece * (partBytes / es);
  // A message that fits in one piece is one piece (cutting it smaller, so
  // that its copies overlap, measured slower on an H200), of at least
  // 16 KiB per part.
  const size_t floorElems = perPiece * std::max<size_t>(1, (16 << 10) / es);
  return std::min(pieceElems, std::max(floorElems, op.count));
}

ncclResult_t StreamCollectives::copyOwnBlock(const Op& op, Stream s) {
  // My own input's place in my output, copied once, unless in place.
  const size_t block = op.count * typeSize(op.type), mineAt = static_cast<size_t>(rank_) * block;
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
  if (ownTo && ownTo != ownFrom) HETCCL_TRY(rt_.copyAsync(ownTo, ownFrom, block, s));
  return ncclSuccess;
}

ncclResult_t StreamCollectives::reduceMine(const Op& op, const Shape& sh, const char* incoming, size_t stride, Stream s) {
  const Part own = sh.reduces ? sh.toRank[static_cast<size_t>(rank_)] : Part{0, 0};
  if (!own.count) return ncclSuccess;
  const size_t es = typeSize(op.type);
  char* out = static_cast<char*>(op.recvbuff) + sh.reducedAt * es;
  const Reduction& red = op.red;
  const Reduction merge = red.merging();  // the peers' parts come scaled already
  const void* acc = static_cast<const char*>(op.sendbuff) + own.offset * es;
  if (red.kind == RedKind::PreMulSum) {
    HETCCL_TRY(reducer_->prepare(red, out, acc, own.count, s));
    acc = out;
  }
  for (int q = 0; q < nranks_; ++q) {
    if (q == rank_) continue;
    HETCCL_TRY(reducer_->reduce(merge, out, acc, incoming + static_cast<size_t>(q) * stride, own.count, s));
    acc = out;
  }
  if (red.average) HETCCL_TRY(reducer_->average(red, out, own.count, nranks_, s));
  return ncclSuccess;
}

ncclResult_t StreamCollectives::issue(const Job& job) {
  const Op& op = job.op;
  Stream streams[kStreams] = {send_.get(), reduce_.get(), result_.get(), gather_.get()};
  for (Stream s : streams) HETCCL_TRY(rt_.waitEvent(s, job.start));
  HETCCL_TRY(copyOwnBlock(op, gather_.get()));
  const size_t pieceElems = pieceElemsOf(op, partBytes_);
  const size_t pieces = (op.count + pieceElems - 1) / pieceElems;
  const Stream phaseTwoOut = pieces >= kResultStreamPieces ? result_.get() : gather_.get();
  for (size_t start = 0; start < op.count; start += pieceElems) {
    const uint32_t seq = issued_.load() + 1;
    issued_.store(seq);  // in flight from now on (a host rank's "stream" may block in it)
    cv_.notify_all();
    HETCCL_TRY(queuePiece(op, start, std::min(pieceElems, op.count - start), seq, phaseTwoOut));
  }
  const Segment& mine = *segments_[static_cast<size_t>(rank_)];
  for (size_t i = 0; i < kStreams; ++i) HETCCL_TRY(rt_.writeFlag(streams[i], mine.done(i), job.ticket));
  return ncclSuccess;
}

void StreamCollectives::shapeOf(const Op& op, size_t start, size_t length, Shape* out) const {
  // Filled in place: one Shape is reused (no allocation per piece).
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

ncclResult_t StreamCollectives::queuePiece(const Op& op, size_t start, size_t length, uint32_t seq, Stream phaseTwoOut) {
  const size_t slot = (seq - 1) % static_cast<size_t>(slots_);
  const uint32_t reuse = seq > static_cast<uint32_t>(slots_) ? seq - static_cast<uint32_t>(slots_) : 0;
  const size_t es = typeSize(op.type);
  const char* send = static_cast<const char*>(op.sendbuff);
  char* recv = static_cast<char*>(op.recvbuff);
  Segment& mine = *segments_[static_cast<size_t>(rank_)];
  auto peer = [&](int r) -> Segment& { return *segments_[static_cast<size_t>(r)]; };
  shapeOf(op, start, length, &shape_);
  const Shape& sh = shape_;
  if (relay_) {  // what the relay sends once my streams have written it
    for (int q = 0; q < nranks_; ++q)
      noteBytes_[static_cast<size_t>(q)] = sh.reduces || sh.exchanges ? sh.toRank[static_cast<size_t>(q)].count * es : 0;
    relay_->expect(seq, slot, noteBytes_, sh.gathers ? sh.mine.count * es : 0);
  }
  // Every piece raises every flag, also for a phase its collective skips,
  // so slots are reused the same way whatever ran in them before.

  // Phase 1 (reduce-scatter). Send stream: the parts the peers reduce,
  // into my slot, once they have all read what the slot held before.
  for (int q = 0; q < nranks_; ++q) {
    if (q == rank_) continue;
    if (reuse) HETCCL_TRY(rt_.waitFlag(send_.get(), peer(q).consumed(slot), reuse));
    const Part p = sh.reduces || sh.exchanges ? sh.toRank[static_cast<size_t>(q)] : Part{0, 0};
    if (!p.count) continue;
    const void* from = send + p.offset * es;
    if (op.red.kind == RedKind::PreMulSum) {  // each rank scales its own input by its own scalar
      char* scaled = static_cast<char*>(outgoing_.get()) + static_cast<size_t>(q) * partBytes_;
      HETCCL_TRY(reducer_->prepare(op.red, scaled, from, p.count, send_.get()));
      from = scaled;
    }
    HETCCL_TRY(rt_.copyAsync(mine.sendPart(slot, q), from, p.count * es, send_.get()));
  }
  HETCCL_TRY(rt_.writeFlag(send_.get(), mine.posted(slot), seq));

  // Reduce stream: every peer's copy of my part, then the reduction (my own
  // input first, then the peers' in rank order) into the output.
  const Part own = sh.reduces ? sh.toRank[static_cast<size_t>(rank_)] : Part{0, 0};
  auto incoming = [&](int q) {
    return static_cast<char*>(incoming_.get()) + (slot * static_cast<size_t>(nranks_) + static_cast<size_t>(q)) * partBytes_;
  };
  // Exchanges land in the output, which in place is also the input: only
  // once my own send stream has read this piece.
  if (sh.exchanges) HETCCL_TRY(rt_.waitFlag(reduce_.get(), mine.posted(slot), seq));
  for (int q = 0; q < nranks_; ++q) {
    if (q == rank_) continue;
    HETCCL_TRY(rt_.waitFlag(reduce_.get(), peer(q).posted(slot), seq));
    const Part from = sh.fromRank[static_cast<size_t>(q)];
    if (sh.exchanges && from.count)
      HETCCL_TRY(rt_.copyAsync(recv + from.offset * es, peer(q).sendPart(slot, rank_), from.count * es, reduce_.get()));
    if (own.count) HETCCL_TRY(rt_.copyAsync(incoming(q), peer(q).sendPart(slot, rank_), own.count * es, reduce_.get()));
  }
  HETCCL_TRY(rt_.writeFlag(reduce_.get(), mine.consumed(slot), seq));
  HETCCL_TRY(reduceMine(op, sh, incoming(0), partBytes_, reduce_.get()));
  HETCCL_TRY(rt_.recordEvent(reduced_[slot].get(), reduce_.get()));

  // Phase 2 (all-gather), on phaseTwoOut (the result or the gather
  // stream, see kResultStreamPieces): my part (reduced, or my input) for the peers.
  HETCCL_TRY(rt_.waitEvent(phaseTwoOut, reduced_[slot].get()));
  for (int q = 0; q < nranks_ && reuse; ++q)
    if (q != rank_) HETCCL_TRY(rt_.waitFlag(phaseTwoOut, peer(q).gathered(slot), reuse));
  if (sh.gathers && sh.mine.count) {
    const char* from = (sh.mineFromSend ? send : recv) + sh.mine.offset * es;
    HETCCL_TRY(rt_.copyAsync(mine.reducedPart(slot), from, sh.mine.count * es, phaseTwoOut));
  }
  HETCCL_TRY(rt_.writeFlag(phaseTwoOut, mine.reduced(slot), seq));

  // Gather stream: the peers' parts, into the output.
  for (int q = 0; q < nranks_; ++q) {
    if (q == rank_) continue;
    HETCCL_TRY(rt_.waitFlag(gather_.get(), peer(q).reduced(slot), seq));
    const Part p = sh.gathers ? sh.landsAt[static_cast<size_t>(q)] : Part{0, 0};
    if (p.count) HETCCL_TRY(rt_.copyAsync(recv + p.offset * es, peer(q).reducedPart(slot), p.count * es, gather_.get()));
  }
  return rt_.writeFlag(gather_.get(), mine.gathered(slot), seq);
}

}  // namespace hetccl
