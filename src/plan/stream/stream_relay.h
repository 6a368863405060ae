// Carries the stream collectives' segments (stream_segment.h) to ranks
// that cannot map them: ranks on other hosts, or ranks that refuse shared
// memory (HETCCL_TRANSPORT=socket). Such a rank reads a local mirror of
// the peer's segment instead, registered as pinned memory like any other,
// and this relay keeps the mirror current over one link per pair (TCP, or
// the cluster's ncclNet plugin where both ranks ask for it: relay_link.h):
//
//   my segment (written by my GPU's streams)  --relay-->  the peer's mirror of it
//
// Every region of a segment has one writer, its owner, so the relay only
// ever copies from a rank's own segment to the mirrors of it. It sends a
// piece's data before the flag that announces it, on one ordered
// connection, and the receiving relay stores the data first, then the flag:
// the peer's GPU streams wait for the flag in the mirror exactly as they
// would in the shared segment. The data is sent straight from the segment
// (the protocol keeps a slot untouched until every peer has consumed it).
//
// One thread per communicator moves everything: it polls my segment's
// flags for pieces the caller announced (expect(), and expectP2p*() for
// send/recv: their flag lines by index, data to that peer only, a small
// send's words once all are written; the low-latency calls' words, once
// all are posted), forwards consumed/gathered flags, "gave up" words,
// low-latency read words, published call records and send sizes, and
// stores what arrives. A lost connection is reported through onFailure
// (the communicator turns fatal and the streams are released).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "transport/relay/relay_link.h"
#include "plan/stream/stream_collectives.h"

namespace hetccl {

struct StreamRelaySetup {
  int rank = 0, nranks = 1;
  std::vector<StreamCollectives::Segment*> segments;  // by rank: mine, the mirrors of remote ranks, the shared ones
  std::vector<bool> remote;                           // by rank: reached through the relay
  std::vector<RelayLinkKind> links;                   // by rank: the link's kind (relay_link.h)
  std::vector<bool> sameHost;                         // by rank
  int netPluginDevice = 0;                            // the plugin's device (NIC) this rank uses
  Listener* listener = nullptr;
  std::vector<SocketAddress> addresses;  // every rank's listener
  double timeoutSeconds = 300;
  const AbortFlag* abort = nullptr;
  const std::atomic<uint64_t>* calls = nullptr;  // call records published in my segment
  std::function<void(ncclResult_t)> onFailure;
};

class StreamRelay {
 public:
  // Connects to every remote rank (pairwise: every rank with a remote
  // peer calls it) and starts the thread.
  static ncclResult_t create(const StreamRelaySetup& setup, std::unique_ptr<StreamRelay>* out);
  ~StreamRelay();
  // Sends the peers what they still need, says goodbye and ends the thread
  // (idempotent; the destructor calls it).
  void finish();
  StreamRelay(const StreamRelay&) = delete;
  StreamRelay& operator=(const StreamRelay&) = delete;
  // The relayed ranks and each one's link: "2:ucx 3:socket".
  std::string describeLinks() const;

  // A piece about to be queued: its slot, and the bytes of my send part for
  // each rank and of my reduced part (0: none), sent once the GPU has
  // written them (posted / reduced reach seq).
  void expect(uint32_t seq, size_t slot, const std::vector<size_t>& sendBytes, size_t reducedBytes);
  // Send/recv with a remote peer (stream_p2p.cc): a piece of my data for
  // `peer` (sent once p2pPosted reaches seq), a piece I receive from it
  // (p2pConsumed sent back once it reaches seq), a published send size.
  void expectP2pSend(int peer, uint32_t seq, size_t slot, size_t bytes);
  void expectP2pRecv(int peer, uint32_t seq, size_t slot);
  // A small send of `bytes` as words (kernels/low_latency_p2p.h): sent in
  // one message once every word carries the piece number.
  void expectP2pWords(int peer, uint32_t seq, size_t slot, size_t bytes);
  void publishP2pRecord(int peer, uint64_t call);
  // A low-latency call (kernels/low_latency.h) whose `groups` groups of
  // words my kernel posts (maybe none): sent, in one message to each
  // remote rank, once every word carries the call's number; the thread
  // looks closely until my read word has reached the call and gone out.
  void expectLowLatency(uint32_t call, uint64_t groups);
  // The streams were released (abort, a dead peer, a failed call): pieces
  // in flight will never complete, so destruction does not wait for them.
  void abandon();

 private:
  struct Peer;
  struct Piece {
    uint32_t seq;
    size_t slot;
    std::vector<size_t> sendBytes;
    size_t reducedBytes;
    bool postedSent = false, reducedSent = false;
  };
  struct P2pPiece {
    int peer;
    uint32_t seq;
    size_t slot, bytes;  // bytes: a send's; a receive has none
    bool send;
    bool words = false;  // a send as words: sent once all carry seq
    uint64_t seen = 0;   // the words already found written
  };
  struct LowLatencyPiece {
    uint32_t call;
    uint64_t groups, seen;  // seen: the words already found posted
  };
  explicit StreamRelay(const StreamRelaySetup& setup);
  ncclResult_t connect();
  void run();
  void forwardPieces();
  void forwardFlagsAndCalls();
  void forwardP2p();
  void forwardLowLatency();
  ncclResult_t landLowLatency(Peer& p, const RelayMessage& m);  // the landing area's words into the mirror's
  ncclResult_t landedLowLatency(Peer& p, const RelayMessage& m);  // the peer's reply: my words of a call are there
  ncclResult_t landP2pWords(Peer& p, const RelayMessage& m);  // a small send's words, from the slot's part into its words
  bool p2pWordsWritten(P2pPiece& piece);  // every word of a small send of mine carries its number
  void raiseLowLatencyReadLocked(Peer& p);  // the mirror's read word of p, as far as p has read and my words landed
  void sendTo(int peer, const RelayOutgoing& o);
  void announceP2p(const P2pPiece& piece);
  void wake();  // the thread, from its poll
  static void raise(volatile uint32_t* flag, uint32_t value);
  void sendToAll(const RelayMessage& m, const char* data);
  ncclResult_t receive(Peer& p, bool* moved);
  ncclResult_t place(Peer& p, const RelayMessage& m, char** to);  // checks a header; where its data goes
  ncclResult_t apply(Peer& p, const RelayMessage& m);
  template <typename Record>
  ncclResult_t applyRecord(Peer& p, const RelayMessage& m);  // a call or send/recv record, into the peer's mirror
  ncclResult_t flush(Peer& p, bool* moved);
  void lost(Peer& p, ncclResult_t why);
  void sayGoodbye();  // destruction: a goodbye to every peer, then their last words

  StreamRelaySetup setup_;
  size_t slots_ = 0;
  std::vector<std::unique_ptr<Peer>> peers_;  // the remote ranks
  std::vector<Piece> pieces_;                 // relay thread: announced, not fully sent
  std::vector<P2pPiece> p2pPieces_;           // relay thread: send/recv pieces not yet forwarded
  std::vector<std::pair<int, uint64_t>> p2pRecords_;  // relay thread: (peer, call) sizes to send
  std::vector<LowLatencyPiece> lowLatency_;   // relay thread: announced, not yet sent
  std::vector<uint32_t> sentFlags_;           // per kind (consumed, gathered) and slot: last value sent
  uint32_t sentLowLatencyRead_ = 0, lastLowLatency_ = 0;  // the read word sent; the last call announced (a copy)
  uint64_t sentCalls_ = 0;
  bool sentBroken_ = false;
  uint32_t lastSeq_ = 0;  // the last piece announced, and its slot
  size_t lastSlot_ = 0;

  std::mutex mutex_;
  std::vector<Piece> announced_;  // from expect(), taken by the thread
  std::vector<P2pPiece> announcedP2p_;
  std::vector<std::pair<int, uint64_t>> announcedRecords_;
  std::vector<LowLatencyPiece> announcedLowLatency_;
  uint32_t lowLatencyAnnounced_ = 0;  // the last low-latency call announced
  int wake_ = -1;                 // eventfd: a piece was announced, or stop
  std::atomic<bool> stop_{false};
  std::atomic<bool> draining_{false}, drained_{false};  // destruction: send what the peers still need
  std::atomic<bool> abandoned_{false};  // the streams were released: nothing is owed, no drain at destruction
  std::thread thread_;
};

}  // namespace hetccl
