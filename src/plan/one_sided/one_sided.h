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
// GPU ranks of a communicator of several domains take part in the windows'
// registration (so that the numbers agree) but their calls, and puts into
// their windows, are refused with ncclInvalidUsage: hetccl does not queue
// one-sided calls on GPU streams yet.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "nccl.h"
#include "transport/net.h"
#include "transport/transport_context.h"

namespace hetccl {

struct OneSidedSetup {
  TransportContext transport;   // the communicator's, any lane (the engine takes Lane::OneSided)
  const Ring* ring = nullptr;   // for the windows' all-gather (under the communicator's operation lock)
  int contexts = 1;             // ncclConfig_t::numRmaCtx
  bool gpu = false;             // this rank is a GPU rank (its calls are refused: see the top)
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
  // Whether this rank's calls can run here (GPU ranks: not yet).
  ncclResult_t usable(const char* caller) const;
  // Local: puts into it from now on fail at the target.
  ncclResult_t removeWindow(uint64_t id);
  // `bytes` of `data` into `peer`'s window `window` at `offset`, then
  // signal `sigIdx` of context `ctx` there; returns once sent.
  ncclResult_t put(const void* data, size_t bytes, int peer, uint64_t window, size_t offset, int sigIdx, int ctx);
  ncclResult_t signal(int peer, int sigIdx, int ctx);
  ncclResult_t wait(std::span<const ncclWaitSignalDesc_t> descs);
  // Checks a signal index and context against this engine's ranges.
  ncclResult_t checkSignal(int sigIdx, int ctx, const char* caller) const;
  // An abort: every call and wait fails from now on.
  void release();

  int contexts() const { return setup_.contexts; }

 private:
  struct Header {  // what precedes every put and signal on the wire
    uint64_t window;
    uint64_t offset;
    uint64_t bytes;
    int32_t sigIdx;
    int32_t ctx;
  };
  struct Outgoing {  // a call's message, until the thread has sent it
    int peer;
    Header header;
    const void* data;
    Request requests[2];
    bool posted = false, done = false;
    std::chrono::steady_clock::time_point postedAt;
    ncclResult_t result = ncclSuccess;
    std::string error;
  };
  struct Incoming {  // what arrives from one peer
    Header header{};
    Request headerRequest, dataRequest;
    bool posted = false, inData = false, dropped = false;
    std::vector<char> discard;  // the bytes of a put into no window, read and dropped
  };
  struct Window {
    char* base;
    std::vector<uint64_t> sizes;  // by rank
    std::vector<uint8_t> onGpu;   // by rank: a GPU rank's window (no puts into it)
    bool live;
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
  ncclResult_t send(Outgoing* out);
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
  std::vector<ncclResult_t> peerErrors_;  // by peer: its connection failed or it is gone
  std::vector<std::string> peerWhy_;
  std::vector<std::string> badPuts_;      // by peer: its first put into no window here (the application's mistake)
  ncclResult_t error_ = ncclSuccess;      // every call fails (abort, a fault of this rank)
  std::string errorText_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hetccl
