// Deterministic inputs and exact (integers) or float64 (floating types)
// references for every collective, shared by the tests and hetccl-perf.
// Every rank can compute every other rank's input, so each rank checks
// its own output without any extra communication.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"

namespace hetccl::testing {

// The last two are the uneven collectives (hetcclAllGatherV, ncclAllToAllv:
// testing/uneven.h).
enum class Collective {
  AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter, SendRecv, AllGatherV, AlltoAllv
};
constexpr int kNumCollectives = static_cast<int>(Collective::AlltoAllv) + 1;

const char* collectiveName(Collective c);
bool parseCollective(const std::string& name, Collective* out);
bool collectiveReduces(Collective c);
bool collectiveRooted(Collective c);
size_t typeBytes(ncclDataType_t t);
const char* typeLabel(ncclDataType_t t);
bool parseType(const std::string& name, ncclDataType_t* out);
bool parseOp(const std::string& name, int* out);  // ncclRedOp_t, or kPreMulSum
const char* opLabel(int op);
bool isIntegerType(ncclDataType_t t);

constexpr int kPreMulSum = 100;  // test-side name for "a PreMulSum op"

// Element counts of each rank's send and receive buffers for `count`
// (NCCL's per-collective count argument; the uneven collectives: the most
// any rank's layout spans).
size_t sendElements(Collective c, size_t count, int nranks);
size_t recvElements(Collective c, size_t count, int nranks);

struct Case {
  Collective coll = Collective::AllReduce;
  ncclDataType_t type = ncclFloat32;
  int op = ncclSum;  // ncclRedOp_t or kPreMulSum
  int root = 0;
  int shift = 1;  // SendRecv: each rank sends to rank+shift, receives from rank-shift
  size_t count = 0;
  int nranks = 1;
  uint64_t seed = 1;
};

// Rank r's input element i, already representable in the type.
double inputValue(const Case& k, int rank, size_t i);
// The PreMulSum scalar rank r uses (representable in the type).
double preMulScalar(const Case& k, int rank);
void writeScalar(ncclDataType_t t, double v, void* out);
// Element i of a buffer of type t, as a double.
double readScalar(ncclDataType_t t, const void* buffer, size_t i);

void fillInput(const Case& k, int rank, void* buffer);
// Fills with a value that no correct result has at that place.
void poison(ncclDataType_t t, void* buffer, size_t elements);

// Counts elements of `rank`'s receive buffer that differ from the reference
// beyond the type's tolerance. Elements outside the rank's output (e.g. the
// receive buffer of a non-root for reduce) are not checked.
size_t countWrong(const Case& k, int rank, const void* recvBuffer, std::string* firstError = nullptr);

// Tolerance used for floating types: relative to the sum of magnitudes of
// the contributions, n * eps(type) (see docs/numerics.md).
double typeEpsilon(ncclDataType_t t);
// The gap between adjacent subnormals of a floating type (0 for integers).
double typeSubnormalStep(ncclDataType_t t);

// Random seed for a test run: HETCCL_TEST_SEED if set, else fresh.
uint64_t runSeed();

}  // namespace hetccl::testing
