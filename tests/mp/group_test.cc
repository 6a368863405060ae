// Groups that hold collectives and send/recv on host ranks (host plans):
// as in NCCL's group, the send/recv run beside the collectives, so a peer
// may receive (or send) before it joins the collectives, or after; and a
// failure on either side ends the group with an error, not a wait for
// HETCCL_TIMEOUT.
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "mp_util.h"
#include "reference.h"

using namespace hetccl::testing;

namespace {

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The payload rank `from` sends in `round`: fresh for every seed.
int64_t payload(uint64_t seed, int from, int round, size_t i) {
  uint64_t z = seed ^ (static_cast<uint64_t>(from) << 40) ^ (static_cast<uint64_t>(round) << 32) ^ i;
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return static_cast<int64_t>(z ^ (z >> 31));
}

// Larger than a shared-memory connection's slots (8 x 256 KiB) and a
// socket's buffers, so a send cannot finish before its receive is posted.
// Odd, and zero in one round.
size_t messageCount(int round) { return round == 2 ? 0 : 400003 + static_cast<size_t>(round) * 2; }

// Rank r's partner: r ^ 1, or itself when it has none (odd rank counts).
int partnerOf(int rank, int n) { return (rank ^ 1) < n ? rank ^ 1 : rank; }

enum class Order { GroupedFirst, PartnerReceivesFirst, PartnerSendsFirst, PartnerJoinsCollectivesFirst, BothGrouped };

const char* orderName(Order o) {
  switch (o) {
    case Order::GroupedFirst: return "both grouped, send/recv first in the group";
    case Order::PartnerReceivesFirst: return "partner receives, then joins the collectives";
    case Order::PartnerSendsFirst: return "partner sends, then joins the collectives";
    case Order::PartnerJoinsCollectivesFirst: return "partner joins the collectives, then exchanges";
    case Order::BothGrouped: return "both grouped, collectives first in the group";
  }
  return "?";
}

// Every round: the even rank of a pair groups an all-reduce and an
// all-gather with an exchange with its partner; the odd one does the
// exchange and the collectives in the round's order. A rank without a
// partner exchanges with itself inside its group.
int collectivesBesideSendRecv(int rank, int n, const ncclUniqueId& id, uint64_t seed) {
  ncclComm_t comm;
  RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
  const int partner = partnerOf(rank, n);
  const bool grouping = rank % 2 == 0 || partner == rank;
  const Order orders[] = {Order::PartnerReceivesFirst, Order::PartnerSendsFirst, Order::PartnerJoinsCollectivesFirst,
                          Order::BothGrouped, Order::GroupedFirst};
  for (int round = 0; round < 5; ++round) {
    const Order order = orders[round];
    const size_t count = messageCount(round);
    std::vector<int64_t> out(count), in(count, -1);
    for (size_t i = 0; i < count; ++i) out[i] = payload(seed, rank, round, i);
    // The collectives: fresh inputs each round; in place in odd rounds.
    Case sum{Collective::AllReduce, ncclFloat32, ncclSum, 0, 1, 100003, n, seed + static_cast<uint64_t>(round)};
    Case gather{Collective::AllGather, ncclInt32, ncclSum, 0, 1, 5001, n, seed + 100 + static_cast<uint64_t>(round)};
    std::vector<float> sumIn(sum.count), sumOut(sum.count);
    std::vector<int32_t> gatherIn(gather.count), gatherOut(gather.count * static_cast<size_t>(n));
    fillInput(sum, rank, sumIn.data());
    fillInput(gather, rank, gatherIn.data());
    poison(ncclInt32, gatherOut.data(), gatherOut.size());
    const bool inPlace = round % 2 == 1;
    float* sumSend = sumIn.data();
    float* sumRecv = inPlace ? sumIn.data() : sumOut.data();
    auto collectives = [&]() -> ncclResult_t {
      ncclResult_t r = ncclAllReduce(sumSend, sumRecv, sum.count, ncclFloat32, ncclSum, comm, nullptr);
      if (r != ncclSuccess) return r;
      return ncclAllGather(gatherIn.data(), gatherOut.data(), gather.count, ncclInt32, comm, nullptr);
    };
    auto exchange = [&]() -> ncclResult_t {
      // Which of the pair sends first does not matter inside a group; the
      // odd rank's plain calls alternate so both directions are tested.
      ncclResult_t r = ncclSuccess;
      if (rank % 2 == 0 || round % 2 == 0) {
        r = ncclSend(out.data(), count, ncclInt64, partner, comm, nullptr);
        if (r == ncclSuccess) r = ncclRecv(in.data(), count, ncclInt64, partner, comm, nullptr);
      } else {
        r = ncclRecv(in.data(), count, ncclInt64, partner, comm, nullptr);
        if (r == ncclSuccess) r = ncclSend(out.data(), count, ncclInt64, partner, comm, nullptr);
      }
      return r;
    };
    if (grouping || order == Order::BothGrouped || order == Order::GroupedFirst) {
      const bool sendRecvFirst = order == Order::GroupedFirst;
      RANK_NCCL(ncclGroupStart());
      if (sendRecvFirst) RANK_NCCL(exchange());
      RANK_NCCL(collectives());
      if (!sendRecvFirst) RANK_NCCL(exchange());
      RANK_NCCL(ncclGroupEnd());
    } else if (order == Order::PartnerJoinsCollectivesFirst) {
      RANK_NCCL(collectives());
      RANK_NCCL(exchange());
    } else {
      // PartnerReceivesFirst / PartnerSendsFirst: a plain receive or send
      // that waits for the grouped partner, then the collectives.
      if (order == Order::PartnerReceivesFirst) {
        RANK_NCCL(ncclRecv(in.data(), count, ncclInt64, partner, comm, nullptr));
        RANK_NCCL(ncclSend(out.data(), count, ncclInt64, partner, comm, nullptr));
      } else {
        RANK_NCCL(ncclSend(out.data(), count, ncclInt64, partner, comm, nullptr));
        RANK_NCCL(ncclRecv(in.data(), count, ncclInt64, partner, comm, nullptr));
      }
      RANK_NCCL(collectives());
    }
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += in[i] != payload(seed, partner, round, i);
    RANK_EXPECT(wrong == 0, "round %d (%s): %zu of %zu elements from rank %d wrong", round, orderName(order), wrong,
                count, partner);
    std::string first;
    size_t sumWrong = countWrong(sum, rank, sumRecv, &first);
    RANK_EXPECT(sumWrong == 0, "round %d (%s): all-reduce %zu wrong: %s", round, orderName(order), sumWrong,
                first.c_str());
    size_t gatherWrong = countWrong(gather, rank, gatherOut.data(), &first);
    RANK_EXPECT(gatherWrong == 0, "round %d (%s): all-gather %zu wrong: %s", round, orderName(order), gatherWrong,
                first.c_str());
  }
  RANK_NCCL(ncclCommDestroy(comm));
  return 0;
}

struct Variant {
  const char* name;
  int nranks;
  mp::Env env;
  std::vector<std::string> domains;  // HETCCL_DOMAIN per rank; empty: one domain
};

void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

class Groups : public ::testing::TestWithParam<Variant> {};

// Before send/recv ran beside the collectives, the first two orders ended
// in a timeout error (HETCCL_TIMEOUT, 20 s here): the grouped rank ran its
// collectives first, while its partner waited in a plain receive or send.
TEST_P(Groups, SendRecvBesideCollectivesMeetPeersInAnyOrder) {
  const Variant& v = GetParam();
  const uint64_t seed = runSeed();
  mp::Env env = v.env;
  env.push_back({"HETCCL_TIMEOUT", "20"});
  auto envFor = [&](int rank) {
    mp::Env e = env;
    if (!v.domains.empty()) e.push_back({"HETCCL_DOMAIN", v.domains[static_cast<size_t>(rank)]});
    return e;
  };
  EXPECT_RANKS_PASS_EACH(v.nranks, envFor, 120, [seed](int rank, int n, const ncclUniqueId& id) {
    return collectivesBesideSendRecv(rank, n, id, seed);
  });
}

// Five ranks on two cores: pairs (0,1), (2,3), and rank 4 with itself.
// Across domains the collectives take the cross-domain plans; staged, the
// group runs on the staging path GPU ranks take (synchronous, and on the
// staging thread).
INSTANTIATE_TEST_SUITE_P(
    HostRanks, Groups,
    ::testing::Values(Variant{"2_ranks_shm", 2, {}, {}}, Variant{"5_ranks_shm", 5, {}, {}},
                      Variant{"3_ranks_sockets", 3, {{"HETCCL_TRANSPORT", "socket"}}, {}},
                      Variant{"3_ranks_ucx", 3, {{"HETCCL_TRANSPORT", "ucx-all"}}, {}},
                      Variant{"3_ranks_net_plugin_v9", 3,
                              {{"HETCCL_TRANSPORT", "net-plugin-all"}, {"HETCCL_NET_PLUGIN", HETCCL_TEST_NET_PLUGIN(9)}}, {}},
                      Variant{"4_ranks_two_domains_net_plugin_v10", 4,
                              {{"HETCCL_TRANSPORT", "net-plugin-all"}, {"HETCCL_NET_PLUGIN", HETCCL_TEST_NET_PLUGIN(10)},
                               {"HETCCL_NET_PLUGIN_SLOT_BYTES", "4096"}},
                              {"a", "b", "b", "a"}},
                      Variant{"4_ranks_two_domains_rdma_two_devices", 4,
                              {{"HETCCL_TRANSPORT", "rdma-all"}, {"HETCCL_IB_LIB", HETCCL_TEST_FAKE_IBVERBS},
                               {"FAKE_IBV_DEVICES", "2"}, {"HETCCL_NET_PLUGIN_SLOT_BYTES", "4096"}},
                              {"a", "b", "b", "a"}},
                      Variant{"4_ranks_two_domains_ucx", 4, {{"HETCCL_TRANSPORT", "ucx-all"}}, {"a", "b", "b", "a"}},
                      Variant{"4_ranks_two_domains", 4, {}, {"a", "b", "b", "a"}},
                      // The GPU ranks' host-staged path on host ranks. Not the stream hierarchy, which
                      // would take these layouts' all-reduce: its domain steps run synchronously on host
                      // ranks, so a send/recv beside it in a group could not start first as on GPUs.
                      Variant{"3_ranks_staged_like_gpu_ranks", 3,
                              {{"HETCCL_FORCE_STAGING", "1"}, {"HETCCL_STREAM_HIERARCHY", "0"}}, {"a", "b", "a"}}),
    [](const ::testing::TestParamInfo<Variant>& info) { return std::string(info.param.name); });

// Send/recv alone: a group that sends and receives large messages meets
// a peer's plain receive-then-send and send-then-receive. (Before
// receives were kept until their peer connected, the group's receive
// waited for the peer to connect while the peer waited for the group's
// send to progress: a timeout error.)
TEST(Groups, SendRecvGroupMeetsPlainCallsInEitherOrder) {
  const uint64_t seed = runSeed();
  EXPECT_RANKS_PASS(2, {{"HETCCL_TIMEOUT", "20"}}, 60, [seed](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const int peer = 1 - rank;
    for (int round = 0; round < 4; ++round) {
      const size_t count = messageCount(0) + static_cast<size_t>(round);
      std::vector<int64_t> out(count), in(count, -1);
      for (size_t i = 0; i < count; ++i) out[i] = payload(seed, rank, round, i);
      const bool grouped = rank == round % 2;
      if (grouped) {
        RANK_NCCL(ncclGroupStart());
        RANK_NCCL(ncclSend(out.data(), count, ncclInt64, peer, comm, nullptr));
        RANK_NCCL(ncclRecv(in.data(), count, ncclInt64, peer, comm, nullptr));
        RANK_NCCL(ncclGroupEnd());
      } else if (round < 2) {
        RANK_NCCL(ncclRecv(in.data(), count, ncclInt64, peer, comm, nullptr));
        RANK_NCCL(ncclSend(out.data(), count, ncclInt64, peer, comm, nullptr));
      } else {
        RANK_NCCL(ncclSend(out.data(), count, ncclInt64, peer, comm, nullptr));
        RANK_NCCL(ncclRecv(in.data(), count, ncclInt64, peer, comm, nullptr));
      }
      size_t wrong = 0;
      for (size_t i = 0; i < count; ++i) wrong += in[i] != payload(seed, peer, round, i);
      RANK_EXPECT(wrong == 0, "round %d: %zu of %zu elements wrong", round, wrong, count);
    }
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// A group's send/recv that fail end its collectives' wait (and the
// reverse) at once: rank 1 makes the mismatched call, then waits in a
// collective on another communicator, never touching the first again.
TEST(Groups, AFailureOnEitherSideEndsTheGroupAtOnce) {
  EXPECT_RANKS_PASS(2, {{"HETCCL_TIMEOUT", "60"}}, 100, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t base;
    RANK_NCCL(ncclCommInitRank(&base, n, id, rank));
    for (int variant = 0; variant < 2; ++variant) {
      ncclComm_t comm;
      RANK_NCCL(ncclCommSplit(base, 0, rank, &comm, nullptr));
      std::vector<float> a(1000, 1.0f), b(1000, 2.0f);
      if (rank == 0) {
        const auto t0 = std::chrono::steady_clock::now();
        RANK_NCCL(ncclGroupStart());
        RANK_NCCL(ncclAllReduce(a.data(), a.data(), 100, ncclFloat32, ncclSum, comm, nullptr));
        RANK_NCCL(ncclRecv(b.data(), 100, ncclFloat32, 1, comm, nullptr));
        const ncclResult_t r = ncclGroupEnd();
        const std::string text = ncclGetLastError(comm);
        RANK_EXPECT(r != ncclSuccess, "variant %d: the group succeeded", variant);
        RANK_EXPECT(secondsSince(t0) < 10, "variant %d: the error took %.1f s", variant, secondsSince(t0));
        if (variant == 0)
          RANK_EXPECT(text.find("send/recv") != std::string::npos, "variant 0: error text: %s", text.c_str());
      } else if (variant == 0) {
        // The receive is 100 floats: this send of 200 is refused there.
        RANK_NCCL(ncclSend(b.data(), 200, ncclFloat32, 0, comm, nullptr));
      } else {
        // The all-reduce is 100 floats there: this one of 200 fails both.
        ncclAllReduce(a.data(), a.data(), 200, ncclFloat32, ncclSum, comm, nullptr);
      }
      float token = 1.0f;  // both ranks here once rank 0 has its answer
      RANK_NCCL(ncclAllReduce(&token, &token, 1, ncclFloat32, ncclSum, base, nullptr));
      ncclCommAbort(comm);
    }
    RANK_NCCL(ncclCommDestroy(base));
    return 0;
  });
}

// A rank that dies while the others' groups wait for it, on both sides
// of the group (its all-reduce part and a receive from it, which it never
// connected for), and while a plain receive waits for it to connect: an
// error within about a second each (HETCCL_TIMEOUT is 60 s).
TEST(Groups, ADeadPeerEndsTheGroupWithAnError) {
  EXPECT_RANKS_PASS(3, {{"HETCCL_TIMEOUT", "60"}}, 100, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm, other;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    RANK_NCCL(ncclCommSplit(comm, 0, rank, &other, nullptr));
    std::vector<float> x(1 << 18, 1.0f), in(1 << 18);
    RANK_NCCL(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr));
    if (rank == 2) _exit(0);  // dies without a word
    const auto plain = std::chrono::steady_clock::now();
    const ncclResult_t alone = ncclRecv(in.data(), in.size(), ncclFloat32, 2, other, nullptr);
    RANK_EXPECT(alone == ncclRemoteError, "the receive returned %d: %s", alone, ncclGetLastError(other));
    RANK_EXPECT(secondsSince(plain) < 5, "the receive's error took %.1f s", secondsSince(plain));
    ncclCommAbort(other);
    const auto t0 = std::chrono::steady_clock::now();
    RANK_NCCL(ncclGroupStart());
    RANK_NCCL(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr));
    RANK_NCCL(ncclRecv(in.data(), in.size(), ncclFloat32, 2, comm, nullptr));
    const ncclResult_t r = ncclGroupEnd();
    RANK_EXPECT(r == ncclRemoteError, "the group returned %d: %s", r, ncclGetLastError(comm));
    RANK_EXPECT(secondsSince(t0) < 5, "the error took %.1f s", secondsSince(t0));
    ncclResult_t async = ncclSuccess;
    RANK_NCCL(ncclCommGetAsyncError(comm, &async));
    RANK_EXPECT(async != ncclSuccess, "no async error after the group failed");
    ncclCommAbort(comm);
    return 0;
  });
}

}  // namespace
