// Collectives captured into CUDA/HIP graphs, on the devices' streams
// (stream_collectives.h; the lane's memory and handshakes are in
// stream_graph_lane.h).
//
// The ordinary path cannot be captured: its flags carry sequence numbers
// fixed when a call is queued (a replay would wait for values long
// passed), and the watchdog learns of each piece from the host. Here a
// call runs in batches on the caller's stream. A piece goes through four
// stages, each in a later batch than the one before:
//
//   S1 (batch k)    for each peer: D2H my part for it, mark it full
//   S2 (batch k+1)  for each peer: H2D its part for me, mark it empty;
//                   then reduce my part
//   S3 (batch k+2)  D2H my reduced part (or my input), mark it full for each peer
//   S4 (batch k+3)  for each peer: H2D its part into the output, mark it empty
//
// (S1-S2 only for reduce-scatter and the exchanges, S3-S4 only for
// all-gather and broadcast.) Batch j first waits for everything its stages
// need (my parts empty again, the peers' parts full), then runs them. A
// wait in batch j waits only for the peers' marks of batches before j
// (two slots suffice for that), so no rank can wait for one that waits for
// it. All of it is one line on the caller's stream, which a graph replays
// in that order whatever else the runtime runs beside it (forking the
// stages onto four streams per batch ran about 3x slower).
//
// Pieces are four times the ordinary path's parts (8 MiB by default):
// a batch costs a round of handshakes, and no host work per piece comes
// with larger ones (8 MiB pieces replayed about 1.5x faster than 2 MiB).
//
// Failure: each call raises a "busy" word of its own (64, round robin)
// while it runs; the watchdog checks the peers while one is up, and after
// an error (a dead peer, a peer's broken word, HETCCL_TIMEOUT without a
// handshake moving) keeps every handshake released while calls run, so a
// replay after the error ends too (its data is meaningless; the
// communicator reports the error).
#include "plan/stream/stream_graph_lane.h"

#include <unistd.h>

#include <algorithm>

#include "bootstrap/bootstrap.h"
#include "common/error.h"
#include "common/log.h"

namespace hetccl {

ncclResult_t StreamCollectives::prepareGraphLane(GraphLane& lane) {
  lane.segments.resize(static_cast<size_t>(nranks_));
  for (auto& seg : lane.segments) seg = std::make_unique<GraphLane::Segment>();
  GraphLane::Segment& mine = *lane.segments[static_cast<size_t>(rank_)];
  HETCCL_TRY(mine.shared.create(sharedSegmentName(setup_.secret, "graph", rank_, rank_, getpid()), lane.bytes()));
  // Every handshake starts empty (before any peer can use the segment:
  // the setup's barrier comes first).
  for (size_t i = 0; i < 2 * GraphLane::kSlots * lane.nranks; ++i)
    __atomic_store_n(lane.line(rank_, i), GraphLane::kEmpty, __ATOMIC_RELEASE);
  HETCCL_TRY(registerHost(rt_, mine.shared.base(), mine.shared.bytes(), &mine.registration));
  HETCCL_TRY(allocDevice(rt_, GraphLane::kSlots * lane.nranks * lane.partBytes, &lane.incoming));
  HETCCL_TRY(allocDevice(rt_, lane.nranks * lane.partBytes, &lane.outgoing));
  if (lane.lowLatencyBytes) {  // the kernel's count of calls and of done blocks, both 0 to begin
    HETCCL_TRY(allocDevice(rt_, 2 * sizeof(uint32_t), &lane.lowLatencyCalls));
    HETCCL_TRY(rt_.memsetAsync(lane.lowLatencyCalls.get(), 0, 2 * sizeof(uint32_t), send_.get()));
    HETCCL_TRY(rt_.synchronize(send_.get()));
  }
  return createEvent(rt_, &lane.chainEnd);
}

ncclResult_t StreamCollectives::openGraphLane(bool* usable) {
  *usable = false;
  if (laneRefused_) return ncclSuccess;
  if (lane_) {
    *usable = true;
    return ncclSuccess;
  }
  // The first replayable call sets the lane up on every rank (inside a
  // capture: registration and allocation touch no stream).
  RelaxedCaptureMode relaxed(rt_);
  DeviceGuard onMyDevice(rt_, device_);
  HETCCL_TRY(onMyDevice.status());
  auto lane = std::make_unique<GraphLane>(static_cast<size_t>(nranks_), 4 * partBytes_,
                                         lowLatencyMap_.empty() ? 0 : setup_.lowLatencyBytes);
  const ncclResult_t local = prepareGraphLane(*lane);
  if (local != ncclSuccess)
    HETCCL_WARN("rank %d: replayable stream collectives unavailable here (%s); captures stay host-staged", rank_,
                lastError());
  const Deadline deadline(setup_.timeoutSeconds);
  std::vector<uint8_t> ready(static_cast<size_t>(nranks_), 0);
  ready[static_cast<size_t>(rank_)] = local == ncclSuccess ? 1 : 0;
  HETCCL_TRY(setup_.ring->allGather(ready.data(), 1, deadline, setup_.abort));
  if (std::find(ready.begin(), ready.end(), 0) != ready.end()) {
    HETCCL_INFO("rank %d: replayable stream collectives off: some rank could not set them up", rank_);
    laneRefused_ = true;
    return ncclSuccess;
  }
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    SharedSegment& peer = lane->segments[static_cast<size_t>(r)]->shared;
    HETCCL_TRY(peer.open(sharedSegmentName(setup_.secret, "graph", r, r, setup_.pids[static_cast<size_t>(r)]),
                         lane->bytes(), deadline, setup_.abort));
    if (peer.bytes() != lane->bytes())
      return fail(ncclInternalError, "rank %d's replayable lane has %zu bytes, rank %d's %zu", r, peer.bytes(), rank_,
                  lane->bytes());
  }
  HETCCL_TRY(setup_.ring->barrier(deadline, setup_.abort));  // every rank holds every segment: drop the names
  for (auto& seg : lane->segments) seg->shared.unlink();
  for (auto& seg : lane->segments) {
    if (!seg->registration) HETCCL_TRY(registerHost(rt_, seg->shared.base(), seg->shared.bytes(), &seg->registration));
    void* onDevice = nullptr;
    HETCCL_TRY(rt_.devicePointerOf(seg->shared.base(), &onDevice));
    lane->onDevice.push_back(static_cast<char*>(onDevice));
  }
  lane_ = std::move(lane);
  laneView_.store(lane_.get(), std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mutex_);  // the watchdog now watches the lane too
  }
  cv_.notify_all();
  HETCCL_INFO("rank %d: replayable stream collectives set up (%zu bytes per rank)", rank_, lane_->bytes());
  *usable = true;
  return ncclSuccess;
}

ncclResult_t StreamCollectives::enqueueReplayable(const Op& op) {
  // Pointer queries are refused under a global-mode capture (PyTorch's
  // default); they touch no stream.
  RelaxedCaptureMode relaxed(rt_);
  HETCCL_TRY(admitCall(op));  // the call's shape published and checked, as the ordinary path's
  if (op.count == 0) return ncclSuccess;
  GraphLane& lane = *lane_;
  DeviceGuard onMyDevice(rt_, device_);
  HETCCL_TRY(onMyDevice.status());
  const Stream s = op.stream;
  bool capturing = false;
  uint64_t capture = 0;
  HETCCL_TRY(rt_.streamCapturing(s, &capturing));
  if (capturing) HETCCL_TRY(rt_.captureId(s, &capture));
  // Chains share the lane's handshakes, so they must not run side by
  // side: one on another stream waits for the last one's end, where the
  // runtime can express it (outside captures, or within one capture).
  const bool sameCapture = !capturing || (capture && capture == lane.lastCapture);
  if (lane.anyChain && s != lane.lastStream && capturing == lane.lastCaptured && sameCapture)
    HETCCL_TRY(rt_.waitEvent(s, lane.chainEnd.get()));
  if (lane.lowLatencyBytes && callPath(op) == CallPath::FlaggedWords) HETCCL_TRY(enqueueReplayableLowLatency(op));
  else HETCCL_TRY(enqueueReplayableChain(op));
  HETCCL_TRY(rt_.recordEvent(lane.chainEnd.get(), s));
  lane.lastStream = s;
  lane.lastCapture = capture;
  lane.lastCaptured = capturing;
  lane.anyChain = true;
  return ncclSuccess;
}

ncclResult_t StreamCollectives::enqueueReplayableLowLatency(const Op& op) {
  GraphLane& lane = *lane_;
  // (a.abort: my segment's broken word, whose flags page stays mapped and
  // registered through a suspend, so a graph may keep its address)
  low_latency::Args a = lowLatencyArgs(op);
  auto onDevice = [&](int r, const volatile void* at) {  // a place in rank r's lane segment, as my device addresses it
    return lane.onDevice[static_cast<size_t>(r)] +
           (static_cast<const volatile char*>(at) - lane.segments[static_cast<size_t>(r)]->shared.base());
  };
  for (int r = 0; r < nranks_; ++r) {
    a.words[r] = reinterpret_cast<const uint64_t*>(lane.onDevice[static_cast<size_t>(r)] + lane.lowLatencyOffset());
    a.read[r] = reinterpret_cast<const uint32_t*>(onDevice(r, lane.lowLatencyRead(r)));
  }
  a.mine = const_cast<uint64_t*>(a.words[rank_]);
  a.myRead = const_cast<uint32_t*>(a.read[rank_]);
  a.bufferWords = low_latency::bufferBytes(lane.lowLatencyBytes) / sizeof(uint64_t);
  a.callCounter = static_cast<uint32_t*>(lane.lowLatencyCalls.get());
  a.blocksDone = a.callCounter + 1;
  a.busy = reinterpret_cast<uint32_t*>(onDevice(rank_, lane.busy(rank_, lane.nextBusy++ % GraphLane::kBusyLines)));
  cv_.notify_all();  // (the watchdog looks at the busy words)
  return reducer_->lowLatency(op.type, a, op.stream);
}

ncclResult_t StreamCollectives::enqueueReplayableChain(const Op& op) {
  GraphLane& lane = *lane_;
  const Stream s = op.stream;
  volatile uint32_t* busy = lane.busy(rank_, lane.nextBusy++ % GraphLane::kBusyLines);
  HETCCL_TRY(rt_.writeFlag(s, busy, 1));
  HETCCL_TRY(copyOwnBlock(op, s));
  const size_t pieceElems = pieceElemsOf(op, lane.partBytes);
  const size_t pieces = (op.count + pieceElems - 1) / pieceElems;
  shapeOf(op, 0, std::min(pieceElems, op.count), &lane.shapes[0]);  // which phases the collective has
  lane.firstPhase = lane.shapes[0].reduces || lane.shapes[0].exchanges;
  lane.secondPhase = lane.shapes[0].gathers;
  for (size_t batch = 0; batch < pieces + 3; ++batch) {
    HETCCL_TRY(checkUsable(op.kind));  // a host rank's "stream" runs the batches in the call: stop at an error
    ncclResult_t r = queueReplayableBatch(op, batch, pieces, pieceElems);
    if (r != ncclSuccess) {  // the peers' batches are out of step with mine now
      if (setup_.onError) setup_.onError(r);
      release();
      return r;
    }
  }
  return rt_.writeFlag(s, busy, 0);
}

ncclResult_t StreamCollectives::queueReplayableBatch(const Op& op, size_t batch, size_t pieces, size_t pieceElems) {
  GraphLane& lane = *lane_;
  const Stream s = op.stream;
  const size_t es = typeSize(op.type);
  const char* send = static_cast<const char*>(op.sendbuff);
  char* recv = static_cast<char*>(op.recvbuff);
  constexpr uint32_t kFull = GraphLane::kFull, kEmpty = GraphLane::kEmpty;
  // Which piece each stage works on in this batch (none: out of range);
  // the first phase's stages go first where the collective has both.
  const bool first = lane.firstPhase, second = lane.secondPhase;
  const size_t lag[4] = {0, 1, first ? 2u : 0u, first ? 3u : 1u};
  const bool runs[4] = {first, first, second, second};
  bool active[4] = {};
  size_t slot[4] = {};
  for (size_t st = 0; st < 4; ++st) {
    active[st] = runs[st] && batch >= lag[st] && batch - lag[st] < pieces;
    if (!active[st]) continue;
    const size_t piece = batch - lag[st], start = piece * pieceElems;
    slot[st] = piece % GraphLane::kSlots;
    shapeOf(op, start, std::min(pieceElems, op.count - start), &lane.shapes[st]);
  }
  if (!active[0] && !active[1] && !active[2] && !active[3]) return ncclSuccess;

  // Everything the batch waits for, on the caller's stream.
  for (int q = 0; q < nranks_; ++q) {
    if (q == rank_) continue;
    if (active[0]) HETCCL_TRY(rt_.waitFlagBits(s, lane.sent(rank_, slot[0], q), kEmpty));
    if (active[1]) HETCCL_TRY(rt_.waitFlagBits(s, lane.sent(q, slot[1], rank_), kFull));
    if (active[2]) HETCCL_TRY(rt_.waitFlagBits(s, lane.result(rank_, slot[2], q), kEmpty));
    if (active[3]) HETCCL_TRY(rt_.waitFlagBits(s, lane.result(q, slot[3], rank_), kFull));
  }
  for (size_t st = 0; st < 4; ++st) {
    if (!active[st]) continue;
    const Shape& sh = lane.shapes[st];
    const size_t k = slot[st];
    switch (st) {
      case 0:  // S1: my parts for the peers
        for (int q = 0; q < nranks_; ++q) {
          if (q == rank_) continue;
          const Part p = sh.toRank[static_cast<size_t>(q)];
          if (p.count) {
            const void* from = send + p.offset * es;
            if (op.red.kind == RedKind::PreMulSum) {  // each rank scales its own input by its own scalar
              char* scaled = static_cast<char*>(lane.outgoing.get()) + static_cast<size_t>(q) * lane.partBytes;
              HETCCL_TRY(reducer_->prepare(op.red, scaled, from, p.count, s));
              from = scaled;
            }
            HETCCL_TRY(rt_.copyAsync(lane.sendPart(rank_, k, q), from, p.count * es, s));
          }
          HETCCL_TRY(rt_.writeFlag(s, lane.sent(rank_, k, q), kFull));
        }
        break;
      case 1: {  // S2: the peers' parts for me, then my reduction
        const Part own = sh.reduces ? sh.toRank[static_cast<size_t>(rank_)] : Part{0, 0};
        for (int q = 0; q < nranks_; ++q) {
          if (q == rank_) continue;
          const Part from = sh.fromRank[static_cast<size_t>(q)];
          if (sh.exchanges && from.count)
            HETCCL_TRY(rt_.copyAsync(recv + from.offset * es, lane.sendPart(q, k, rank_), from.count * es, s));
          if (own.count)
            HETCCL_TRY(rt_.copyAsync(lane.incomingPart(k, q), lane.sendPart(q, k, rank_), own.count * es, s));
          HETCCL_TRY(rt_.writeFlag(s, lane.sent(q, k, rank_), kEmpty));
        }
        HETCCL_TRY(reduceMine(op, sh, lane.incomingPart(k, 0), lane.partBytes, s));
        break;
      }
      case 2:  // S3: my part for every peer
        if (sh.mine.count) {
          const char* from = (sh.mineFromSend ? send : recv) + sh.mine.offset * es;
          HETCCL_TRY(rt_.copyAsync(lane.reducedPart(rank_, k), from, sh.mine.count * es, s));
        }
        for (int q = 0; q < nranks_; ++q)
          if (q != rank_) HETCCL_TRY(rt_.writeFlag(s, lane.result(rank_, k, q), kFull));
        break;
      default:  // S4: the peers' parts into the output
        for (int q = 0; q < nranks_; ++q) {
          if (q == rank_) continue;
          const Part p = sh.landsAt[static_cast<size_t>(q)];
          if (p.count) HETCCL_TRY(rt_.copyAsync(recv + p.offset * es, lane.reducedPart(q, k), p.count * es, s));
          HETCCL_TRY(rt_.writeFlag(s, lane.result(q, k, rank_), kEmpty));
        }
        break;
    }
  }
  return ncclSuccess;
}

bool StreamCollectives::graphLaneBusy() const {
  const GraphLane* lane = laneView_.load(std::memory_order_acquire);
  if (!lane) return false;
  for (size_t i = 0; i < GraphLane::kBusyLines; ++i)
    if (__atomic_load_n(lane->busy(rank_, i), __ATOMIC_ACQUIRE)) return true;
  return false;
}

uint64_t StreamCollectives::graphLaneMoves() const {
  // Every handshake of every rank, as one number: a flag changes with each step.
  const GraphLane* lane = laneView_.load(std::memory_order_acquire);
  if (!lane) return 0;
  uint64_t sum = 0;
  for (int r = 0; r < nranks_; ++r) {
    for (size_t i = 0; i < 2 * GraphLane::kSlots * lane->nranks; ++i)
      sum = sum * 3 + __atomic_load_n(lane->line(r, i), __ATOMIC_ACQUIRE);
    sum += __atomic_load_n(lane->lowLatencyRead(r), __ATOMIC_ACQUIRE);  // the kernel's calls
  }
  return sum;
}

void StreamCollectives::raiseGraphLane() {
  const GraphLane* lane = laneView_.load(std::memory_order_acquire);
  if (!lane) return;
  for (int r = 0; r < nranks_; ++r)
    for (size_t i = 0; i < 2 * GraphLane::kSlots * lane->nranks; ++i)
      __atomic_store_n(lane->line(r, i), GraphLane::kReleased, __ATOMIC_RELEASE);
}

}  // namespace hetccl
