// Every collective (all but send/recv) across domains for ranks on one
// host with one rank per domain (two GPUs of different vendors in one box,
// or one GPU's ranks split into two domains), run entirely on the devices' streams.
// The call queues the pieces below on the rank's own four streams and
// makes the caller's stream wait for their ends (events); it returns once
// they are queued (about 17 us per piece), long before the data has moved.
// No hetccl thread copies, reduces or waits for the data.
//
// Why queue in the call: the GPU has a few hardware queues (8 by default,
// CUDA_DEVICE_MAX_CONNECTIONS) shared by all streams. A stream that waits
// holds its queue, so a stream must never wait for work that is queued
// after the wait: it may sit behind the wait in the same queue. Queued in
// the call, every wait is for work queued before it (here or, by the same
// order, on the peers). (Returning at once and queueing the pieces from a
// thread breaks that rule: the caller's stream must then wait for work
// queued later, which hung DDP under PyTorch.)
//
// Each rank owns a shared-memory segment, registered as pinned memory in
// every rank's process, so a device-to-host copy by one GPU lands where
// another GPU's host-to-device copy reads. A message is cut into pieces
// and each piece runs up to two phases, on four streams per rank:
//
//   phase 1, reduce-scatter (all-reduce, reduce-scatter; reduce: to the root only;
//            all-to-all, gather, scatter: no reduction, slices land in the output)
//     send stream    D2H the slices other ranks reduce into my segment, raise `posted`
//     reduce stream  wait for each peer's `posted`, H2D its copy of my slice,
//                    raise `consumed`, reduce my slice with the GPU kernels
//   phase 2, all-gather (all-reduce, all-gather; broadcast: from the root only)
//     result stream  (after the reduction) D2H my slice, raise `reduced`
//                    (on the gather stream in calls of few pieces: kResultStreamPieces)
//     gather stream  wait for each peer's `reduced`, H2D its slice into the output
//
// Flags are 32-bit words in the segments, written and waited on by the
// streams themselves (stream write/wait value); every piece has a sequence
// number and raises every flag (also for a phase it skips), so slots are
// reused once every peer has consumed them. Copies in both directions and
// reductions of different pieces overlap. The caller's stream waits for
// all four streams at the end.
//
// A watchdog thread (stream_watchdog.cc; the segment layout is in
// stream_segment.h) checks, while pieces are in flight, that the peers
// live and that the ranks' calls match (each rank publishes its calls'
// shapes in its segment); on a dead peer, a mismatch or HETCCL_TIMEOUT
// without progress it reports the error (ncclCommGetAsyncError) and
// releases the streams by raising every flag, so nothing hangs.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "core/op.h"
#include "common/deadline.h"
#include "kernels/low_latency.h"
#include "kernels/reducer.h"
#include "transport/relay/relay_link.h"
#include "runtime/owned.h"
#include "runtime/runtime.h"
#include "bootstrap/socket.h"
#include "transport/shm/shm_segment.h"

namespace hetccl {

class Listener;
class Ring;
class StreamRelay;

struct StreamSetup {
  Runtime* runtime = nullptr;
  int rank = 0, nranks = 1;
  uint64_t secret = 0;
  std::vector<int> pids;  // every rank's process
  const Ring* ring = nullptr;
  // Ranks whose segments this rank cannot map (another host, or shared
  // memory refused) are reached through a relay (stream_relay.h) over
  // connections from the communicator's listener.
  std::vector<bool> sharesMemory;  // by rank
  std::vector<RelayLinkKind> relayLinks;  // by rank: the relay's link to it (relay_link.h)
  std::vector<bool> sameHost;             // by rank
  int netPluginDevice = 0;                // the net plugin's device (NIC) for its links
  Listener* listener = nullptr;
  std::vector<SocketAddress> addresses;  // every rank's listener
  const AbortFlag* abort = nullptr;
  size_t partBytes = 2 << 20;  // HETCCL_STREAM_PART_BYTES
  size_t lowLatencyBytes = 0;  // HETCCL_STREAM_LL_BYTES (0: no low-latency collectives)
  size_t oneShotBytes = 0;     // HETCCL_STREAM_ONE_SHOT_BYTES (0: no one-shot collectives)
  int slots = 8;               // HETCCL_STREAM_SLOTS
  double timeoutSeconds = 300;
  std::function<void(ncclResult_t)> onError;  // the communicator turns fatal
  bool p2p = false;               // HETCCL_STREAM_P2P: send/recv on the streams too (stream_p2p.cc)
  int graphs = 1;                 // HETCCL_STREAM_GRAPHS: 1 captures as replayable chains, 2 every call, 0 none
  bool everyRankOnDevice = true;  // no host ranks (HETCCL_FORCE_STAGING): only then may a capture take the chains
  bool failSetupForTest = false;  // HETCCL_STREAM_FAIL_SETUP: this rank's setup fails (tests the fallback)
};

class StreamCollectives {
 public:
  // Collective: every rank of the communicator calls it. *out stays empty
  // (and the result is ncclSuccess) when some rank could not set the path
  // up: then no rank uses it.
  static ncclResult_t create(const StreamSetup& setup, std::unique_ptr<StreamCollectives>* out);
  ~StreamCollectives();
  StreamCollectives(const StreamCollectives&) = delete;
  StreamCollectives& operator=(const StreamCollectives&) = delete;

  // Queues a collective (not send/recv) on op.stream and returns.
  static bool handles(OpKind kind) {
    return kind == OpKind::AllReduce || kind == OpKind::ReduceScatter || kind == OpKind::AllGather ||
           kind == OpKind::Broadcast || kind == OpKind::Reduce || kind == OpKind::AlltoAll ||
           kind == OpKind::Gather || kind == OpKind::Scatter;
  }
  ncclResult_t enqueue(const Op& op);
  struct Segment;  // stream_segment.h
  // Raises every flag so that no stream waits any longer (abort, dead peer);
  // called right after the error that made it (this thread's last error:
  // later calls are refused with it).
  void release();
  // ncclCommMemStats: the device memory held (the pieces' buffers, the
  // graph lane's), and the pinned host memory of the shared segments (mine
  // and the peers' this process mapped, registered with the runtime).
  size_t deviceBytes() const;
  size_t sharedPinnedBytes() const;
  // Of both, what suspend gives back: the pieces' buffers (the graph
  // lane's stay: captured chains point into them) and the segments' data
  // (not their flags; all of it stays where the relay reaches some peers).
  size_t releasableBytes() const;
  // ncclCommSuspend, collective as NCCL's: once every rank has finished
  // every call and is `ready` (else every rank fails, nothing freed), frees
  // the pieces' buffers, made again by the next call, and gives back the
  // segments' data pages; resume() pins them again (their pages come back
  // zeroed as they are touched).
  ncclResult_t suspend(bool ready);
  ncclResult_t resume();
  bool relayed() const { return relay_ != nullptr; }  // some peers are reached through the relay
  // How a collective runs: as one low-latency kernel of flagged words up
  // to HETCCL_STREAM_LL_BYTES (kernels/low_latency.h); then, where every
  // rank shares memory, one-shot up to HETCCL_STREAM_ONE_SHOT_BYTES
  // (stream_one_shot.cc); else in pieces on my streams.
  enum class CallPath { Pieces, FlaggedWords, OneShot };
  CallPath callPath(const Op& op) const;
  // A send or receive small enough for the low-latency kernel, to a peer
  // that shares memory (at most the pair's slots of them per group).
  bool takesLowLatencyP2p(const Op& op) const;
  std::string relayLinks() const;                     // StreamRelay::describeLinks; "" when none
  // Send/recv (alone or a group of them, one stream): on the streams when
  // HETCCL_STREAM_P2P is on and every peer's segment is mapped here.
  bool handlesP2p(std::span<const Op* const> ops) const;
  ncclResult_t enqueueP2p(std::span<const Op* const> ops);
  bool p2pOnStreams() const { return p2pSlots_ != 0; }
  // Calls captured into a CUDA/HIP graph (HETCCL_STREAM_GRAPHS=1), or
  // every call (=2, tests): queued on the caller's stream alone, as a
  // chain whose handshakes end where they began, so that a graph can
  // replay it (stream_graph_lane.cc); those of the low-latency kernel's
  // sizes as that kernel, numbering its calls on the device. Only where every peer's memory is
  // mapped here (no relay). usable: the lane is set up on every rank (the
  // first call sets it up, a collective step); else captures stay
  // host-staged everywhere.
  bool replaysOnStreams(bool capturing) const {
    // A host rank never captures, so beside one a GPU rank's capture is
    // not taken here (the communicator refuses it: communicator.cc).
    const bool captured = capturing && setup_.graphs == 1 && setup_.everyRankOnDevice;
    return (setup_.graphs == 2 || captured) && !relay_;
  }
  ncclResult_t openGraphLane(bool* usable);
  ncclResult_t enqueueReplayable(const Op& op);

 private:
  struct Job {
    Op op;
    uint32_t ticket;
    Event start;
  };
  struct Part {
    size_t offset, count;  // in elements, within the message
  };
  explicit StreamCollectives(const StreamSetup& setup);
  ncclResult_t prepare();  // what this rank sets up alone
  ncclResult_t join();     // the peers' segments
  size_t segmentBytes() const;
  bool sharesMemory(int r) const;  // rank r's segment is mapped here (else mirrored)
  bool everyRankSharesMemory() const;  // the same answer on every rank: no relay
  ncclResult_t startRelay();
  ncclResult_t checkUsable(OpKind kind);  // not released, no peer gave up
  ncclResult_t checkBuffers(const Op& op);
  ncclResult_t publishCall(const Op& op, uint64_t call);
  ncclResult_t checkCall(uint64_t call) const;
  // Usable, buffers checked, the call's shape published and matched
  // against the peers' (a mismatch releases everything).
  ncclResult_t admitCall(const Op& op);
  // `phaseTwoOut`: the stream of phase 2's copy out (result_ or gather_, see kResultStreamPieces).
  ncclResult_t queuePiece(const Op& op, size_t start, size_t length, uint32_t seq, Stream phaseTwoOut);
  // Small all-reduces, reduces, reduce-scatters, all-gathers and broadcasts
  // as one kernel (kernels/low_latency.h; stream_low_latency.cc): every
  // rank's segment, shared or a relayed mirror.
  ncclResult_t enqueueLowLatency(const Op& op);
  low_latency::Args lowLatencyArgs(const Op& op) const;  // the call's shape, and my abort word
  uint32_t* flagOnDevice(int r, const volatile uint32_t* line) const;  // rank r's flag line as my device addresses it
  // Mid-size ones where every rank shares memory: one copy in and one out
  // per rank and peer, on the caller's stream (stream_one_shot.cc).
  ncclResult_t enqueueOneShot(const Op& op);
  DeviceMemory oneShotScratch_;  // peers' blocks and my scaled input (made at the first, freed by a suspend)
  size_t oneShotScratchBytes() const;
  bool lowLatencyIdle() const;  // my last one has finished
  ncclResult_t mapLowLatency();  // lowLatencyMap_, after (re)registering the segments
  struct LowLatencyMap {         // a rank's segment as my device addresses it
    char* flags;
    char* data;
  };
  std::vector<LowLatencyMap> lowLatencyMap_;  // by rank (HETCCL_STREAM_LL_BYTES set)
  // The low-latency kernels of this rank run one after another, in the
  // order of their calls, whatever streams they are on (one count of done
  // blocks serves them all): each waits for the last one's event.
  DeviceMemory lowLatencyBlocksDone_;
  OwnedEvent lowLatencyDone_;
  Stream lowLatencyStream_ = nullptr;  // the last one's stream
  // Before a kernel or one-shot call overwrites its buffer of two calls
  // back, every peer must have read it (their read words). The ranks whose
  // read word it must wait for (bit r): none whose posts the call before
  // read (a rank's calls run in order, so a peer that posted call - 1 had
  // finished call - 2), none whose read word the host already sees there.
  // A wait costs a read over PCIe before the first store, queued behind
  // whatever the link is writing: 20 us at 64 KiB on one H200, measured.
  // (The kernel reads every peer's words in every call: one-shot's rooted
  // calls leave some out.)
  uint32_t ranksToAwait(uint32_t call) const;
  uint32_t lastCallRead_ = 0;  // the ranks whose posts the last call read (bit r)
  size_t pieceElemsOf(const Op& op, size_t partBytes) const;  // elements per piece, with parts of partBytes
  ncclResult_t copyOwnBlock(const Op& op, Stream s);  // my input's block into my output, where the collective has one
  // Where one piece's data is, in elements from the start of the buffers.
  struct Shape {
    bool reduces = false, gathers = false;  // phase 1 (reduce-scatter), phase 2 (all-gather)
    bool exchanges = false;     // phase 1 without reduction: slices land in the output (all-to-all, gather, scatter)
    std::vector<Part> toRank;   // phase 1: per rank, the slice of sendbuff it reduces (empty: none)
    std::vector<Part> fromRank; // phase 1 exchanges: per rank, where its slice lands in my recvbuff
    size_t reducedAt = 0;       // phase 1: where my reduced slice goes in recvbuff
    Part mine{0, 0};            // phase 2: my slice, in recvbuff (or sendbuff: mineFromSend)
    bool mineFromSend = false;
    std::vector<Part> landsAt;  // phase 2: per rank, where its slice goes in my recvbuff (empty: none)
  };
  // My part of a piece, reduced into the output: my input, then each
  // peer's copy in rank order (the peers' parts at incoming + q * stride).
  ncclResult_t reduceMine(const Op& op, const Shape& sh, const char* incoming, size_t stride, Stream s);
  Part partOf(size_t start, size_t length, int owner) const;
  void shapeOf(const Op& op, size_t start, size_t length, Shape* out) const;
  ncclResult_t issue(const Job& job);
  void watch();
  // Every rank alive (or, given `only`, those it marks) and the calls
  // published so far matched.
  ncclResult_t checkPeers(const std::vector<bool>* only = nullptr);
  uint32_t completedPieces() const;
  std::string describeProgress() const;  // every rank's flags, for a stall's message

  StreamSetup setup_;
  Runtime& rt_;
  const int rank_, nranks_, slots_;
  const size_t p2pSlots_;  // 0: send/recv not on the streams
  const size_t partBytes_;
  std::unique_ptr<Reducer> reducer_;
  std::vector<std::unique_ptr<Segment>> segments_;  // by rank; mine is created, the others opened (or mirrored)
  std::unique_ptr<StreamRelay> relay_;              // when some rank's segment cannot be mapped here
  std::vector<size_t> noteBytes_;                   // the piece being queued: my send part's bytes per rank
  // The collectives' streams: send (phase 1 out), reduce (phase 1 in, the
  // reduction), result (phase 2 out: long calls only) and gather (phase 2
  // in; phase 2 out too in calls of fewer than kResultStreamPieces
  // pieces). Measured on an H200 with back-to-back all-reduces of two
  // ranks: phase 2 out on a stream of its own took ~1 ms per call up to
  // 8 MiB (a stream parked on a peer's flag held up the copy that peer
  // waited for until the GPU's time slice ended; 80 us on one stream),
  // 1455 against 1140 us at 16 MiB (4 pieces), but from 32 MiB (8 pieces)
  // the overlap of the two directions wins: 17.5 against 14.6 GB/s.
  static constexpr size_t kStreams = 4;
  static constexpr size_t kResultStreamPieces = 8;
  StreamOwner send_, reduce_, result_, gather_;
  // Send/recv's own streams: a group's send/recv and collectives progress
  // side by side (as in NCCL), so a peer may receive before it joins the
  // collective, or the other way round.
  StreamOwner p2pSend_, p2pRecv_;
  Shape shape_;                 // the piece being queued
  std::vector<OwnedEvent> reduced_;  // per slot: my part of the piece is reduced
  static constexpr uint32_t kStartEvents = 16;
  OwnedEvent startEvents_[kStartEvents];  // per call, round robin: where it starts on the caller's stream
  OwnedEvent finished_[kStreams];         // issued in the call: the end of the call on each of my streams
  DeviceMemory incoming_;                 // per slot and peer, the peer's copy of my part
  DeviceMemory outgoing_;                 // per peer, my scaled input (PreMulSum)
  size_t bufferBytes() const { return (static_cast<size_t>(slots_) + 1) * static_cast<size_t>(nranks_) * partBytes_; }
  ncclResult_t makeBuffers();             // incoming_ and outgoing_ (by the first call in pieces, and after a suspend)
  std::atomic<uint32_t> issued_{0};  // pieces queued so far (their sequence numbers are 1..issued_)
  std::atomic<uint64_t> calls_{0};   // calls published so far
  int device_ = -1;
  const void* checked_[2] = {};      // buffers already known to be device memory

  std::atomic<uint32_t> tickets_{0};  // calls queued
  std::atomic<uint32_t> lowLatencyCalls_{0};  // low-latency calls queued (their words' flag)

  std::mutex mutex_;  // the watchdog's
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<bool> released_{false};
  std::mutex releaseMutex_;
  std::string releasedBecause_;  // the first release's error (under releaseMutex_)
  bool dataReleased_ = false;  // suspend gave the segments' data back (under the communicator's operation lock)
  std::thread watchdog_;

  // Send/recv (stream_p2p.cc): pieces and calls per peer so far.
  std::unique_ptr<std::atomic<uint32_t>[]> sendSeq_, recvSeq_;
  std::vector<uint64_t> sendCalls_, recvCalls_;
  struct RecvCheck {
    int peer;
    uint64_t call, bytes;
  };
  std::mutex p2pMutex_;
  std::deque<RecvCheck> recvChecks_;  // receives whose sender had not published its size yet (p2pMutex_)
  ncclResult_t queueSendPiece(const Op& op, size_t offset, size_t bytes);
  // A group's small sends and receives to peers that share memory
  // (kernels/low_latency_p2p.h; stream_low_latency.cc; enqueueP2p picks
  // them): each its pair's next piece, as kernels on `s`.
  ncclResult_t enqueueLowLatencyP2p(std::span<const Op* const> ops, Stream s);
  ncclResult_t queueRecvPiece(const Op& op, size_t offset, size_t bytes);
  ncclResult_t checkRecvSizes();            // watchdog: the receives against the senders' sizes
  // Pieces done so far; *pending: some still in flight; *waitingOn (by
  // rank, when given): the peers with pieces of mine in flight.
  uint64_t p2pProgress(bool* pending, std::vector<bool>* waitingOn = nullptr) const;
  uint32_t highestP2pSeq() const;

  // The replayable chains (stream_graph_lane.cc).
  struct GraphLane;
  std::unique_ptr<GraphLane> lane_;
  std::atomic<GraphLane*> laneView_{nullptr};  // the watchdog's view, set once the lane is up
  bool laneRefused_ = false;                   // some rank could not set it up: captures host-staged
  ncclResult_t prepareGraphLane(GraphLane& lane);
  ncclResult_t queueReplayableBatch(const Op& op, size_t batch, size_t pieces, size_t pieceElems);
  // A replayable call of the low-latency kernel's sizes: the kernel on the
  // lane's own buffers, numbering its calls on the device.
  ncclResult_t enqueueReplayableLowLatency(const Op& op);
  ncclResult_t enqueueReplayableChain(const Op& op);  // the batches of copies and handshakes
  bool graphLaneBusy() const;           // a chain is on some stream now
  uint64_t graphLaneMoves() const;      // changes whenever a handshake moves
  void raiseGraphLane();                // every handshake passes (after an error)
};

}  // namespace hetccl
