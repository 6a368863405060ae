// Every collective x type x op x in/out-of-place x count (0, 1, odd, large)
// on N local host ranks, against float64/exact references on fresh random
// data (the seed is printed; HETCCL_TEST_SEED repeats a run).
#include <cstring>
#include <vector>

#include "matrix.h"

using namespace hetccl::testing;

namespace {

// Variants of the transport under the same algorithms move the same bytes
// with the same arithmetic: they run one type of each width and two ops
// (mp::Scope::EachWidth; tiny slots and chunks: every op too); the
// variants of the rank count run everything (but 8 ranks).
struct Variant {
  const char* name;
  int nranks;
  mp::Env env;
  size_t large;
  mp::Scope scope = mp::Scope::Everything;
};

void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

class Collectives : public ::testing::TestWithParam<Variant> {};

TEST_P(Collectives, EveryCollectiveTypeOpCountAndPlacement) {
  const Variant& v = GetParam();
  const uint64_t seed = runSeed();
  fprintf(stderr, "seed %llu (HETCCL_TEST_SEED)\n", static_cast<unsigned long long>(seed));
  EXPECT_RANKS_PASS(v.nranks, v.env, 500, [&](int rank, int n, const ncclUniqueId& id) {
    return mp::runMatrix(rank, n, id, seed, v.large, nullptr, nullptr, nullptr, v.scope);
  });
}

// UCX carries a pair's messages only when both ranks ask for it: here
// ranks 0 and 2 ask for it between every pair (ucx-all), rank 3 between
// hosts only (so not here) and rank 1 not at all: UCX and shared-memory
// pairs run side by side.
TEST(CollectivesMixedTransports, UcxOnSomeRanks) {
  const uint64_t seed = runSeed();
  fprintf(stderr, "seed %llu (HETCCL_TEST_SEED)\n", static_cast<unsigned long long>(seed));
  auto envFor = [](int rank) {
    if (rank == 1) return mp::Env{};
    return mp::Env{{"HETCCL_TRANSPORT", rank == 3 ? "ucx" : "ucx-all"}};
  };
  EXPECT_RANKS_PASS_EACH(4, envFor, 500, [&](int rank, int n, const ncclUniqueId& id) {
    return mp::runMatrix(rank, n, id, seed, 4099);
  });
}

// The same with the net plugin: ranks 0 and 2 ask for it between every
// pair, each loading another ABI version of the one plugin (v8, v11),
// rank 3 between hosts only, rank 1 not at all.
TEST(CollectivesMixedTransports, NetPluginOnSomeRanks) {
  const uint64_t seed = runSeed();
  fprintf(stderr, "seed %llu (HETCCL_TEST_SEED)\n", static_cast<unsigned long long>(seed));
  auto envFor = [](int rank) {
    if (rank == 1) return mp::Env{};
    return mp::Env{{"HETCCL_TRANSPORT", rank == 3 ? "net-plugin" : "net-plugin-all"},
                   {"HETCCL_NET_PLUGIN", rank == 2 ? HETCCL_TEST_NET_PLUGIN(11) : HETCCL_TEST_NET_PLUGIN(8)}};
  };
  EXPECT_RANKS_PASS_EACH(4, envFor, 500, [&](int rank, int n, const ncclUniqueId& id) {
    return mp::runMatrix(rank, n, id, seed, 4099);
  });
}

// Two hosts of two ranks each (HETCCL_HOSTID makes one machine act as
// two), with `rdma` (between hosts only): shared memory inside a host,
// the RDMA network (the stand-in libibverbs) between them, side by side.
TEST(CollectivesMixedTransports, RdmaBetweenHostsSharedMemoryWithin) {
  const uint64_t seed = runSeed();
  fprintf(stderr, "seed %llu (HETCCL_TEST_SEED)\n", static_cast<unsigned long long>(seed));
  auto envFor = [](int rank) {
    return mp::Env{{"HETCCL_TRANSPORT", "rdma"}, {"HETCCL_IB_LIB", HETCCL_TEST_FAKE_IBVERBS},
                   {"HETCCL_HOSTID", rank < 2 ? "host-a" : "host-b"}};
  };
  EXPECT_RANKS_PASS_EACH(4, envFor, 500, [&](int rank, int n, const ncclUniqueId& id) {
    const char* expected[] = {"0:self 1:shm 2:rdma 3:rdma", "0:shm 1:self 2:rdma 3:rdma", "0:rdma 1:rdma 2:self 3:shm",
                              "0:rdma 1:rdma 2:shm 3:self"};
    return mp::runMatrix(rank, n, id, seed, 4099, nullptr, expected[rank]);
  });
}

// Three hosts over RDMA, each rank with its own queue-pair settings: a
// connection takes its sender's (4 QPs with each message split over them
// and adaptive routing, 2 in turn, 1), so every pair mixes two of them.
TEST(CollectivesMixedTransports, RdmaConnectionsTakeTheirSendersQueuePairSettings) {
  const uint64_t seed = runSeed();
  fprintf(stderr, "seed %llu (HETCCL_TEST_SEED)\n", static_cast<unsigned long long>(seed));
  auto envFor = [](int rank) {
    mp::Env env{{"HETCCL_TRANSPORT", "rdma"}, {"HETCCL_IB_LIB", HETCCL_TEST_FAKE_IBVERBS},
                {"HETCCL_HOSTID", "host-" + std::to_string(rank)}};
    if (rank == 0)
      env.insert(env.end(), {{"NCCL_IB_QPS_PER_CONNECTION", "4"}, {"NCCL_IB_SPLIT_DATA_ON_QPS", "1"},
                             {"NCCL_IB_ADAPTIVE_ROUTING", "1"}});
    if (rank == 1) env.push_back({"NCCL_IB_QPS_PER_CONNECTION", "2"});
    return env;
  };
  EXPECT_RANKS_PASS_EACH(3, envFor, 500, [&](int rank, int n, const ncclUniqueId& id) {
    const char* expected[] = {"0:self 1:rdma 2:rdma", "0:rdma 1:self 2:rdma", "0:rdma 1:rdma 2:self"};
    return mp::runMatrix(rank, n, id, seed, 70001, nullptr, expected[rank], nullptr, mp::Scope::EachWidth);
  });
}

constexpr mp::Scope kWidths = mp::Scope::EachWidth;

// "large" crosses the small-message threshold (64 KiB) for every type, so
// both all-reduce algorithms, multi-slot and rendezvous transfers run.
INSTANTIATE_TEST_SUITE_P(
    HostRanks, Collectives,
    ::testing::Values(Variant{"1_rank", 1, {}, 70001}, Variant{"2_ranks", 2, {}, 70001}, Variant{"3_ranks", 3, {}, 70001},
                      // 8 ranks (four per core here): the algorithms' bytes on one type per width;
                      // 3, 4 and 5 ranks check every type and op with more ranks than cores.
                      Variant{"4_ranks", 4, {}, 70001}, Variant{"8_ranks", 8, {}, 70001, kWidths},
                      Variant{"4_ranks_sockets", 4, {{"HETCCL_TRANSPORT", "socket"}}, 70001, kWidths},
                      Variant{"3_ranks_ucx", 3, {{"HETCCL_TRANSPORT", "ucx-all"}}, 70001, kWidths},
                      Variant{"3_ranks_ucx_tcp", 3, {{"HETCCL_TRANSPORT", "ucx-all"}, {"UCX_TLS", "tcp"}}, 70001, kWidths},
                      Variant{"3_ranks_net_plugin_v8", 3,
                              {{"HETCCL_TRANSPORT", "net-plugin-all"}, {"HETCCL_NET_PLUGIN", HETCCL_TEST_NET_PLUGIN(8)}},
                              70001, kWidths},
                      // Version 11, with slots capped by the plugin's maxP2pBytes and a
                      // plugin that takes two requests at a time.
                      Variant{"3_ranks_net_plugin_v11_tight", 3,
                              {{"HETCCL_TRANSPORT", "net-plugin-all"}, {"HETCCL_NET_PLUGIN", HETCCL_TEST_NET_PLUGIN(11)},
                               {"TEST_NET_MAX_P2P_BYTES", "5000"}, {"TEST_NET_MAX_REQUESTS", "2"}},
                              70001, kWidths},
                      // Two NICs: the local ranks spread over them.
                      Variant{"4_ranks_net_plugin_v10_two_devices", 4,
                              {{"HETCCL_TRANSPORT", "net-plugin-all"}, {"HETCCL_NET_PLUGIN", HETCCL_TEST_NET_PLUGIN(10)},
                               {"TEST_NET_DEVICES", "2"}},
                              4099, kWidths},
                      // hetccl's RDMA network over the stand-in verbs library.
                      Variant{"3_ranks_rdma", 3,
                              {{"HETCCL_TRANSPORT", "rdma-all"}, {"HETCCL_IB_LIB", HETCCL_TEST_FAKE_IBVERBS}}, 70001, kWidths},
                      Variant{"3_ranks_shm_copy_only", 3, {{"HETCCL_CMA", "0"}}, 70001, kWidths},
                      Variant{"5_ranks_tiny_slots_and_chunks", 5,
                              {{"HETCCL_SHM_SLOT_BYTES", "4096"}, {"HETCCL_SHM_SLOTS", "2"}, {"HETCCL_CHUNK_BYTES", "8192"}},
                              70001, mp::Scope::EachWidthEveryOp}),
    [](const ::testing::TestParamInfo<Variant>& info) { return std::string(info.param.name); });

}  // namespace
