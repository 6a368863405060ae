// The stream relay over the links other than one TCP connection
// (src/plan/relay_link_*.cc): several TCP connections per pair, an ncclNet
// plugin (HETCCL_TRANSPORT=net-plugin-all, the loopback test plugin),
// hetccl's RDMA network (rdma-all, the stand-in libibverbs) and UCX
// (ucx-all): the relay tests of stream_collectives_test.cc again, with
// every pair on that link. The links move bytes and leave the arithmetic
// to code the full matrix checks over TCP, so their matrices take one type
// of each width (mp::Scope::EachWidth) and their send/recv tests the
// send/recv ring alone.
#include <cstring>
#include <string>
#include <vector>

#include "hetccl.h"
#include "matrix.h"
#include "stream_test_util.h"

namespace {

using namespace streamtest;

// The relay over the net plugin (HETCCL_TRANSPORT=net-plugin-all: every
// pair relayed, as between hosts): every collective right, a peer that
// destroys first no error, a dead peer an error.
mp::Env pluginRelayEnv(const char* timeout = "60") {
  mp::Env env = streamEnv(timeout);
  env.push_back({"HETCCL_TRANSPORT", "net-plugin-all"});
  env.push_back({"HETCCL_NET_PLUGIN", HETCCL_TEST_NET_PLUGIN(9)});
  env.push_back({"HETCCL_NET_PLUGIN_SLOT_BYTES", "4096"});  // small slots: every piece of data above ~4 KiB goes apart
  return env;
}

// Every send/recv through the relay (on the streams), two ranks.
void sendRecvThroughTheRelay(const mp::EnvForRank& layout, size_t large) {
  const uint64_t seed = hetccl::testing::runSeed();
  EXPECT_RANKS_PASS_EACH(2, layout, 500, [&](int rank, int n, const ncclUniqueId& id) {
    return mp::runMatrix(rank, n, id, seed, large, nullptr, nullptr, nullptr, mp::Scope::SendRecvOnly);
  });
}

mp::Env withP2p(mp::Env env) {
  env.push_back({"HETCCL_STREAM_P2P", "1"});
  return env;
}

// TCP with several connections per pair and 1 MiB parts: messages of 128
// KiB and more are cut into ranges, one per connection, and applied in
// order (relay_link_socket.cc). The lower rank of a pair decides how many
// connections: here 3 between ranks 0 and 1 or 2, 1 between ranks 1 and 2.
TEST(StreamCollectives, ThroughTheRelayOverSeveralTcpConnections) {
  const uint64_t seed = hetccl::testing::runSeed();
  auto env = [](int rank) {
    mp::Env e = streamEnv();
    e.push_back({"HETCCL_DOMAIN", std::string(1, static_cast<char>('a' + rank))});
    e.push_back({"HETCCL_TRANSPORT", "socket"});
    e.push_back({"HETCCL_STREAM_PART_BYTES", "1048576"});
    e.push_back({"HETCCL_STREAM_P2P", "1"});
    e.push_back({"HETCCL_SOCKETS_PER_PEER", rank == 0 ? "3" : rank == 1 ? "1" : "2"});
    return e;
  };
  EXPECT_RANKS_PASS_EACH(3, env, 500, [&](int rank, int n, const ncclUniqueId& id) {
    return mp::runMatrix(rank, n, id, seed, 300007, kRelayedPlan, nullptr, everyPairRelayedOver(rank, n, "socket").c_str(),
                         mp::Scope::EachWidth);
  });
}

TEST(StreamCollectives, ThroughTheRelayOverTheNetPluginEveryCollectiveIsRight) {
  const uint64_t seed = hetccl::testing::runSeed();
  EXPECT_RANKS_PASS_EACH(3, mp::domainLayout({"a", "b", "c"}, pluginRelayEnv()), 500,
                         [&](int rank, int n, const ncclUniqueId& id) { return relayedMatrix(rank, n, id, seed, "net-plugin", mp::Scope::EachWidth); });
}

TEST(StreamCollectives, RelayedPeerThatDestroysFirstIsNoErrorOverTheNetPlugin) {
  relayedPeerThatDestroysFirstIsNoError(threeDomains(pluginRelayEnv()));
}

// A message whose data the plugin link sends apart, in pieces (the
// plugin's largest message is 64 KiB here), is applied (its flag raised)
// only once every piece is in: with pieces arriving 3 ms apart, an early
// flag would let the other rank read what has not arrived.
TEST(StreamCollectives, RelayOverTheNetPluginAppliesAMessageOnlyWhole) {
  mp::Env env = pluginRelayEnv("20");
  env.push_back({"TEST_NET_DELAY_US", "3000"});
  env.push_back({"HETCCL_STREAM_PART_BYTES", "1048576"});
  env.push_back({"HETCCL_NET_PLUGIN_SLOT_BYTES", "65536"});
  env.push_back({"TEST_NET_MAX_P2P_BYTES", "65536"});
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, env), 120, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const size_t count = 1 << 18;  // 1 MiB: 16 parts of 64 KiB
    const char* plan = hetcclCommDescribePlan(comm, "all_gather", count * sizeof(float), ncclFloat32);
    RANK_EXPECT(plan && strncmp(plan, "stream", 6) == 0, "all_gather plan: %s", plan ? plan : "(null)");
    std::vector<float> x(count), gathered(count * 2);
    for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>((i * 7 + static_cast<size_t>(rank) * 3) % 1024);
    RANK_NCCL(ncclAllGather(x.data(), gathered.data(), count, ncclFloat32, comm, nullptr));
    RANK_NCCL(ncclAllReduce(x.data(), x.data(), count, ncclFloat32, ncclSum, comm, nullptr));
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      const float a = static_cast<float>((i * 7) % 1024), b = static_cast<float>((i * 7 + 3) % 1024);
      wrong += x[i] != a + b || gathered[i] != a || gathered[count + i] != b;
    }
    RANK_EXPECT(wrong == 0, "%zu of %zu elements wrong", wrong, count);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST(StreamCollectives, DeadPeerThroughTheRelayOverTheNetPluginIsAnErrorNotAHang) { deadPeerIsAnError(threeDomains(pluginRelayEnv("20"))); }

TEST(StreamCollectives, SendRecvThroughTheRelayOverTheNetPluginEveryTypeAndCount) {
  sendRecvThroughTheRelay(mp::domainLayout({"a", "b"}, withP2p(pluginRelayEnv("20"))), 70001);
}

// The same relay over hetccl's RDMA network (HETCCL_TRANSPORT=rdma-all,
// the stand-in libibverbs): every collective, every send/recv, a peer that
// destroys first, a dead peer.
mp::Env rdmaRelayEnv(const char* timeout = "60") {
  mp::Env env = streamEnv(timeout);
  env.push_back({"HETCCL_TRANSPORT", "rdma-all"});
  env.push_back({"HETCCL_IB_LIB", HETCCL_TEST_FAKE_IBVERBS});
  env.push_back({"HETCCL_NET_PLUGIN_SLOT_BYTES", "4096"});
  return env;
}

TEST(StreamCollectives, ThroughTheRelayOverRdmaEveryCollectiveIsRight) {
  const uint64_t seed = hetccl::testing::runSeed();
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, rdmaRelayEnv()), 500,
                         [&](int rank, int n, const ncclUniqueId& id) { return relayedMatrix(rank, n, id, seed, "rdma", mp::Scope::EachWidth); });
}

TEST(StreamCollectives, SendRecvThroughTheRelayOverRdmaEveryTypeAndCount) {
  sendRecvThroughTheRelay(mp::domainLayout({"a", "b"}, withP2p(rdmaRelayEnv("20"))), 20011);
}

// The shape of a real mixed cluster: ranks 0 and 1 on one host (their
// segments shared), rank 2 on another (HETCCL_HOSTID), `transport` (rdma,
// ucx) between hosts only: the relay to and from rank 2 takes that
// network, as do the host-staged messages; ranks 0 and 1 keep shared memory.
void acrossTwoHostsOneSharesMemory(const std::string& transport, const mp::Env& extra) {
  const uint64_t seed = hetccl::testing::runSeed();
  auto envFor = [&](int rank) {
    mp::Env env = streamEnv("60");
    env.insert(env.end(), extra.begin(), extra.end());
    env.push_back({"HETCCL_TRANSPORT", transport});
    env.push_back({"HETCCL_HOSTID", rank < 2 ? "host-x" : "host-y"});
    env.push_back({"HETCCL_DOMAIN", std::string(1, static_cast<char>('a' + rank))});
    return env;
  };
  const std::string& t = transport;
  const std::string expected[] = {"0:self 1:shm 2:" + t, "0:shm 1:self 2:" + t, "0:" + t + " 1:" + t + " 2:self"};
  const std::string relayed[] = {"relayed {2:" + t + "}", "relayed {2:" + t + "}", everyPairRelayedOver(2, 3, t.c_str())};
  EXPECT_RANKS_PASS_EACH(3, envFor, 500, [&](int rank, int n, const ncclUniqueId& id) {
    return mp::runMatrix(rank, n, id, seed, 20011, kRelayedPlan, expected[rank].c_str(), relayed[rank].c_str(),
                         mp::Scope::EachWidth);
  });
}

TEST(StreamCollectives, AcrossTwoHostsTheRelayTakesRdmaAndOneHostSharesMemory) {
  acrossTwoHostsOneSharesMemory("rdma", {{"HETCCL_IB_LIB", HETCCL_TEST_FAKE_IBVERBS}});
}

TEST(StreamCollectives, RelayedPeerThatDestroysFirstIsNoErrorOverRdma) { relayedPeerThatDestroysFirstIsNoError(threeDomains(rdmaRelayEnv())); }

TEST(StreamCollectives, DeadPeerThroughTheRelayOverRdmaIsAnErrorNotAHang) { deadPeerIsAnError(threeDomains(rdmaRelayEnv("20"))); }

// The same relay over UCX (HETCCL_TRANSPORT=ucx-all: every pair relayed
// over it). On one host UCX takes its shared-memory transports; with each
// rank a host of its own (mp::hostPerRank) it is asked to report a failed
// peer and takes TCP here, as between hosts without RDMA.
mp::Env ucxRelayEnv(const char* timeout = "60") {
  mp::Env env = streamEnv(timeout);
  env.push_back({"HETCCL_TRANSPORT", "ucx-all"});
  return env;
}

TEST(StreamCollectives, ThroughTheRelayOverUcxEveryCollectiveIsRight) {
  const uint64_t seed = hetccl::testing::runSeed();
  EXPECT_RANKS_PASS_EACH(3, threeDomains(ucxRelayEnv()), 500,
                         [&](int rank, int n, const ncclUniqueId& id) { return relayedMatrix(rank, n, id, seed, "ucx", mp::Scope::EachWidth); });
}

TEST(StreamCollectives, SendRecvThroughTheRelayOverUcxEveryTypeAndCount) {
  sendRecvThroughTheRelay(mp::hostPerRank(mp::domainLayout({"a", "b"}, withP2p(ucxRelayEnv("20")))), 70001);
}

// Large parts (1 MiB: UCX's rendezvous, straight into the mirror).
TEST(StreamCollectives, ThroughTheRelayOverUcxLargeParts) {
  const uint64_t seed = hetccl::testing::runSeed();
  mp::Env env = ucxRelayEnv();
  env.push_back({"HETCCL_STREAM_PART_BYTES", "1048576"});
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, env), 500, [&](int rank, int n, const ncclUniqueId& id) {
    return mp::runMatrix(rank, n, id, seed, 300007, kRelayedPlan, nullptr, everyPairRelayedOver(rank, n, "ucx").c_str(),
                         mp::Scope::EachWidth);
  });
}

TEST(StreamCollectives, AcrossTwoHostsTheRelayTakesUcxAndOneHostSharesMemory) { acrossTwoHostsOneSharesMemory("ucx", {}); }

TEST(StreamCollectives, RelayedPeerThatDestroysFirstIsNoErrorOverUcx) {
  relayedPeerThatDestroysFirstIsNoError(threeDomains(ucxRelayEnv()));
  relayedPeerThatDestroysFirstIsNoError(mp::hostPerRank(threeDomains(ucxRelayEnv())));
}

// A dead peer: on one host the pair's socket notices; between hosts UCX
// reports it too.
TEST(StreamCollectives, DeadPeerThroughTheRelayOverUcxIsAnErrorNotAHang) {
  deadPeerIsAnError(threeDomains(ucxRelayEnv("20")));
  deadPeerIsAnError(mp::hostPerRank(threeDomains(ucxRelayEnv("20"))));
}

}  // namespace
