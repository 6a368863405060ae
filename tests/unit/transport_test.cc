// Each transport through its plugin-shaped interface: connect/accept,
// isend/irecv/test, in-order matching, and tag/size mismatch as an error.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "transport/net_plugin/net_plugin.h"
#include "transport/shm/shm_segment.h"
#include "transport/transport.h"
#include "transport/transport_context.h"

using namespace hetccl;

namespace {

using Factory = std::unique_ptr<Transport> (*)(const TransportContext&);

struct Pair {
  Listener listeners[2];
  std::vector<RankInfo> peers;
  AbortFlag abort{false};
  std::unique_ptr<Transport> transports[2];

  explicit Pair(Factory make) {
    const uint64_t secret = 0x1234abcdull + reinterpret_cast<uintptr_t>(this);
    for (auto& l : listeners) EXPECT_EQ(l.open(secret), ncclSuccess);
    for (auto& l : listeners) peers.push_back(RankInfo::local(l.address(), -1));
    for (int r = 0; r < 2; ++r) {
      TransportContext ctx;
      ctx.rank = r;
      ctx.nranks = 2;
      ctx.secret = secret;
      ctx.peers = &peers;
      ctx.listener = &listeners[r];
      ctx.abort = &abort;
      ctx.timeoutSeconds = 10;
      transports[r] = make(ctx);
    }
  }
};

// Rank 0's send connection to rank 1 and rank 1's receive connection from 0.
void connectPair(Pair& p, std::unique_ptr<Connection>* out, std::unique_ptr<Connection>* in) {
  ASSERT_EQ(p.transports[0]->connect(1, out), ncclSuccess);
  const auto t0 = std::chrono::steady_clock::now();
  while (!*in) {
    ASSERT_EQ(p.transports[1]->tryAccept(0, in), ncclSuccess);
    ASSERT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  }
}

ncclResult_t waitFor(Connection* c, Request* r) {
  for (int i = 0; i < 10000000; ++i) {
    bool done = false;
    ncclResult_t res = c->test(r, &done);
    if (res != ncclSuccess || done) return res;
    std::this_thread::yield();
  }
  return ncclInternalError;
}

void exchange(Factory make, size_t bytes) {
  Pair p(make);
  std::vector<char> a(bytes), b(bytes), c(bytes);
  std::iota(a.begin(), a.end(), 1);
  std::iota(b.begin(), b.end(), 7);
  std::atomic<bool> receiverDone{false};
  std::unique_ptr<Connection> early;  // nobody has connected yet: nothing, at once
  ASSERT_EQ(p.transports[1]->tryAccept(0, &early), ncclSuccess);
  EXPECT_FALSE(early);
  std::thread sender([&] {
    std::unique_ptr<Connection> conn;
    ASSERT_EQ(p.transports[0]->connect(1, &conn), ncclSuccess);
    Request r1, r2;
    r1.sendData = a.data(), r1.size = bytes, r1.tag = 11;
    r2.sendData = b.data(), r2.size = bytes, r2.tag = 12;
    ASSERT_EQ(conn->isend(&r1), ncclSuccess);
    ASSERT_EQ(conn->isend(&r2), ncclSuccess);
    ASSERT_EQ(waitFor(conn.get(), &r1), ncclSuccess);
    // The second message is refused by the receiver: keep driving it (a
    // large one is read from our memory) until the receiver has looked.
    while (!receiverDone.load()) {
      bool done;
      ASSERT_EQ(conn->test(&r2, &done), ncclSuccess);
      std::this_thread::yield();
    }
    EXPECT_EQ(conn->irecv(&r1), ncclInternalError);  // a send connection takes no receives
  });
  // The receive side is polled and never waits for the sender.
  std::unique_ptr<Connection> conn;
  const auto t0 = std::chrono::steady_clock::now();
  while (!conn) {
    ASSERT_EQ(p.transports[1]->tryAccept(0, &conn), ncclSuccess);
    ASSERT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10)) << "the sender never connected";
    std::this_thread::yield();
  }
  Request r1, r2;
  r1.recvData = c.data(), r1.size = bytes, r1.tag = 11;
  ASSERT_EQ(conn->irecv(&r1), ncclSuccess);
  ASSERT_EQ(waitFor(conn.get(), &r1), ncclSuccess);
  EXPECT_EQ(c, a);
  r2.recvData = c.data(), r2.size = bytes, r2.tag = 99;  // the sender's second message is tag 12
  ASSERT_EQ(conn->irecv(&r2), ncclSuccess);
  EXPECT_EQ(waitFor(conn.get(), &r2), ncclInvalidUsage);
  receiverDone = true;
  sender.join();
}

// Receives `want` under `tag` on `in` while driving the sender's
// `pending` send on `out` (a read of the sender's memory completes once
// the sender looks), and checks it arrived intact.
void receiveDriving(Connection* in, Connection* out, Request* pending, uint64_t tag, const std::vector<char>& want) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<char> got(want.size());
  Request r;
  r.recvData = got.data(), r.size = want.size(), r.tag = tag;
  ASSERT_EQ(in->irecv(&r), ncclSuccess);
  while (!r.complete) {
    bool done;
    ASSERT_EQ(out->test(pending, &done), ncclSuccess);
    ASSERT_EQ(in->test(&r, &done), ncclSuccess);
    ASSERT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  }
  EXPECT_EQ(got, want) << "tag " << tag;
}

}  // namespace

// A Buffered send (a chain's hop) is copied through the shared slots at any
// size: it completes before its receiver has posted anything, where a
// large send of the default kind may wait for the receiver to read it out
// of the sender's memory. Both arrive intact.
TEST(ShmTransport, ABufferedSendGoesOnWithoutItsReader) {
  Pair p(&makeShmTransport);
  const size_t bytes = 512 << 10;  // past the single-copy threshold (64 KiB), within the slots (8 x 256 KiB)
  std::vector<char> a(bytes), b(bytes);
  std::iota(a.begin(), a.end(), 3);
  std::iota(b.begin(), b.end(), 5);
  std::unique_ptr<Connection> out, in;
  ASSERT_NO_FATAL_FAILURE(connectPair(p, &out, &in));
  Request buffered, any;
  buffered.sendData = a.data(), buffered.size = bytes, buffered.tag = 1, buffered.delivery = Delivery::Buffered;
  ASSERT_EQ(out->isend(&buffered), ncclSuccess);
  ASSERT_EQ(waitFor(out.get(), &buffered), ncclSuccess);  // nobody has posted a receive yet
  any.sendData = b.data(), any.size = bytes, any.tag = 2;
  ASSERT_EQ(out->isend(&any), ncclSuccess);
  ASSERT_NO_FATAL_FAILURE(receiveDriving(in.get(), out.get(), &any, 1, a));
  ASSERT_NO_FATAL_FAILURE(receiveDriving(in.get(), out.get(), &any, 2, b));
  ASSERT_EQ(waitFor(out.get(), &any), ncclSuccess);
}

// A ring's step (Delivery::SlotSized) goes through the slots while it
// fits one (256 KiB: it completes before its receiver has posted
// anything) and beyond is read by the receiver out of the sender's memory,
// like a send of the default kind: it waits for that read. Both arrive
// intact.
TEST(ShmTransport, ARingStepGoesThroughTheSlotsWhileItFitsOne) {
  Pair p(&makeShmTransport);
  const size_t slot = 256 << 10;  // HETCCL_SHM_SLOT_BYTES' default
  std::vector<char> a(slot), b(slot + 4096);
  std::iota(a.begin(), a.end(), 3);
  std::iota(b.begin(), b.end(), 5);
  std::unique_ptr<Connection> out, in;
  ASSERT_NO_FATAL_FAILURE(connectPair(p, &out, &in));
  Request fits, beyond;
  fits.sendData = a.data(), fits.size = a.size(), fits.tag = 1, fits.delivery = Delivery::SlotSized;
  ASSERT_EQ(out->isend(&fits), ncclSuccess);
  ASSERT_EQ(waitFor(out.get(), &fits), ncclSuccess);  // nobody has posted a receive yet
  beyond.sendData = b.data(), beyond.size = b.size(), beyond.tag = 2, beyond.delivery = Delivery::SlotSized;
  ASSERT_EQ(out->isend(&beyond), ncclSuccess);
  for (int i = 0; i < 1000; ++i) {
    bool done = false;
    ASSERT_EQ(out->test(&beyond, &done), ncclSuccess);
    ASSERT_FALSE(done) << "a step beyond one slot completed before its receiver read it";
  }
  ASSERT_NO_FATAL_FAILURE(receiveDriving(in.get(), out.get(), &beyond, 1, a));
  ASSERT_NO_FATAL_FAILURE(receiveDriving(in.get(), out.get(), &beyond, 2, b));
  ASSERT_EQ(waitFor(out.get(), &beyond), ncclSuccess);
}

TEST(ShmTransport, SmallMessagesAndMismatch) { exchange(&makeShmTransport, 1000); }
TEST(ShmTransport, LargeMessagesAndMismatch) { exchange(&makeShmTransport, 3 << 20); }
TEST(SocketTransport, SmallMessagesAndMismatch) { exchange(&makeSocketTransport, 1000); }
TEST(SocketTransport, LargeMessagesAndMismatch) { exchange(&makeSocketTransport, 3 << 20); }

// A wait that fails leaves its requests queued, and they die with the
// failed call's frame; the communicator then stops (markGone). A sender
// that moved none of its message still tells its peer why it stopped,
// whatever the dead request's memory now holds (here: bytes that read as
// a message part way).
TEST(SocketTransport, AStoppingSenderReadsNoAbandonedRequest) {
  Pair p(&makeSocketTransport);
  std::unique_ptr<Connection> out, in;
  ASSERT_NO_FATAL_FAILURE(connectPair(p, &out, &in));
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<char> data(1000, 1);
  Request abandoned;
  abandoned.sendData = data.data(), abandoned.size = data.size(), abandoned.tag = 4;
  ASSERT_EQ(out->isend(&abandoned), ncclSuccess);  // queued, never driven
  abandoned.phase = 1, abandoned.progress = 3;      // its frame reused
  out->markGone(Connection::kGoneMismatch);
  uint32_t reason = 0;
  while (!reason && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
    reason = in->peerGoneReason();
    std::this_thread::yield();
  }
  EXPECT_EQ(reason, Connection::kGoneMismatch) << "the receiver saw the sockets close without the reason";
}

// /dev/shm's names are listed to every local user: they carry a hash of
// the communicator's secret, never the secret (before, its 16 hex digits).
TEST(ShmTransport, SegmentNamesDoNotShowTheSecret) {
  const uint64_t secret = 0x0123456789abcdefull;
  const std::string name = sharedSegmentName(secret, "p2p", 1, 2, 345);
  for (const char* part : {"0123456789abcdef", "01234567", "89abcdef"})
    EXPECT_EQ(name.find(part), std::string::npos) << name;
  EXPECT_NE(name, sharedSegmentName(secret + 1, "p2p", 1, 2, 345));
  EXPECT_EQ(name.rfind("-345"), name.size() - 4);  // the creator's pid last (removeStaleSegments)
}

// The net plugin's device for a rank: the NIC sharing the most of the GPU's
// PCI path; equals (and CPU ranks, with no path) spread by local index.
TEST(NetPluginDevice, NearestNicToTheGpuThenRoundRobin) {
  const std::vector<std::string> nics = {
      "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0",  // behind switch 01
      "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0",  // behind switch 01 too
      "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:00.0",  // the other socket
  };
  const std::string gpuOnSwitch01 = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:03:00.0";
  const std::string gpuOnSocket1 = "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0/0000:84:00.0";
  EXPECT_EQ(hetccl::nearestNetDevice(gpuOnSwitch01, nics, 0), 0);
  EXPECT_EQ(hetccl::nearestNetDevice(gpuOnSwitch01, nics, 1), 1);
  EXPECT_EQ(hetccl::nearestNetDevice(gpuOnSwitch01, nics, 2), 0);
  EXPECT_EQ(hetccl::nearestNetDevice(gpuOnSocket1, nics, 0), 2);
  EXPECT_EQ(hetccl::nearestNetDevice(gpuOnSocket1, nics, 5), 2);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(hetccl::nearestNetDevice("", nics, i), i % 3) << "CPU rank " << i;
  EXPECT_EQ(hetccl::nearestNetDevice(gpuOnSwitch01, {"", "", ""}, 4), 1);  // a plugin that gives no paths
  EXPECT_EQ(hetccl::nearestNetDevice(gpuOnSwitch01, {}, 3), 0);
}
