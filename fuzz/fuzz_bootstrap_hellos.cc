// libFuzzer target: bytes that strangers and broken ranks send to the
// bootstrap root and to a communicator's listener. One input is up to
// eight connections' worth of bytes; a connection's first byte says
// whether the harness puts the right magic and secret in front (so the
// fuzzer reaches the checks behind them: ranks, nranks, tags). Whatever
// arrives, the root and the listener must answer well-formed replies or
// nothing, and go on serving: every few inputs a real rank must still get
// through, within a second.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/unique_id.h"

using namespace hetccl;

namespace {

struct Target {
  ncclUniqueId id;
  DecodedId root;
  Listener listener;
};

// A fresh root (one rendezvous each: a fuzzed hello may complete one) and
// listener.
std::unique_ptr<Target> fresh() {
  auto t = std::make_unique<Target>();
  if (createUniqueId(&t->id) != ncclSuccess || decodeUniqueId(t->id, &t->root) != ncclSuccess ||
      t->listener.open(t->root.secret) != ncclSuccess)
    __builtin_trap();
  return t;
}

// The root's hello starts {magic, rank, nranks, pad, secret}; the
// listener's {magic, rank, secret, tag}.
constexpr uint32_t kRootMagic = 0x544f4f52, kHelloMagic = 0x4f4c4548;

void send(const SocketAddress& at, const std::vector<uint8_t>& bytes, bool readReply) {
  Socket s;
  if (Socket::connect(at, Deadline(1.0), nullptr, &s) != ncclSuccess) return;
  (void)s.sendAll(bytes.data(), bytes.size(), Deadline(0.2), nullptr);
  if (!readReply) return;
  struct {
    uint32_t magic, status;
    int32_t nranks, rank;
  } reply{};
  if (s.recvAll(&reply, sizeof(reply), Deadline(0.02), nullptr) == ncclSuccess && reply.magic != kRootMagic)
    __builtin_trap();  // the root never answers anything but a reply
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::unique_ptr<Target> target = fresh();
  static unsigned inputs = 0;
  size_t at = 0;
  for (int c = 0; c < 8 && at < size; ++c) {
    const uint8_t mode = data[at++];
    size_t len = 0;
    if (at < size) {
      len = data[at++];
      len = std::min(len, size - at);
    }
    std::vector<uint8_t> bytes;
    const bool toRoot = mode & 1;
    if (mode & 2) {  // a correct prefix, then the fuzzer's bytes
      const uint32_t magic = toRoot ? kRootMagic : kHelloMagic;
      const uint64_t secret = target->root.secret;
      bytes.resize(toRoot ? 16 : 8);
      memcpy(bytes.data(), &magic, 4);
      if (!toRoot) memcpy(bytes.data() + 4, data + at, std::min<size_t>(len, 4));
      if (toRoot) memcpy(bytes.data() + 4, data + at, std::min<size_t>(len, 12));
      bytes.insert(bytes.end(), reinterpret_cast<const uint8_t*>(&secret), reinterpret_cast<const uint8_t*>(&secret) + 8);
    }
    bytes.insert(bytes.end(), data + at, data + at + len);
    at += len;
    send(toRoot ? target->root.root : target->listener.address(), bytes, toRoot);
    // Drain the listener's door so its hellos are read.
    Socket none;
    bool accepted = false;
    (void)target->listener.tryAcceptFrom(-12345, 0, nullptr, &none, &accepted);
  }
  if (++inputs % 16 == 0) {
    // A real rank still gets through at once: a listener's friend, and a
    // one-rank rendezvous (which ends this root: start a new one).
    const auto start = std::chrono::steady_clock::now();
    Socket mine, got;
    if (Listener::connectTo(target->listener.address(), target->root.secret, 7, 99, Deadline(1), nullptr, &mine) !=
            ncclSuccess ||
        target->listener.acceptFrom(7, 99, Deadline(1), nullptr, &got) != ncclSuccess)
      __builtin_trap();
    SocketAddress any;
    (void)findInterfaceAddress(&any, nullptr);
    std::vector<RankInfo> table;
    const ncclResult_t r = rendezvousWithRoot(target->root, 0, 1, RankInfo::local(any, -1), &table, nullptr);
    // A fuzzed hello may have taken rank 0 or fixed another nranks first:
    // then the root says so at once; anything slower is a stall.
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(1)) __builtin_trap();
    if (r == ncclSuccess && table.size() != 1) __builtin_trap();
    target = fresh();
  }
  return 0;
}
