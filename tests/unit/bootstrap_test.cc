// Unique ids, addresses, the listener's secret check, the root, and init marks.
#include <dirent.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "bootstrap/hello_gate.h"
#include "bootstrap/peer_process.h"
#include "bootstrap/unique_id.h"
#include "common/error.h"
#include "transport/init_marker.h"

using namespace hetccl;

TEST(UniqueId, RoundTripsAndRejectsGarbage) {
  ncclUniqueId id;
  ASSERT_EQ(createUniqueId(&id), ncclSuccess);
  DecodedId d;
  ASSERT_EQ(decodeUniqueId(id, &d), ncclSuccess);
  EXPECT_NE(d.secret, 0u);
  EXPECT_FALSE(d.rootStartedByRank0);
  ncclUniqueId other;
  ASSERT_EQ(createUniqueId(&other), ncclSuccess);
  DecodedId d2;
  ASSERT_EQ(decodeUniqueId(other, &d2), ncclSuccess);
  EXPECT_NE(d.secret, d2.secret);

  ncclUniqueId garbage;
  memset(&garbage, 0x5a, sizeof(garbage));
  EXPECT_EQ(decodeUniqueId(garbage, &d), ncclInvalidArgument);
  EXPECT_NE(std::string(lastError()).find("not valid"), std::string::npos);
}

TEST(SocketAddress, ParsesV4AndV6) {
  SocketAddress a;
  ASSERT_EQ(SocketAddress::parse("127.0.0.1:1234", &a), ncclSuccess);
  EXPECT_EQ(a.family(), AF_INET);
  EXPECT_EQ(a.toString(), "127.0.0.1:1234");
  ASSERT_EQ(SocketAddress::parse("[::1]:99", &a), ncclSuccess);
  EXPECT_EQ(a.family(), AF_INET6);
  EXPECT_EQ(a.toString(), "[::1]:99");
  EXPECT_EQ(SocketAddress::parse("nocolon", &a), ncclInvalidArgument);
}

TEST(Listener, RefusesConnectionsWithoutTheSecret) {
  Listener listener;
  ASSERT_EQ(listener.open(1234), ncclSuccess);
  const Deadline deadline(5);
  std::thread intruder([&] {
    Socket s;
    Listener::connectTo(listener.address(), 999, 1, kTagRing, deadline, nullptr, &s);  // wrong secret
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  });
  std::thread friendly([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    Socket s;
    Listener::connectTo(listener.address(), 1234, 1, kTagRing, deadline, nullptr, &s);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  });
  Socket got;
  EXPECT_EQ(listener.acceptFrom(1, kTagRing, deadline, nullptr, &got), ncclSuccess);
  EXPECT_TRUE(got.valid());
  intruder.join();
  friendly.join();
  // Nobody else is coming: the wait ends at its deadline with an error.
  Socket none;
  EXPECT_EQ(listener.acceptFrom(2, kTagRing, Deadline(0.3), nullptr, &none), ncclRemoteError);
}

TEST(Listener, V6LoopbackWorks) {
  SocketAddress v6;
  ASSERT_EQ(SocketAddress::parse("[::1]:0", &v6), ncclSuccess);
  Socket listen;
  SocketAddress bound;
  if (Socket::listen(v6, &listen, &bound) != ncclSuccess) GTEST_SKIP() << "no IPv6 loopback here";
  Socket client, server;
  ASSERT_EQ(Socket::connect(bound, Deadline(5), nullptr, &client), ncclSuccess);
  ASSERT_EQ(listen.accept(Deadline(5), nullptr, &server), ncclSuccess);
  int x = 42, y = 0;
  ASSERT_EQ(client.sendAll(&x, sizeof(x), Deadline(5), nullptr), ncclSuccess);
  ASSERT_EQ(server.recvAll(&y, sizeof(y), Deadline(5), nullptr), ncclSuccess);
  EXPECT_EQ(y, 42);
}

TEST(Interfaces, FilterAndFamilyAreHonoured) {
  SocketAddress a;
  std::string name;
  ASSERT_EQ(findInterfaceAddress("lo", AF_INET, &a, &name), ncclSuccess);
  EXPECT_EQ(name, "lo");
  EXPECT_EQ(a.toString().rfind("127.", 0), 0u) << a.toString();
  ASSERT_EQ(findInterfaceAddress("=lo", 0, &a, &name), ncclSuccess);
  EXPECT_EQ(name, "lo");
  if (findInterfaceAddress("^lo", 0, &a, &name) == ncclSuccess) EXPECT_NE(name, "lo");
  if (findInterfaceAddress("lo", AF_INET6, &a, &name) == ncclSuccess) EXPECT_EQ(a.toString().rfind("[::1]", 0), 0u);
  EXPECT_EQ(findInterfaceAddress("nosuchif", 0, &a, &name), ncclSystemError);
  EXPECT_NE(std::string(lastError()).find("nosuchif"), std::string::npos);
  // The default prefers a non-loopback interface when there is one.
  ASSERT_EQ(findInterfaceAddress("", 0, &a, &name), ncclSuccess);
}

// The root serves only ranks that present the id's secret: an intruder with
// a forged id is refused (and times out), the real rank gets its table.
TEST(Root, RefusesAForgedSecret) {
  ncclUniqueId id;
  ASSERT_EQ(createUniqueId(&id), ncclSuccess);
  DecodedId real;
  ASSERT_EQ(decodeUniqueId(id, &real), ncclSuccess);
  DecodedId forged = real;
  forged.secret ^= 0x1;
  SocketAddress any;
  ASSERT_EQ(findInterfaceAddress(&any, nullptr), ncclSuccess);
  RankInfo mine = RankInfo::local(any, -1);
  std::vector<RankInfo> table;
  AbortFlag stop{false};
  std::thread intruder([&] {
    std::vector<RankInfo> stolen;
    // Aborted after a moment: the root never answers a forged hello.
    EXPECT_NE(rendezvousWithRoot(forged, 0, 1, mine, &stolen, &stop), ncclSuccess);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(rendezvousWithRoot(real, 0, 1, mine, &table, nullptr), ncclSuccess);
  ASSERT_EQ(table.size(), 1u);
  EXPECT_EQ(table[0].pid, mine.pid);
  stop = true;
  intruder.join();
}

namespace {

// Strangers at a port: `silent` connect and say nothing, `garbage` send
// bytes that are no hello, `slow` send a hello's first bytes and stop,
// `wrongSecret` send a whole listener hello with another secret.
struct Strangers {
  std::vector<Socket> held;
  void arrive(const SocketAddress& at, int silent, int garbage, int slow, int wrongSecret = 10) {
    for (int i = 0; i < wrongSecret; ++i) {
      Socket s;
      ASSERT_EQ(Listener::connectTo(at, 0xbad, i, kTagRing, Deadline(5), nullptr, &s), ncclSuccess);
      held.push_back(std::move(s));
    }
    for (int i = 0; i < silent + garbage + slow; ++i) {
      Socket s;
      ASSERT_EQ(Socket::connect(at, Deadline(5), nullptr, &s), ncclSuccess);
      if (i >= silent) {
        std::vector<char> junk(i < silent + garbage ? 4096 : 3, static_cast<char>(0x5a + i));
        ASSERT_EQ(s.sendAll(junk.data(), junk.size(), Deadline(5), nullptr), ncclSuccess);
      }
      held.push_back(std::move(s));
    }
  }
};

// A fresh bootstrap root (its decoded id) and this machine's address.
struct RootUnderTest {
  DecodedId id;
  SocketAddress any;
};
RootUnderTest startRoot() {
  RootUnderTest t;
  ncclUniqueId id;
  EXPECT_EQ(createUniqueId(&id), ncclSuccess);
  EXPECT_EQ(decodeUniqueId(id, &t.id), ncclSuccess);
  EXPECT_EQ(findInterfaceAddress(&t.any, nullptr), ncclSuccess);
  return t;
}

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

// Dozens of silent, garbage and half-hello connections at the root before
// the ranks arrive change nothing: the table comes at once.
TEST(Root, StrangersDelayNobody) {
  const auto [real, any] = startRoot();
  Strangers strangers;
  strangers.arrive(real.root, 20, 10, 10);
  const auto start = std::chrono::steady_clock::now();
  std::vector<RankInfo> tables[3];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.emplace_back([&, r] {
      RankInfo mine = RankInfo::local(any, -1);
      mine.device = r;
      EXPECT_EQ(rendezvousWithRoot(real, r, 3, mine, &tables[r], nullptr), ncclSuccess) << lastError();
    });
  for (auto& t : ranks) t.join();
  EXPECT_LT(secondsSince(start), 0.5);
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(tables[r].size(), 3u);
    for (int p = 0; p < 3; ++p) EXPECT_EQ(tables[r][p].device, p);
  }
}

// A rank whose hello holds an impossible or different nranks, or a rank
// taken already, is answered at once with the reason; the root lives on
// and serves the ranks that agree.
TEST(Root, BadHellosAreRefusedAndTheRootLivesOn) {
  const auto [real, any] = startRoot();
  const RankInfo mine = RankInfo::local(any, -1);
  std::vector<RankInfo> table;
  const auto start = std::chrono::steady_clock::now();
  // Called as a rank would be if its caller's checks were bypassed.
  EXPECT_EQ(rendezvousWithRoot(real, 0, -1, mine, &table, nullptr), ncclInvalidArgument) << lastError();
  EXPECT_EQ(rendezvousWithRoot(real, 1, 100000000, mine, &table, nullptr), ncclInvalidArgument) << lastError();
  EXPECT_EQ(rendezvousWithRoot(real, 5, 3, mine, &table, nullptr), ncclInvalidArgument) << lastError();
  EXPECT_LT(secondsSince(start), 1.0);
  std::thread rank1([&] {
    std::vector<RankInfo> t;
    EXPECT_EQ(rendezvousWithRoot(real, 1, 2, mine, &t, nullptr), ncclSuccess) << lastError();
    EXPECT_EQ(t.size(), 2u);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // Rank 1 again, and a rank 2 of 3 while rank 0 will say 2.
  EXPECT_EQ(rendezvousWithRoot(real, 1, 2, mine, &table, nullptr), ncclInvalidUsage) << lastError();
  std::thread rank2([&] {
    std::vector<RankInfo> t;
    EXPECT_EQ(rendezvousWithRoot(real, 2, 3, mine, &t, nullptr), ncclInvalidUsage) << lastError();
    EXPECT_NE(std::string(lastError()).find("rank 0 said 2"), std::string::npos) << lastError();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(rendezvousWithRoot(real, 0, 2, mine, &table, nullptr), ncclSuccess) << lastError();
  EXPECT_EQ(table.size(), 2u);
  rank1.join();
  rank2.join();
}

// The same strangers at a communicator's listener: a friend's connection
// behind them is taken at once.
TEST(Listener, StrangersDelayNobody) {
  Listener listener;
  ASSERT_EQ(listener.open(1234), ncclSuccess);
  Strangers strangers;
  strangers.arrive(listener.address(), 20, 10, 10);
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    Socket mine, got;
    ASSERT_EQ(Listener::connectTo(listener.address(), 1234, i, kTagRing, Deadline(5), nullptr, &mine), ncclSuccess);
    EXPECT_EQ(listener.acceptFrom(i, kTagRing, Deadline(5), nullptr, &got), ncclSuccess) << lastError();
    EXPECT_LT(secondsSince(start), 0.5);
    strangers.arrive(listener.address(), 5, 0, 0, 2);
  }
}

// More strangers than the listener keeps: the oldest are dropped once
// they have had HelloGate::kPatienceSeconds, and a friend gets through.
TEST(Listener, AFloodOfStrangersIsBounded) {
  Listener listener;
  ASSERT_EQ(listener.open(99), ncclSuccess);
  Strangers strangers;
  strangers.arrive(listener.address(), static_cast<int>(HelloGate::kMaxWaiting) + 20, 0, 0, 0);
  Socket mine, got;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(Listener::connectTo(listener.address(), 99, 7, kTagRing, Deadline(5), nullptr, &mine), ncclSuccess);
  EXPECT_EQ(listener.acceptFrom(7, kTagRing, Deadline(5), nullptr, &got), ncclSuccess) << lastError();
  EXPECT_LT(secondsSince(start), HelloGate::kPatienceSeconds + 0.5);
}

// A full gate drops only a connection it has looked at after its patience:
// connections that were silent at the last look and whose hellos came
// since (a rank held off the cores, a pass that took long) are read, not
// dropped for a newcomer.
TEST(HelloGate, DropsOnlyWhatItLookedAtAfterItsPatience) {
  SocketAddress any, bound;
  ASSERT_EQ(findInterfaceAddress(&any, nullptr), ncclSuccess);
  any.setPort(0);
  Socket listener;
  ASSERT_EQ(Socket::listen(any, &listener, &bound), ncclSuccess);
  listener.setNonBlocking();
  constexpr size_t kHello = 8;
  HelloGate gate(kHello);
  size_t taken = 0;
  const HelloGate::Take take = [&](const void*, Socket&&) { ++taken; };
  std::vector<Socket> clients(HelloGate::kMaxWaiting + 1);
  for (size_t i = 0; i < HelloGate::kMaxWaiting; ++i)
    ASSERT_EQ(Socket::connect(bound, Deadline(5), nullptr, &clients[i]), ncclSuccess);
  bool took = false;
  while (gate.waiting() < HelloGate::kMaxWaiting) ASSERT_EQ(gate.pass(listener, 10, take, &took), ncclSuccess);
  ASSERT_EQ(taken, 0u);  // full, every one silent (and younger than its patience) at the look
  const char hello[kHello] = {};
  for (size_t i = 0; i < HelloGate::kMaxWaiting; ++i)
    ASSERT_EQ(clients[i].sendAll(hello, kHello, Deadline(5), nullptr), ncclSuccess);
  ASSERT_EQ(Socket::connect(bound, Deadline(5), nullptr, &clients.back()), ncclSuccess);  // a newcomer
  ASSERT_EQ(clients.back().sendAll(hello, kHello, Deadline(5), nullptr), ncclSuccess);
  std::this_thread::sleep_for(std::chrono::duration<double>(HelloGate::kPatienceSeconds + 0.1));
  for (int pass = 0; pass < 20 && taken < clients.size(); ++pass)
    ASSERT_EQ(gate.pass(listener, 10, take, &took), ncclSuccess);
  EXPECT_EQ(taken, clients.size()) << "a connection whose hello had come was dropped unread";
}

// More ranks than the gate keeps waiting, all at once: every one gets its
// table (their hellos come with their connections; nobody is dropped).
TEST(Root, HundredsOfRanksAtOnce) {
  constexpr int kRanks = static_cast<int>(HelloGate::kMaxWaiting) * 2 + 1;
  const auto [real, any] = startRoot();
  std::atomic<int> served{0}, ready{0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r)
    ranks.emplace_back([&, r] {
      ++ready;
      while (ready.load() < kRanks) std::this_thread::yield();  // then all connect at once
      RankInfo mine = RankInfo::local(any, -1);
      mine.device = r;
      std::vector<RankInfo> table;
      if (rendezvousWithRoot(real, r, kRanks, mine, &table, nullptr) == ncclSuccess && table.size() == kRanks &&
          table[static_cast<size_t>(kRanks - 1)].device == kRanks - 1)
        ++served;
    });
  for (auto& t : ranks) t.join();
  EXPECT_EQ(served.load(), kRanks);
}

// A root that closes a rank's connection before reading its hello (its
// door full, the rank held off the cores between its connect and its
// hello): the rank says hello again and gets its table. A stand-in door
// in front of the root closes the first connection unread and relays the
// second.
TEST(Root, ARankDroppedBeforeItsHelloSaysItAgain) {
  const auto [real, any] = startRoot();
  SocketAddress at = any, doorAddress;
  at.setPort(0);
  Socket door;
  ASSERT_EQ(Socket::listen(at, &door, &doorAddress), ncclSuccess);
  int connections = 0;
  std::thread relay([&] {
    Socket first, second, root;
    for (Socket* s : {&first, &second}) {
      bool accepted = false;
      for (int wait = 0; !accepted && wait < 100; ++wait) ASSERT_EQ(door.acceptWithin(100, s, &accepted), ncclSuccess);
      ASSERT_TRUE(accepted) << "connection " << connections + 1 << " never came";
      ++connections;
      if (s == &first) first = Socket();  // closed unread
    }
    ASSERT_EQ(Socket::connect(real.root, Deadline(5), nullptr, &root), ncclSuccess);
    char buf[4096];
    for (bool closed = false; !closed;) {  // bytes both ways until a side closes
      pollfd p[2] = {{second.fd(), POLLIN, 0}, {root.fd(), POLLIN, 0}};
      ::poll(p, 2, 100);
      for (int i = 0; i < 2; ++i) {
        const Socket& from = i ? root : second;
        const Socket& to = i ? second : root;
        const ssize_t n = ::recv(from.fd(), buf, sizeof buf, MSG_DONTWAIT);
        closed |= n == 0;
        if (n > 0) ASSERT_EQ(to.sendAll(buf, static_cast<size_t>(n), Deadline(5), nullptr), ncclSuccess);
      }
    }
  });
  DecodedId viaDoor = real;
  viaDoor.root = doorAddress;
  viaDoor.rootPid = 0;
  std::thread rank1([&] {
    std::vector<RankInfo> t;
    EXPECT_EQ(rendezvousWithRoot(real, 1, 2, RankInfo::local(any, -1), &t, nullptr), ncclSuccess) << lastError();
  });
  std::vector<RankInfo> table;
  EXPECT_EQ(rendezvousWithRoot(viaDoor, 0, 2, RankInfo::local(any, -1), &table, nullptr), ncclSuccess) << lastError();
  EXPECT_EQ(table.size(), 2u);
  rank1.join();
  relay.join();
  EXPECT_EQ(connections, 2);
}

// A rank that marked itself in init on this host and died before its
// hello reached the root is named at once by the ranks of its host that
// wait for the table (before: they waited for HETCCL_TIMEOUT).
TEST(Root, ARankDeadBeforeItsHelloIsNamedOnItsHost) {
  const auto [real, any] = startRoot();
  const pid_t child = fork();
  if (child == 0) {
    new InitMarker(real.secret, 2);  // marked (never unmarked), then gone
    _exit(0);
  }
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> ranks;
  std::string said[2];
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      const InitMarker marker(real.secret, r);
      std::vector<RankInfo> table;
      RankInfo mine = RankInfo::local(any, -1);
      EXPECT_EQ(rendezvousWithRoot(real, r, 3, mine, &table, nullptr, [&] { return marker.checkOthers(); }),
                ncclRemoteError);
      said[r] = lastError();
    });
  for (auto& t : ranks) t.join();
  EXPECT_LT(secondsSince(start), 1.0);
  // Each names rank 2, unless the other rank left first (then the root says so).
  const std::string named = "rank 2 (pid " + std::to_string(child) + ") died during init";
  EXPECT_TRUE(said[0].find(named) != std::string::npos || said[1].find(named) != std::string::npos)
      << said[0] << " / " << said[1];
  // The dead rank's mark (the next hetccl process on a host removes such).
  if (DIR* d = opendir("/dev/shm")) {
    const std::string end = "-" + std::to_string(child);
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.rfind("hetccl-", 0) == 0 && name.size() > end.size() && name.compare(name.size() - end.size(), end.size(), end) == 0)
        shm_unlink(("/" + name).c_str());
    }
    closedir(d);
  }
}

// A peer counts as gone from the moment it starts to exit: once its files
// are closed (a killed rank's sockets reset) it may still be tearing its
// memory down, not yet a zombie, and the survivors must already treat it
// as dead (they remove its segments then). A zombie is gone too.
TEST(PeerProcess, AnExitingOrZombieProcessIsGone) {
  EXPECT_FALSE(processGone(getpid()));
  for (int round = 0; round < 20; ++round) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(fds[0]);
      // Memory to tear down after the files close.
      const size_t bytes = 64 << 20;
      if (void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); p != MAP_FAILED)
        memset(p, 1, bytes);
      _exit(0);
    }
    close(fds[1]);
    char c;
    while (read(fds[0], &c, 1) > 0) {
    }
    close(fds[0]);
    EXPECT_TRUE(processGone(child)) << "its files are closed: it is exiting";
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(processGone(child));
  }
}
