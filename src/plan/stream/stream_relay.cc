#include "plan/stream/stream_relay.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <deque>

#include "common/error.h"
#include "common/log.h"
#include "kernels/low_latency.h"
#include "plan/stream/stream_segment.h"
#include "transport/net_plugin/net_plugin.h"

namespace hetccl {

using namespace stream_layout;
using namespace relay_kind;

namespace {
bool reachedValue(uint32_t value, uint32_t seq) { return static_cast<int32_t>(value - seq) >= 0; }
bool reached(const volatile uint32_t* flag, uint32_t seq) { return reachedValue(__atomic_load_n(flag, __ATOMIC_ACQUIRE), seq); }
}  // namespace

static_assert(sizeof(CallRecord) <= sizeof(RelayOutgoing::copy) && sizeof(P2pRecord) <= sizeof(RelayOutgoing::copy),
              "a record does not fit an outgoing message's copy");
using Message = RelayMessage;
using Outgoing = RelayOutgoing;

struct StreamRelay::Peer {
  int rank = -1;
  Socket socket;                  // until the link takes it
  std::unique_ptr<RelayLink> link;
  StreamCollectives::Segment* mirror = nullptr;
  bool lost = false;
  bool done = false;  // said goodbye: the end of the connection is no error
  alignas(8) char record[sizeof(CallRecord)] = {};  // a record being received
  // Low-latency calls (under the relay's mutex): the last the peer has
  // read (its read word), and my calls with words for it that have not
  // landed there, from the call's announcement on.
  uint32_t lowLatencyRead = 0;
  std::deque<uint32_t> lowLatencyUnlanded;
  std::deque<Outgoing> out;
};

StreamRelay::StreamRelay(const StreamRelaySetup& setup) : setup_(setup), slots_(setup.segments[setup.rank]->slots) {
  sentFlags_.assign(2 * slots_, 0);
}

ncclResult_t StreamRelay::create(const StreamRelaySetup& setup, std::unique_ptr<StreamRelay>* out) {
  std::unique_ptr<StreamRelay> relay(new StreamRelay(setup));
  HETCCL_TRY(relay->connect());
  relay->wake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (relay->wake_ < 0) return fail(ncclSystemError, "stream relay: eventfd failed: %s", strerror(errno));
  relay->thread_ = std::thread(&StreamRelay::run, relay.get());
  *out = std::move(relay);
  return ncclSuccess;
}

ncclResult_t StreamRelay::connect() {
  // Pairwise: the lower rank connects, the higher accepts; connecting
  // first everywhere cannot deadlock (the listener queues arrivals).
  const Deadline deadline(setup_.timeoutSeconds);
  for (int r = 0; r < setup_.nranks; ++r) {
    if (!setup_.remote[static_cast<size_t>(r)]) continue;
    auto p = std::make_unique<Peer>();
    p->rank = r;
    p->mirror = setup_.segments[static_cast<size_t>(r)];
    if (r > setup_.rank)
      HETCCL_TRY(Listener::connectTo(setup_.addresses[static_cast<size_t>(r)], setup_.listener->secret(), setup_.rank,
                                     kTagStreamRelay, deadline, setup_.abort, &p->socket));
    peers_.push_back(std::move(p));
  }
  for (auto& p : peers_)
    if (p->rank < setup_.rank)
      HETCCL_TRY(setup_.listener->acceptFrom(p->rank, kTagStreamRelay, deadline, setup_.abort, &p->socket));
  // Then each pair's link, in rank order on every rank (a plugin link is
  // made by both ranks together; that order always lets one pair finish).
  for (auto& p : peers_) {
    const size_t r = static_cast<size_t>(p->rank);
    const RelayLinkKind kind = r < setup_.links.size() ? setup_.links[r] : RelayLinkKind::Socket;
    if (kind == RelayLinkKind::NetPlugin) {
      std::string why;
      const NetPlugin* plugin = netPlugin(&why);
      if (!plugin) return fail(ncclSystemError, "stream relay: %s", why.c_str());
      StreamCollectives::Segment* mine = setup_.segments[static_cast<size_t>(setup_.rank)];
      HETCCL_TRY(makePluginRelayLink(*plugin, setup_.netPluginDevice, std::move(p->socket), p->rank,
                                     {mine->shared.base(), mine->shared.bytes()},
                                     {p->mirror->shared.base(), p->mirror->shared.bytes()}, deadline, setup_.abort,
                                     &p->link));
    } else if (kind == RelayLinkKind::Ucx) {
      HETCCL_TRY(makeUcxRelayLink(std::move(p->socket), p->rank, r < setup_.sameHost.size() && setup_.sameHost[r], deadline,
                                  setup_.abort, &p->link));
    } else {
      HETCCL_TRY(makeSocketRelayLink(std::move(p->socket), setup_.rank, p->rank, setup_.addresses[r], *setup_.listener,
                                     deadline, setup_.abort, &p->link));
    }
  }
  return ncclSuccess;
}

std::string StreamRelay::describeLinks() const {
  std::string text;
  for (const auto& p : peers_) {
    if (!text.empty()) text += " ";
    text += std::to_string(p->rank) + ":" + p->link->name();
  }
  return text;
}

StreamRelay::~StreamRelay() {
  finish();
  if (wake_ >= 0) close(wake_);
}

void StreamRelay::finish() {
  // What the peers still need from me (the last flags, data not yet
  // sent) goes first, then a goodbye, so they do not take the closing
  // connection for a failure.
  draining_.store(true);
  if (wake_ >= 0) wake();
  const Deadline deadline(setup_.timeoutSeconds);
  while (!drained_.load() && !abandoned_.load() && !deadline.expired() && thread_.joinable())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  stop_.store(true);
  if (wake_ >= 0) wake();
  if (thread_.joinable()) thread_.join();
}

void StreamRelay::abandon() {
  abandoned_.store(true);
  if (wake_ >= 0) wake();
}

void StreamRelay::wake() {
  const uint64_t one = 1;
  if (write(wake_, &one, sizeof(one)) < 0) { /* a full counter still wakes the thread */ }
}

void StreamRelay::expect(uint32_t seq, size_t slot, const std::vector<size_t>& sendBytes, size_t reducedBytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    announced_.push_back(Piece{seq, slot, sendBytes, reducedBytes});
  }
  wake();
}

void StreamRelay::announceP2p(const P2pPiece& piece) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    announcedP2p_.push_back(piece);
  }
  wake();
}

void StreamRelay::expectP2pSend(int peer, uint32_t seq, size_t slot, size_t bytes) {
  announceP2p(P2pPiece{peer, seq, slot, bytes, true});
}

void StreamRelay::expectP2pRecv(int peer, uint32_t seq, size_t slot) { announceP2p(P2pPiece{peer, seq, slot, 0, false}); }

void StreamRelay::expectP2pWords(int peer, uint32_t seq, size_t slot, size_t bytes) {
  announceP2p(P2pPiece{peer, seq, slot, bytes, true, true});
}

void StreamRelay::publishP2pRecord(int peer, uint64_t call) {
  std::lock_guard<std::mutex> lock(mutex_);
  announcedRecords_.emplace_back(peer, call);
}

void StreamRelay::expectLowLatency(uint32_t call, uint64_t groups) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    announcedLowLatency_.push_back(LowLatencyPiece{call, groups, 0});
    lowLatencyAnnounced_ = call;
    for (auto& p : peers_) {
      if (groups) p->lowLatencyUnlanded.push_back(call);
      raiseLowLatencyReadLocked(*p);
    }
  }
  wake();
}

void StreamRelay::sendTo(int peer, const Outgoing& o) {
  for (auto& p : peers_)
    if (p->rank == peer && !p->lost) p->out.push_back(o);
}

void StreamRelay::forwardP2p() {
  StreamCollectives::Segment& mine = *setup_.segments[static_cast<size_t>(setup_.rank)];
  auto lineOf = [&](const volatile uint32_t* flag) {
    return static_cast<uint32_t>((reinterpret_cast<const volatile char*>(flag) - mine.shared.base()) / stream_layout::kLine);
  };
  for (const auto& [peer, call] : p2pRecords_) {  // sizes first: published before the pieces
    const P2pRecord* r = mine.p2pRecord(peer, call);
    P2pRecord record;
    if (!readRecord(r, call, &record)) continue;  // rewritten for a later send, whose record goes instead
    Outgoing o{Message{kP2pRecord, 0, 0, 0, static_cast<uint64_t>(reinterpret_cast<const char*>(r) - mine.shared.base()),
                       sizeof(P2pRecord)},
               nullptr, {}};
    memcpy(o.copy, &record, sizeof(P2pRecord));
    for (auto& p : peers_)
      if (p->rank == peer && !p->lost) {
        p->out.push_back(o);
        p->out.back().data = p->out.back().copy;
      }
  }
  p2pRecords_.clear();
  // In order per peer and direction: a piece waits for the ones before it.
  std::vector<int> blocked;  // peer * 2 + send
  size_t kept = 0;
  for (P2pPiece& pc : p2pPieces_) {
    const int key = pc.peer * 2 + (pc.send ? 1 : 0);
    const volatile uint32_t* flag = pc.send ? mine.p2pPosted(pc.peer, pc.slot) : mine.p2pConsumed(pc.peer, pc.slot);
    if (std::find(blocked.begin(), blocked.end(), key) != blocked.end() ||
        !(pc.words ? p2pWordsWritten(pc) : reached(flag, pc.seq))) {
      blocked.push_back(key);
      p2pPieces_[kept++] = pc;
      continue;
    }
    if (pc.words) {  // into the peer's mirror of the slot's data part, whence it lands word by word
      const char* data = mine.p2pData(pc.peer, pc.slot);
      sendTo(pc.peer, Outgoing{Message{kP2pWords, static_cast<uint32_t>(pc.slot), pc.seq, 0,
                                       static_cast<uint64_t>(data - mine.shared.base()), low_latency::bufferBytes(pc.bytes)},
                               reinterpret_cast<const char*>(mine.p2pWords(pc.peer, pc.slot)), {}});
      continue;
    }
    const uint32_t value = __atomic_load_n(flag, __ATOMIC_ACQUIRE);
    const char* data = pc.send ? mine.p2pData(pc.peer, pc.slot) : nullptr;
    sendTo(pc.peer, Outgoing{Message{kFlagLine, lineOf(flag), value, 0,
                                     data ? static_cast<uint64_t>(data - mine.shared.base()) : 0, pc.send ? pc.bytes : 0},
                             data, {}});
  }
  p2pPieces_.resize(kept);
}

bool StreamRelay::p2pWordsWritten(P2pPiece& piece) {
  const uint64_t* words = setup_.segments[static_cast<size_t>(setup_.rank)]->p2pWords(piece.peer, piece.slot);
  const uint64_t n = 2 * low_latency::groups(piece.bytes);
  while (piece.seen < n && __atomic_load_n(words + piece.seen, __ATOMIC_ACQUIRE) >> 32 == piece.seq) ++piece.seen;
  return piece.seen == n;
}

// A peer's small send for me: its words arrived in the slot's data part
// (free: the piece before in that slot has been consumed, the next one
// comes after this one is), and are stored whole into the slot's words,
// where my kernel polls them.
ncclResult_t StreamRelay::landP2pWords(Peer& p, const Message& m) {
  StreamCollectives::Segment& mirror = *p.mirror;
  const size_t slot = m.slot;
  if (slot >= mirror.p2pSlots || m.offset != static_cast<uint64_t>(mirror.p2pData(setup_.rank, slot) - mirror.shared.base()) ||
      m.bytes > low_latency::bufferBytes(mirror.p2pLowLatencyBytes()))
    return fail(ncclInternalError, "stream relay: a small send's words from rank %d do not fit (%llu bytes at %llu)", p.rank,
                static_cast<unsigned long long>(m.bytes), static_cast<unsigned long long>(m.offset));
  const char* landed = mirror.shared.base() + m.offset;  // (a part may start anywhere: HETCCL_STREAM_PART_BYTES)
  uint64_t* words = mirror.p2pWords(setup_.rank, slot);
  for (uint64_t i = 0; i < m.bytes / 8; ++i) {
    uint64_t word;
    memcpy(&word, landed + 8 * i, sizeof(word));
    __atomic_store_n(words + i, word, __ATOMIC_RELEASE);
  }
  return ncclSuccess;
}

void StreamRelay::run() {
  std::vector<pollfd> fds;
  auto lastMoved = std::chrono::steady_clock::now();
  while (!stop_.load()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (Piece& p : announced_) {
        lastSeq_ = p.seq;
        lastSlot_ = p.slot;
        pieces_.push_back(std::move(p));
      }
      announced_.clear();
      for (P2pPiece& p : announcedP2p_) p2pPieces_.push_back(p);
      announcedP2p_.clear();
      for (auto& r : announcedRecords_) p2pRecords_.push_back(r);
      announcedRecords_.clear();
      lowLatency_.insert(lowLatency_.end(), announcedLowLatency_.begin(), announcedLowLatency_.end());
      announcedLowLatency_.clear();
      lastLowLatency_ = lowLatencyAnnounced_;
    }
    bool moved = false;
    for (auto& p : peers_) {
      if (p->lost) continue;
      ncclResult_t r = receive(*p, &moved);
      if (r != ncclSuccess) lost(*p, r);
    }
    forwardPieces();
    forwardFlagsAndCalls();
    forwardP2p();
    forwardLowLatency();
    bool pending = !pieces_.empty() || !p2pPieces_.empty() || !lowLatency_.empty() ||
                   sentLowLatencyRead_ != lastLowLatency_ || (lastSeq_ && !reachedValue(sentFlags_[slots_ + lastSlot_], lastSeq_));
    bool polled = true;  // every link can wake the thread when data arrives
    for (auto& p : peers_) {
      if (p->lost) continue;
      ncclResult_t r = flush(*p, &moved);
      if (r != ncclSuccess) lost(*p, r);
      pending |= !p->lost && (!p->out.empty() || p->link->busy());
      polled &= p->lost || p->link->wakes();
    }
    if (draining_.load() && !pending && !moved) {
      sayGoodbye();
      drained_.store(true);
      return;
    }
    if (moved) {
      lastMoved = std::chrono::steady_clock::now();
      continue;
    }
    // Pieces in flight: the GPU raises my flags without telling anyone, so
    // look again soon; otherwise sleep until data arrives or a piece is
    // announced (flags of finished pieces are looked at every 2 ms). A
    // plugin link cannot wake the thread: it is looked at again at once for
    // a millisecond after anything moved, then every 100 us.
    fds.clear();
    fds.push_back(pollfd{wake_, POLLIN, 0});
    for (auto& p : peers_)
      if (!p->lost) p->link->addPollFds(&fds);
    const bool spin = pending || (!polled && std::chrono::steady_clock::now() - lastMoved < std::chrono::milliseconds(1));
    if (poll(fds.data(), fds.size(), spin || !polled ? 0 : 2) > 0 && (fds[0].revents & POLLIN)) {
      uint64_t n;
      if (read(wake_, &n, sizeof(n)) < 0) { /* nothing to read */ }
    }
    if (spin) std::this_thread::yield();
    else if (!polled) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void StreamRelay::sayGoodbye() {
  for (auto& p : peers_)
    if (!p->lost) {
      p->out.push_back(Outgoing{Message{kBye, 0, 0, 0, 0, 0}, nullptr, {}});
      bool ignored = false;
      const Deadline bye(5);
      while ((!p->out.empty() || p->link->busy()) && !bye.expired() && flush(*p, &ignored) == ncclSuccess)
        std::this_thread::yield();
    }
  // Read what the peers still send for a moment (their last flags, their
  // goodbye when they are closing too): closing with unread data would
  // reset the connection, and a peer could take that for a failure.
  const Deadline linger(0.2);
  bool open = true;
  while (open && !linger.expired()) {
    open = false;
    bool moved = false;
    for (auto& p : peers_) {
      if (p->lost || p->done) continue;
      open = true;
      if (receive(*p, &moved) != ncclSuccess) p->lost = true;  // closed: nothing more to read
    }
    if (!moved) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void StreamRelay::forwardPieces() {
  StreamCollectives::Segment& mine = *setup_.segments[static_cast<size_t>(setup_.rank)];
  // My streams raise `posted` (send stream) and `reduced` (result or gather stream)
  // in piece order, each on its own: two cursors.
  for (Piece& pc : pieces_) {
    if (pc.postedSent) continue;
    if (!reached(mine.posted(pc.slot), pc.seq)) break;
    const uint32_t value = __atomic_load_n(mine.posted(pc.slot), __ATOMIC_ACQUIRE);  // above seq after a release
    for (auto& p : peers_) {
      if (p->lost) continue;
      const char* data = mine.sendPart(pc.slot, p->rank);
      const size_t bytes = pc.sendBytes[static_cast<size_t>(p->rank)];
      p->out.push_back(Outgoing{Message{kPosted, static_cast<uint32_t>(pc.slot), value, 0,
                                        static_cast<uint64_t>(data - mine.shared.base()), bytes},
                                data, {}});
    }
    pc.postedSent = true;
  }
  for (Piece& pc : pieces_) {
    if (pc.reducedSent) continue;
    if (!reached(mine.reduced(pc.slot), pc.seq)) break;
    const uint32_t value = __atomic_load_n(mine.reduced(pc.slot), __ATOMIC_ACQUIRE);
    const char* data = mine.reducedPart(pc.slot);
    sendToAll(Message{kReduced, static_cast<uint32_t>(pc.slot), value, 0,
                      static_cast<uint64_t>(data - mine.shared.base()), pc.reducedBytes},
              data);
    pc.reducedSent = true;
  }
  size_t done = 0;
  while (done < pieces_.size() && pieces_[done].postedSent && pieces_[done].reducedSent) ++done;
  pieces_.erase(pieces_.begin(), pieces_.begin() + static_cast<std::ptrdiff_t>(done));
}

// My kernel writes a call's words in any order: the call goes once every
// word carries its number, straight from my segment (the words stay until
// every peer has read them: the kernel of two calls later waits for that).
void StreamRelay::forwardLowLatency() {
  StreamCollectives::Segment& mine = *setup_.segments[static_cast<size_t>(setup_.rank)];
  size_t done = 0;
  for (LowLatencyPiece& l : lowLatency_) {
    const auto* words = reinterpret_cast<const uint64_t*>(mine.shared.base() + mine.lowLatencyWordsOffset(l.call));
    while (l.seen < 2 * l.groups && __atomic_load_n(words + l.seen, __ATOMIC_ACQUIRE) >> 32 == l.call) ++l.seen;
    if (l.seen < 2 * l.groups) break;
    if (l.groups)
      sendToAll(Message{kLowLatency, 0, l.call, 0, mine.lowLatencyLandingOffset(l.call), 16 * l.groups},
                reinterpret_cast<const char*>(words));
    ++done;
  }
  lowLatency_.erase(lowLatency_.begin(), lowLatency_.begin() + static_cast<std::ptrdiff_t>(done));
}

// A call's words arrived in the landing area of its parity: each is stored
// whole into the mirror's words, where the kernel reading them polls.
ncclResult_t StreamRelay::landLowLatency(Peer& p, const Message& m) {
  StreamCollectives::Segment& mirror = *p.mirror;
  if (!mirror.lowLatencyBytes || m.offset != mirror.lowLatencyLandingOffset(m.value) ||
      m.bytes > low_latency::bufferBytes(mirror.lowLatencyBytes))
    return fail(ncclInternalError, "stream relay: low-latency words from rank %d do not fit (%llu bytes at %llu)",
                p.rank, static_cast<unsigned long long>(m.bytes), static_cast<unsigned long long>(m.offset));
  const auto* landed = reinterpret_cast<const uint64_t*>(mirror.shared.base() + m.offset);
  auto* words = reinterpret_cast<uint64_t*>(mirror.shared.base() + mirror.lowLatencyWordsOffset(m.value));
  for (uint64_t i = 0; i < m.bytes / 8; ++i) __atomic_store_n(words + i, landed[i], __ATOMIC_RELEASE);
  p.out.push_back(Outgoing{Message{kLowLatencyLanded, 0, m.value, 0, 0, 0}, nullptr, {}});
  return ncclSuccess;
}

ncclResult_t StreamRelay::landedLowLatency(Peer& p, const Message& m) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (p.lowLatencyUnlanded.empty() || p.lowLatencyUnlanded.front() != m.value)
    return fail(ncclInternalError, "stream relay: rank %d says low-latency call %u landed, which was not sent to it",
                p.rank, m.value);
  p.lowLatencyUnlanded.pop_front();
  raiseLowLatencyReadLocked(p);
  return ncclSuccess;
}

// A kernel reuses its buffer of call k for call k + 2 once every peer's
// read word has reached k. For a relayed peer that must also mean that my
// words of k (and of every call before) have landed there: else my kernel
// could overwrite them while the link still sends them, and my next
// message of that parity overwrite its landing area before it was stored.
// (A peer that reads nothing of a call, such as a reduce's non-root,
// raises its read word at once, maybe before I have announced the call:
// the mirror's word never passes my last announced call either.)
void StreamRelay::raiseLowLatencyReadLocked(Peer& p) {
  auto below = [](uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; };
  uint32_t v = p.lowLatencyRead;
  if (below(lowLatencyAnnounced_, v)) v = lowLatencyAnnounced_;
  if (!p.lowLatencyUnlanded.empty() && below(p.lowLatencyUnlanded.front() - 1, v)) v = p.lowLatencyUnlanded.front() - 1;
  raise(p.mirror->lowLatencyRead(), v);
}

void StreamRelay::forwardFlagsAndCalls() {
  StreamCollectives::Segment& mine = *setup_.segments[static_cast<size_t>(setup_.rank)];
  if (mine.lowLatencyBytes) {  // the last low-latency call whose words I have read (a flag line)
    const uint32_t v = __atomic_load_n(mine.lowLatencyRead(), __ATOMIC_ACQUIRE);
    if (v != sentLowLatencyRead_) {
      sentLowLatencyRead_ = v;
      const auto line = static_cast<uint32_t>((reinterpret_cast<const volatile char*>(mine.lowLatencyRead()) -
                                               mine.shared.base()) / kLine);
      sendToAll(Message{kFlagLine, line, v, 0, 0, 0}, nullptr);
    }
  }
  // consumed and gathered carry no data: their latest value is enough.
  for (size_t k = 0; k < 2; ++k) {
    const uint32_t kind = k == 0 ? kConsumed : kGathered;
    for (size_t s = 0; s < slots_; ++s) {
      const uint32_t v = __atomic_load_n(mine.flag(kind, s), __ATOMIC_ACQUIRE);
      if (v == sentFlags_[k * slots_ + s]) continue;
      sentFlags_[k * slots_ + s] = v;
      sendToAll(Message{kind, static_cast<uint32_t>(s), v, 0, 0, 0}, nullptr);
    }
  }
  if (!sentBroken_)
    if (const uint32_t who = __atomic_load_n(mine.broken(), __ATOMIC_ACQUIRE)) {
      sendToAll(Message{kBroken, 0, who, 0, 0, 0}, nullptr);
      sentBroken_ = true;
    }
  // Call records, complete ones only (publishing writes `call` last).
  for (const uint64_t have = setup_.calls->load(); sentCalls_ < have; ++sentCalls_) {
    const CallRecord* r = mine.call(sentCalls_ + 1);
    CallRecord record;
    if (!readRecord(r, sentCalls_ + 1, &record)) break;
    for (auto& p : peers_) {
      if (p->lost) continue;
      p->out.push_back(Outgoing{Message{kCall, 0, 0, 0, static_cast<uint64_t>(reinterpret_cast<const char*>(r) - mine.shared.base()),
                                        sizeof(CallRecord)},
                                nullptr, {}});
      memcpy(p->out.back().copy, &record, sizeof(CallRecord));
      p->out.back().data = p->out.back().copy;  // deque elements stay put
    }
  }
}

void StreamRelay::sendToAll(const Message& m, const char* data) {
  for (auto& p : peers_)
    if (!p->lost) p->out.push_back(Outgoing{m, data, {}});
}

ncclResult_t StreamRelay::flush(Peer& p, bool* moved) { return p.link->flush(&p.out, moved); }

ncclResult_t StreamRelay::receive(Peer& p, bool* moved) {
  return p.link->receive([&](const Message& m, char** to) { return place(p, m, to); },
                         [&](const Message& m) { return apply(p, m); }, moved);
}

ncclResult_t StreamRelay::place(Peer& p, const Message& m, char** to) {
  if (!relayMessageFits(m, p.mirror->shared.bytes(), slots_, p.mirror->flagLines()))
    return fail(ncclInternalError, "stream relay: malformed message from rank %d (kind %u, %llu bytes at %llu)", p.rank,
                m.kind, static_cast<unsigned long long>(m.bytes), static_cast<unsigned long long>(m.offset));
  *to = m.kind == kCall || m.kind == kP2pRecord ? p.record : p.mirror->shared.base() + m.offset;
  return ncclSuccess;
}

// Flags only move forward (sequence numbers, compared modulo 2^32): a
// value that arrives after release() raised the flag far ahead (abort, a
// dead peer) must not pull it back, or a stream would wait again.
void StreamRelay::raise(volatile uint32_t* flag, uint32_t value) {
  uint32_t seen = __atomic_load_n(flag, __ATOMIC_ACQUIRE);
  while (static_cast<int32_t>(value - seen) > 0 &&
         !__atomic_compare_exchange_n(flag, &seen, value, false, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE)) {
  }
}

template <typename Record>
ncclResult_t StreamRelay::applyRecord(Peer& p, const Message& m) {  // its size and bounds were checked on arrival
  if (m.offset % alignof(Record) != 0)
    return fail(ncclInternalError, "stream relay: a misaligned record from rank %d", p.rank);
  Record value;
  memcpy(&value, p.record, sizeof(value));
  writeRecord(reinterpret_cast<Record*>(p.mirror->shared.base() + m.offset), value);
  return ncclSuccess;
}

ncclResult_t StreamRelay::apply(Peer& p, const Message& m) {
  switch (m.kind) {
    case kBye:  // the peer is done with the communicator: its end of the connection closes next
      p.done = true;
      return ncclSuccess;
    case kBroken:  // the peer gave up: my own segment says so, as shared memory would
      __atomic_store_n(setup_.segments[static_cast<size_t>(setup_.rank)]->broken(), m.value, __ATOMIC_RELEASE);
      return ncclSuccess;
    case kCall:  // written as the sender published it: readers skip a record being written
      return applyRecord<CallRecord>(p, m);
    case kP2pRecord:
      return applyRecord<P2pRecord>(p, m);
    case kLowLatency:
      return landLowLatency(p, m);
    case kLowLatencyLanded:
      return landedLowLatency(p, m);
    case kP2pWords:
      return landP2pWords(p, m);
    case kFlagLine:  // a send/recv flag, after its data; a low-latency read word
      if (p.mirror->line(m.slot) == p.mirror->lowLatencyRead() && p.mirror->lowLatencyBytes) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (static_cast<int32_t>(m.value - p.lowLatencyRead) > 0) p.lowLatencyRead = m.value;
        raiseLowLatencyReadLocked(p);
        return ncclSuccess;
      }
      raise(p.mirror->line(m.slot), m.value);
      return ncclSuccess;
    default:  // a flag, after its data
      raise(p.mirror->flag(m.kind, m.slot), m.value);
      return ncclSuccess;
  }
}

void StreamRelay::lost(Peer& p, ncclResult_t why) {
  p.lost = true;
  p.out.clear();
  if (p.done) return;  // it closed after saying goodbye
  const std::string cause = lastError();
  const ncclResult_t r = fail(why == ncclSuccess ? ncclRemoteError : why,
                              "stream collectives: the connection to rank %d is lost: %s", p.rank, cause.c_str());
  HETCCL_WARN("rank %d: %s", setup_.rank, lastError());
  if (setup_.onFailure) setup_.onFailure(r);
}

}  // namespace hetccl
