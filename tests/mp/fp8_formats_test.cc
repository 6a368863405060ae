// fp8 collectives among ranks whose fp8 means different things: OCP's
// formats (NVIDIA, CPUs) on some ranks, AMD MI300's FNUZ on others
// (HETCCL_FP8_FORMAT=fnuz makes a CPU rank one). Every rank's input is in
// its own format; every output must be the true value re-encoded in the
// receiver's format (src/route/fp8_bridge.h), checked byte for byte against
// an independent model of the formats (testing/minifloat_oracle.h), for
// every collective, both fp8 types, every op, zero/one/odd/larger counts,
// in and out of place, in one and in several domains.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "hetccl.h"
#include "fp8_model.h"
#include "mp_util.h"

namespace {

using namespace fp8model;

struct Layout {
  const char* name;
  std::vector<std::string> domains;  // per rank; empty: one host domain
  std::vector<int> fnuz;             // per rank: 1 if its fp8 is FNUZ
  mp::Env extra;
};

void PrintTo(const Layout& l, std::ostream* os) { *os << l.name; }

int runAll(const Layout& l, int rank, int n, const ncclUniqueId& id, uint64_t seed) {
  ncclComm_t comm;
  RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
  Fp8Ranks ranks(l.fnuz, rank, seed);
  forEachCall(n, 70001, [&](const Call& c) {
    std::string what;
    const size_t wrong = runAndCheck(comm, ranks, c, rank, n, &what);
    RANK_EXPECT(wrong == 0, "rank %d (%s): %zu wrong: %s", rank, l.fnuz[rank] ? "fnuz" : "ocp", wrong, what.c_str());
  });
  uint64_t salt = 1000000;
  // A group mixing fp8 calls with a float one: each converted in its place.
  std::vector<uint8_t> a(257), b(257 * n);
  std::vector<float> f(33, 1.0f);
  const Call sum{Collective::AllReduce, ncclFloat8e4m3, ncclSum, a.size(), 0, false, ++salt};
  const Call gather{Collective::AllGather, ncclFloat8e5m2, ncclSum, a.size(), 0, false, ++salt};
  std::vector<std::vector<uint8_t>> sumIn(n), gatherIn(n);
  for (int q = 0; q < n; ++q) sumIn[q] = ranks.input(sum, q), gatherIn[q] = ranks.input(gather, q);
  std::vector<uint8_t> sumOut(a.size());
  ncclGroupStart();
  ncclAllReduce(sumIn[rank].data(), sumOut.data(), a.size(), ncclFloat8e4m3, ncclSum, comm, nullptr);
  ncclAllReduce(f.data(), f.data(), f.size(), ncclFloat32, ncclSum, comm, nullptr);
  ncclAllGather(gatherIn[rank].data(), b.data(), a.size(), ncclFloat8e5m2, comm, nullptr);
  RANK_NCCL(ncclGroupEnd());
  size_t wrong = 0;
  for (size_t j = 0; j < a.size(); ++j) wrong += sumOut[j] != ranks.expected(sum, sumIn, j);
  for (size_t j = 0; j < b.size(); ++j) wrong += b[j] != ranks.expected(gather, gatherIn, j);
  RANK_EXPECT(wrong == 0 && f[32] == static_cast<float>(n), "grouped: %zu wrong, float sum %g", wrong, f[32]);
  RANK_NCCL(ncclCommDestroy(comm));
  return 0;
}

class Fp8Formats : public ::testing::TestWithParam<Layout> {};

TEST_P(Fp8Formats, EveryCollectiveConvertsBetweenFormats) {
  const Layout& l = GetParam();
  const uint64_t seed = runSeed();
  fprintf(stderr, "seed %llu (HETCCL_TEST_SEED)\n", static_cast<unsigned long long>(seed));
  auto env = [&l](int rank) {
    mp::Env e = l.extra;
    e.push_back({"HETCCL_FP8_FORMAT", l.fnuz[rank] ? "fnuz" : "ocp"});
    if (!l.domains.empty()) e.push_back({"HETCCL_DOMAIN", l.domains[rank]});
    return e;
  };
  EXPECT_RANKS_PASS_EACH(static_cast<int>(l.fnuz.size()), env, 300,
                         [&](int rank, int n, const ncclUniqueId& id) { return runAll(l, rank, n, id, seed); });
}

INSTANTIATE_TEST_SUITE_P(
    HostRanks, Fp8Formats,
    ::testing::Values(Layout{"ocp_and_fnuz_in_one_domain", {}, {0, 1, 1, 0}},
                      Layout{"ocp_domain_and_fnuz_domain", {"a", "a", "b", "b"}, {0, 0, 1, 1}},
                      Layout{"three_domains_interleaved", {"a", "b", "c", "a", "b"}, {0, 1, 0, 0, 1}},
                      // Every rank FNUZ: reductions convert, moves copy the bytes.
                      Layout{"all_fnuz_two_domains", {"a", "b", "a"}, {1, 1, 1}},
                      // The GPU ranks' path (buffers staged through host memory), on host ranks.
                      Layout{"staged_like_gpu_ranks", {"a", "b", "b"}, {1, 0, 0}, {{"HETCCL_FORCE_STAGING", "1"}}}),
    [](const ::testing::TestParamInfo<Layout>& info) { return std::string(info.param.name); });

// OCP everywhere: fp8 is not converted at all (no scratch, bytes as they are).
TEST(Fp8Formats, OcpEverywhereMovesBytesAsTheyAre) {
  auto env = [](int rank) { return mp::Env{{"HETCCL_DOMAIN", rank % 2 ? "b" : "a"}}; };
  EXPECT_RANKS_PASS_EACH(2, env, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<uint8_t> in(256), out(512);
    for (int b = 0; b < 256; ++b) in[b] = static_cast<uint8_t>(b);  // NaNs and -0 included
    RANK_NCCL(ncclAllGather(in.data(), out.data(), in.size(), ncclFloat8e4m3, comm, nullptr));
    for (int j = 0; j < 512; ++j) RANK_EXPECT(out[j] == static_cast<uint8_t>(j % 256), "byte %d is %d", j, out[j]);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

}  // namespace
