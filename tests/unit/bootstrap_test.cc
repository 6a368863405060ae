// Unique ids, addresses, and the listener's secret check.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "bootstrap/unique_id.h"
#include "common/error.h"

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
