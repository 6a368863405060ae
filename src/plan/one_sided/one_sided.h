// NCCL 2.30's one-sided calls on hetccl's own communicators: a put into a
// peer's registered window followed by a signal, a signal alone, and a
// wait for a number of signals from given peers.
//
// Windows are registered collectively, in the same order on every rank
// (as NCCL asks): a window is known by its number on the communicator,
// and every rank learns every rank's size of it (one all-gather), so that
// a put beyond the peer's window fails at the call.
//
// The target takes no part in a put: a progress thread per communicator
// (started with its first window or one-sided call) owns a lane of
// connections of its own (TransportContext::Lane::OneSided). It sends the
// puts and signals the calls hand it, and takes in every peer's: a header
// (window, offset, bytes, signal), then the bytes straight into the window,
// then the signal counts. Messages from one peer land in the order it sent
// them, so a signal is seen only after the data sent before it.
//
// A wait counts: each (peer, context, signal index) has the signals that
// arrived and the signals waits have consumed; a wait for n more returns
// once n more than consumed have arrived (or fails at HETCCL_TIMEOUT, or
// when the peer is gone).
//
// On CPU ranks a put returns once its bytes are sent (the buffer may be
// reused) and a wait once the signals are in: the calls take no stream.
//
// GPU ranks (and CPU ranks with HETCCL_FORCE_STAGING, so that CI runs this
// on the host runtime's streams) are stream-ordered: a put queues on the
// caller's stream a copy of its bytes into pinned staging (into the window
// itself when it is this rank's own), then a write of the put's ticket
// into its pinned flag; the thread sends the staged bytes once it reads
// the ticket there. The stream goes on at once: its own copy has read the
// bytes. What arrives from a peer goes through that peer's inbox
// (kernels/inbox.h): the thread receives a put's bytes for device memory
// into pinned chunks (a host window's straight into it) and describes
// each piece; ncclWaitSignal queues the inbox's pump (a kernel) on a
// stream of that peer's, which copies the pieces into the window and
// raises the pinned counter of each (peer, context, index) after the
// bytes before its signal, and makes the caller's stream wait until the
// counter reaches what it waits for. The thread makes no CUDA call: one
// that waited could wait for ever behind an application thread blocked in
// a synchronous copy on a stream that waits for this very put. A failure
// (a dead peer, no news for HETCCL_TIMEOUT, a dropped put) is the
// communicator's asynchronous error; the abort word stops the pumps and
// every counter is raised so that no stream waits for ever.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "kernels/inbox.h"
#include "kernels/reducer.h"
#include "nccl.h"
#include "runtime/owned.h"
#include "runtime/runtime.h"
#include "transport/net.h"
#include "transport/transport_context.h"

namespace hetccl {

struct OneSidedSetup {
  TransportContext transport;   // the communicator's, any lane (the engine takes Lane::OneSided)
  const Ring* ring = nullptr;   // for the windows' all-gather (under the communicator's operation lock)
  int contexts = 1;             // ncclConfig_t::numRmaCtx
  // Stream-ordered calls through this runtime (GPU ranks; see the top);
  // null: CPU ranks' calls complete before they return.
  Runtime* streams = nullptr;
  std::function<void(ncclResult_t)> onError;  // stream-ordered: the communicator turns fatal
};

class OneSided {
 public:
  static constexpr int kSignals = 64;  // signal indices per context

  static ncclResult_t create(const OneSidedSetup& setup, std::unique_ptr<OneSided>* out);
  ~OneSided();
  OneSided(const OneSided&) = delete;
  OneSided& operator=(const OneSided&) = delete;

  // Collective, in the same order on every rank: the window's number.
  ncclResult_t addWindow(void* base, size_t bytes, uint64_t* id);
  // Local: puts into it from now on fail at the target.
  ncclResult_t removeWindow(uint64_t id);
  // `bytes` of `data` into `peer`'s window `window` at `offset`, then
  // signal `sigIdx` of context `ctx` there (see the top for `stream`).
  ncclResult_t put(const void* data, size_t bytes, int peer, uint64_t window, size_t offset, int sigIdx, int ctx,
                   Stream stream);
  ncclResult_t signal(int peer, int sigIdx, int ctx, Stream stream);
  ncclResult_t wait(std::span<const ncclWaitSignalDesc_t> descs, Stream stream);
  // Checks a signal index and context against this engine's ranges.
  ncclResult_t checkSignal(int sigIdx, int ctx, const char* caller) const;
  // An abort: every call and wait fails from now on.
  void release();

  int contexts() const { return setup_.contexts; }
  // The pinned host memory of stream-ordered calls (ncclCommMemStats): the
  // counters and each peer's incoming chunk, which stay, and the staging
  // kept for the next puts, which releaseStaging frees (ncclCommSuspend),
  // once the puts queued before are done (ncclInvalidUsage if one is not
  // within HETCCL_TIMEOUT: its stream never reached it, say).
  void pinnedMemory(uint64_t* total, uint64_t* releasable);
  ncclResult_t releaseStaging();

 private:
  static constexpr uint64_t kHeaderTag = 0x6f6e657369646564ull;  // "onesided"
  static constexpr uint64_t kDataTag = kHeaderTag + 1;
  static constexpr uint64_t kNoWindow = ~uint64_t(0);  // a signal alone
  // A put's bytes travel in messages of at most this many (so that a
  // receiver stages bound for device memory through a buffer of this size).
  static constexpr size_t kChunkBytes = size_t(1) << 20;

  struct Header {  // what precedes every put and signal on the wire
    uint64_t window;
    uint64_t offset;
    uint64_t bytes;
    int32_t sigIdx;
    int32_t ctx;
  };
  struct Staging {  // pinned memory for puts' bytes, kept for the next put (never freed while streams wait)
    PinnedMemory memory;
    size_t bytes = 0;
  };
  struct Outgoing {  // a call's message, until the thread has sent it
    int peer;
    Header header;
    const void* data;
    std::vector<Request> requests;  // the header's, then one per chunk
    // Stream-ordered: sent from staging once the stream has written
    // `ticket` into flag `slot` (staged()).
    Staging staging;
    uint32_t ticket = 0;
    size_t slot = 0;
    bool posted = false, done = false;
    std::chrono::steady_clock::time_point postedAt;
    ncclResult_t result = ncclSuccess;
    std::string error;
  };
  struct Incoming {  // what arrives from one peer
    Header header{};
    Request headerRequest, dataRequest;
    bool posted = false, inData = false, dropped = false, toDevice = false;
    char* target = nullptr;     // where the put's bytes go (in the window)
    size_t received = 0;        // of them, so far
    std::vector<char> discard;  // a chunk of a put into no window, read and dropped
    // Stream-ordered (the inbox): descriptors written so far, the chunk of
    // each slot, and what waits for a free slot: the next chunk's receive,
    // or the descriptor that ends a message.
    uint32_t tickets = 0;
    PinnedMemory chunks[inbox::kSlots];  // made with the first window in device memory
    void* chunksOnDevice[inbox::kSlots] = {};
    bool chunkWaits = false, endWaits = false;
  };
  struct Window {
    char* base;
    std::vector<uint64_t> sizes;  // by rank
    bool live;
    bool staged;                  // puts into this rank's window go through pinned staging (device memory)
  };
  using SignalKey = std::tuple<int, int, int>;  // peer, context, index

  explicit OneSided(const OneSidedSetup& setup);
  void loop();
  // The thread's steps (under mutex_ where they touch shared state).
  ncclResult_t startSends();
  ncclResult_t postHeaders();
  ncclResult_t progress(bool* moved);
  void landed(int peer, const Header& h, bool dropped);
  void failPeer(int peer, ncclResult_t r, const std::string& why);
  ncclResult_t checkLiveness();
  // Stream-ordered parts (see the top).
  ncclResult_t checkPut(int peer, uint64_t window, size_t offset, size_t bytes) const;  // under mutex_
  ncclResult_t refuseCapture(Stream stream, const char* caller) const;
  ncclResult_t putOnStream(const std::shared_ptr<Outgoing>& out, Stream stream);
  ncclResult_t waitOnStream(std::span<const ncclWaitSignalDesc_t> descs, Stream stream);
  bool staged(const Outgoing& out) const;  // its stream has copied its bytes (reads its flag)
  ncclResult_t postChunk(int peer, Incoming& in);
  void finished(Outgoing& out);  // done: its staging back to the pool, the caller told
  ncclResult_t chunkArrived(int peer, Incoming& in);
  // The inbox (stream-ordered): a free slot for the peer's next descriptor,
  // the descriptor written, the steps that waited for a slot taken.
  bool slotFree(int peer) const;
  void describe(int peer, Incoming& in, const char* dst, size_t bytes, bool ends);
  ncclResult_t makeChunks();  // every peer's inbox chunks (the calling thread's: the first device window)
  ncclResult_t takeWaitingSteps(int peer, Incoming& in);
  ncclResult_t messageEnded(int peer, Incoming& in);
  uint32_t counterIndex(int peer, int ctx, int sigIdx) const;
  inbox::PeerInbox* inboxOf(int peer) const;
  void watchWaits();
  void fatal(ncclResult_t r, const std::string& why);
  void raiseEverything();  // stream-ordered: the pumps stop, every counter is raised
  volatile uint32_t* counter(int peer, int ctx, int sigIdx) const;
  // Under mutex_: the abort's error, else the peer's (its connection; with
  // itsPuts, also a put of its that this rank dropped).
  ncclResult_t errorFor(int peer, bool itsPuts) const;

  OneSidedSetup setup_;
  int rank_, nranks_;
  std::unique_ptr<Net> net_;  // the thread's alone
  std::vector<Incoming> incoming_;
  std::vector<Request*> polled_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::shared_ptr<Outgoing>> queued_;
  std::vector<std::shared_ptr<Outgoing>> inFlight_;  // the thread's
  std::vector<Window> windows_;
  std::map<SignalKey, uint64_t> arrived_, consumed_;
  // Stream-ordered: pinned counters the streams wait on (signals by peer,
  // context, index), the puts' pinned flags the streams write (a put's
  // ticket in slot ticket % kPutSlots: at most kPutSlots puts not done),
  // the peers' inboxes, the pumps' abort word, and the waits queued on
  // streams not yet satisfied. The pumps' streams (one per peer, made at
  // its first wait) go before the memory they read.
  static constexpr size_t kPutSlots = 1024;
  Runtime* rt_ = nullptr;
  int device_ = -1;  // where the pumps run (the windows' device)
  PinnedMemory counters_;
  PinnedMemory putFlags_;
  PinnedMemory inboxes_;   // a PeerInbox per peer
  PinnedMemory abortWord_;
  void* countersOnDevice_ = nullptr;  // the same memory as the pumps address it
  void* inboxesOnDevice_ = nullptr;
  void* abortOnDevice_ = nullptr;
  std::unique_ptr<Reducer> pump_;  // (its pumpInbox)
  std::vector<StreamOwner> pumpStreams_;  // by peer (under mutex_)
  bool chunksMade_ = false;                // (under mutex_)
  uint32_t putTickets_ = 0;
  struct StreamWait {
    SignalKey key;
    uint64_t target, seen;
    std::chrono::steady_clock::time_point since;  // of the last news (a signal for it)
  };
  std::vector<Staging> stagingPool_;
  std::vector<std::shared_ptr<Outgoing>> streamPuts_;  // stream-ordered puts maybe not done (slots, releaseStaging)
  std::vector<StreamWait> streamWaits_;
  std::vector<ncclResult_t> peerErrors_;  // by peer: its connection failed or it is gone
  std::vector<std::string> peerWhy_;
  std::vector<std::string> badPuts_;      // by peer: its first put into no window here (the application's mistake)
  ncclResult_t error_ = ncclSuccess;      // every call fails (abort, a fault of this rank)
  std::string errorText_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hetccl
