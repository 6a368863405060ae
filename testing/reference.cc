#include "reference.h"

#include <sys/random.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/types.h"
#include "kernels/formats.h"
#include "minifloat_oracle.h"
#include "uneven.h"

namespace hetccl::testing {

namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double unit(uint64_t h) { return static_cast<double>(h >> 11) / 9007199254740992.0; }  // [0,1)

double roundTo(ncclDataType_t t, double v) {
  switch (t) {
    case ncclFloat16: return static_cast<double>(static_cast<_Float16>(static_cast<float>(v)));
    case ncclFloat32: return static_cast<double>(static_cast<float>(v));
    case ncclBfloat16: return bf16ToFloat(floatToBf16(static_cast<float>(v)));
    case ncclFloat8e4m3: return oracleFp8E4M3ToFloat(oracleFloatToFp8E4M3(static_cast<float>(v)));
    case ncclFloat8e5m2: return oracleFp8E5M2ToFloat(oracleFloatToFp8E5M2(static_cast<float>(v)));
    default: return v;
  }
}

// Element i of a buffer of T, which need not be aligned to T (a test's
// buffers start anywhere).
template <typename T>
T at(const void* p, size_t i) {
  T v;
  memcpy(&v, static_cast<const char*>(p) + i * sizeof(T), sizeof(T));
  return v;
}
template <typename T>
void put(void* p, size_t i, T v) {
  memcpy(static_cast<char*>(p) + i * sizeof(T), &v, sizeof(T));
}

double load(ncclDataType_t t, const void* p, size_t i) {
  switch (t) {
    case ncclInt8: return at<int8_t>(p, i);
    case ncclUint8: return at<uint8_t>(p, i);
    case ncclInt32: return at<int32_t>(p, i);
    case ncclUint32: return at<uint32_t>(p, i);
    case ncclInt64: return static_cast<double>(at<int64_t>(p, i));
    case ncclUint64: return static_cast<double>(at<uint64_t>(p, i));
    case ncclFloat16: return static_cast<double>(at<_Float16>(p, i));
    case ncclFloat32: return at<float>(p, i);
    case ncclFloat64: return at<double>(p, i);
    case ncclBfloat16: return bf16ToFloat(at<uint16_t>(p, i));
    case ncclFloat8e4m3: return oracleFp8E4M3ToFloat(at<uint8_t>(p, i));
    case ncclFloat8e5m2: return oracleFp8E5M2ToFloat(at<uint8_t>(p, i));
    default: return 0;
  }
}

void store(ncclDataType_t t, void* p, size_t i, double v) {
  switch (t) {
    case ncclInt8: put(p, i, static_cast<int8_t>(static_cast<int64_t>(v))); break;
    case ncclUint8: put(p, i, static_cast<uint8_t>(static_cast<int64_t>(v))); break;
    case ncclInt32: put(p, i, static_cast<int32_t>(static_cast<int64_t>(v))); break;
    case ncclUint32: put(p, i, static_cast<uint32_t>(static_cast<int64_t>(v))); break;
    case ncclInt64: put(p, i, static_cast<int64_t>(v)); break;
    case ncclUint64: put(p, i, static_cast<uint64_t>(static_cast<int64_t>(v))); break;
    case ncclFloat16: put(p, i, static_cast<_Float16>(static_cast<float>(v))); break;
    case ncclFloat32: put(p, i, static_cast<float>(v)); break;
    case ncclFloat64: put(p, i, v); break;
    case ncclBfloat16: put(p, i, floatToBf16(static_cast<float>(v))); break;
    case ncclFloat8e4m3: put(p, i, oracleFloatToFp8E4M3(static_cast<float>(v))); break;
    case ncclFloat8e5m2: put(p, i, oracleFloatToFp8E5M2(static_cast<float>(v))); break;
    default: break;
  }
}

// Integer types reduce with wrap-around in their own width: compute in
// uint64 and truncate/sign-extend to the type.
int64_t wrapTo(ncclDataType_t t, uint64_t v) {
  switch (t) {
    case ncclInt8: return static_cast<int8_t>(v);
    case ncclUint8: return static_cast<uint8_t>(v);
    case ncclInt32: return static_cast<int32_t>(v);
    case ncclUint32: return static_cast<uint32_t>(v);
    default: return static_cast<int64_t>(v);
  }
}

struct Expected {
  double value;
  double tolerance;
};

// The reduced value of element i over all ranks.
Expected reduced(const Case& k, size_t i) {
  const int n = k.nranks;
  if (isIntegerType(k.type)) {
    uint64_t acc = 0;
    int64_t best = 0;
    for (int r = 0; r < n; ++r) {
      int64_t x = static_cast<int64_t>(inputValue(k, r, i));
      if (k.op == kPreMulSum) x = wrapTo(k.type, static_cast<uint64_t>(x) * static_cast<uint64_t>(static_cast<int64_t>(preMulScalar(k, r))));
      if (r == 0) {
        acc = static_cast<uint64_t>(x);
        best = x;
        continue;
      }
      switch (k.op) {
        case ncclProd: acc = static_cast<uint64_t>(wrapTo(k.type, acc * static_cast<uint64_t>(x))); break;
        case ncclMax: best = x > best ? x : best; break;
        case ncclMin: best = x < best ? x : best; break;
        default: acc = static_cast<uint64_t>(wrapTo(k.type, acc + static_cast<uint64_t>(x))); break;
      }
    }
    if (k.op == ncclMax || k.op == ncclMin) return {static_cast<double>(best), 0};
    int64_t v = wrapTo(k.type, acc);
    if (k.op == ncclAvg) {
      if (k.type == ncclUint64) return {static_cast<double>(static_cast<uint64_t>(v) / static_cast<uint64_t>(n)), 0};
      v = v / n;
    }
    return {static_cast<double>(v), 0};
  }
  double acc = 0, mag = 0;
  for (int r = 0; r < n; ++r) {
    double x = inputValue(k, r, i);
    if (k.op == kPreMulSum) x = roundTo(k.type, x * preMulScalar(k, r));
    if (r == 0) {
      acc = x;
    } else {
      switch (k.op) {
        case ncclProd: acc *= x; break;
        case ncclMax: acc = std::fmax(acc, x); break;
        case ncclMin: acc = std::fmin(acc, x); break;
        default: acc += x; break;
      }
    }
    mag += std::fabs(x);
  }
  if (k.op == ncclMax || k.op == ncclMin) return {acc, 0};
  const double eps = typeEpsilon(k.type);
  // Each rounding can also lose up to one subnormal step (absolute): NCCL's
  // avg scales every input by 1/n before summing, which in fp8 rounds
  // small values differently from dividing the sum.
  const double step = n * typeSubnormalStep(k.type);
  if (k.op == ncclProd) return {acc, 2.0 * n * eps * std::fabs(acc) + 1e-300};
  if (k.op == ncclAvg) return {acc / n, (n + 1) * eps * mag / n + eps * std::fabs(acc / n) + step};
  return {acc, n * eps * mag + step};
}

}  // namespace

const char* collectiveName(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "all_reduce";
    case Collective::Broadcast: return "broadcast";
    case Collective::Reduce: return "reduce";
    case Collective::AllGather: return "all_gather";
    case Collective::ReduceScatter: return "reduce_scatter";
    case Collective::AlltoAll: return "alltoall";
    case Collective::Gather: return "gather";
    case Collective::Scatter: return "scatter";
    case Collective::SendRecv: return "sendrecv";
    case Collective::AllGatherV: return "all_gather_v";
    case Collective::AlltoAllv: return "alltoallv";
  }
  return "?";
}

bool parseCollective(const std::string& name, Collective* out) {
  for (int i = 0; i < kNumCollectives; ++i) {
    auto c = static_cast<Collective>(i);
    if (name == collectiveName(c)) {
      *out = c;
      return true;
    }
  }
  return false;
}

bool collectiveReduces(Collective c) {
  return c == Collective::AllReduce || c == Collective::Reduce || c == Collective::ReduceScatter;
}
bool collectiveRooted(Collective c) {
  return c == Collective::Broadcast || c == Collective::Reduce || c == Collective::Gather || c == Collective::Scatter;
}

size_t typeBytes(ncclDataType_t t) { return typeSize(t); }
const char* typeLabel(ncclDataType_t t) { return typeName(t); }

bool parseType(const std::string& name, ncclDataType_t* out) {
  for (int i = 0; i < ncclNumTypes; ++i) {
    if (name == typeLabel(static_cast<ncclDataType_t>(i))) {
      *out = static_cast<ncclDataType_t>(i);
      return true;
    }
  }
  if (name == "float16" || name == "fp16") { *out = ncclFloat16; return true; }
  if (name == "float32") { *out = ncclFloat32; return true; }
  if (name == "float64") { *out = ncclFloat64; return true; }
  if (name == "bf16") { *out = ncclBfloat16; return true; }
  return false;
}

bool parseOp(const std::string& name, int* out) {
  if (name == "sum") *out = ncclSum;
  else if (name == "prod") *out = ncclProd;
  else if (name == "max") *out = ncclMax;
  else if (name == "min") *out = ncclMin;
  else if (name == "avg") *out = ncclAvg;
  else if (name == "mulsum" || name == "premulsum") *out = kPreMulSum;
  else return false;
  return true;
}

const char* opLabel(int op) { return op == kPreMulSum ? "mulsum" : opName(static_cast<ncclRedOp_t>(op)); }

bool isIntegerType(ncclDataType_t t) { return t <= ncclUint64; }

size_t sendElements(Collective c, size_t count, int n) {
  switch (c) {
    case Collective::ReduceScatter: case Collective::AlltoAll: case Collective::Scatter: return count * n;
    case Collective::AlltoAllv: return (count + 1) * n;  // blocks of at most count, a gap after each
    default: return count;
  }
}

size_t recvElements(Collective c, size_t count, int n) {
  switch (c) {
    case Collective::AllGather: case Collective::AlltoAll: case Collective::Gather: return count * n;
    case Collective::AllGatherV: case Collective::AlltoAllv: return (count + 1) * n;
    default: return count;
  }
}

double typeEpsilon(ncclDataType_t t) {
  switch (t) {
    case ncclFloat16: return std::ldexp(1.0, -10);
    case ncclBfloat16: return std::ldexp(1.0, -7);
    case ncclFloat8e4m3: return std::ldexp(1.0, -3);
    case ncclFloat8e5m2: return std::ldexp(1.0, -2);
    case ncclFloat32: return std::ldexp(1.0, -22);
    case ncclFloat64: return std::ldexp(1.0, -50);
    default: return 0;
  }
}

double typeSubnormalStep(ncclDataType_t t) {
  switch (t) {
    case ncclFloat16: return std::ldexp(1.0, -24);
    case ncclBfloat16: return std::ldexp(1.0, -133);
    case ncclFloat8e4m3: return std::ldexp(1.0, -9);
    case ncclFloat8e5m2: return std::ldexp(1.0, -16);
    case ncclFloat32: return std::ldexp(1.0, -149);
    case ncclFloat64: return std::ldexp(1.0, -1074);
    default: return 0;
  }
}

double inputValue(const Case& k, int rank, size_t i) {
  const uint64_t h = splitmix(k.seed ^ splitmix(static_cast<uint64_t>(rank) * 0x100000001b3ull + i));
  const double u = unit(h);
  if (isIntegerType(k.type)) {
    if (k.op == ncclProd || k.op == kPreMulSum) return static_cast<double>(1 + (h >> 60) % 3);  // 1..3
    const bool isSigned = k.type == ncclInt8 || k.type == ncclInt32 || k.type == ncclInt64;
    const int64_t range = typeBytes(k.type) == 1 ? 100 : 1000000;
    int64_t v = static_cast<int64_t>((h >> 8) % static_cast<uint64_t>(range));
    return static_cast<double>(isSigned ? v - range / 2 : v);
  }
  double v;
  if (k.op == ncclProd) v = 0.5 + 1.5 * u;           // products stay in range
  else v = (u - 0.5) * 16.0;                          // [-8, 8)
  return roundTo(k.type, v);
}

double preMulScalar(const Case& k, int rank) {
  if (isIntegerType(k.type)) return static_cast<double>(rank % 3 + 1);
  return roundTo(k.type, 0.5 + 0.25 * (rank % 4));
}

void writeScalar(ncclDataType_t t, double v, void* out) { store(t, out, 0, v); }
double readScalar(ncclDataType_t t, const void* buffer, size_t i) { return load(t, buffer, i); }

void fillInput(const Case& k, int rank, void* buffer) {
  // (an uneven all-gather's input is its block alone: in place, the rest is others' blocks and gaps)
  const size_t n = k.coll == Collective::AllGatherV ? unevenLayout(k, rank).sendCounts[0]
                                                    : sendElements(k.coll, k.count, k.nranks);
  for (size_t i = 0; i < n; ++i) store(k.type, buffer, i, inputValue(k, rank, i));
}

void poison(ncclDataType_t t, void* buffer, size_t elements) {
  memset(buffer, 0x7b, elements * typeBytes(t));
}

size_t countWrong(const Case& k, int rank, const void* out, std::string* firstError) {
  const int n = k.nranks;
  const size_t count = k.count;
  size_t wrong = 0;
  auto check = [&](size_t outIndex, double expect, double tol) {
    double got = load(k.type, out, outIndex);
    bool ok = std::isnan(expect) ? std::isnan(got) : std::fabs(got - expect) <= tol;
    if (!ok) {
      if (!wrong && firstError) {
        char buf[256];
        snprintf(buf, sizeof(buf), "%s %s %s n=%d count=%zu rank %d: element %zu is %.17g, expected %.17g (tol %.3g)",
                 collectiveName(k.coll), typeLabel(k.type), opLabel(k.op), n, count, rank, outIndex, got, expect, tol);
        *firstError = buf;
      }
      ++wrong;
    }
  };
  switch (k.coll) {
    case Collective::AllReduce:
      for (size_t i = 0; i < count; ++i) { auto e = reduced(k, i); check(i, e.value, e.tolerance); }
      break;
    case Collective::Reduce:
      if (rank == k.root)
        for (size_t i = 0; i < count; ++i) { auto e = reduced(k, i); check(i, e.value, e.tolerance); }
      break;
    case Collective::ReduceScatter:
      for (size_t i = 0; i < count; ++i) { auto e = reduced(k, rank * count + i); check(i, e.value, e.tolerance); }
      break;
    case Collective::Broadcast:
      for (size_t i = 0; i < count; ++i) check(i, inputValue(k, k.root, i), 0);
      break;
    case Collective::AllGather:
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) check(r * count + i, inputValue(k, r, i), 0);
      break;
    case Collective::Gather:
      if (rank == k.root)
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) check(r * count + i, inputValue(k, r, i), 0);
      break;
    case Collective::Scatter:
      for (size_t i = 0; i < count; ++i) check(i, inputValue(k, k.root, rank * count + i), 0);
      break;
    case Collective::AlltoAll:
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) check(r * count + i, inputValue(k, r, rank * count + i), 0);
      break;
    case Collective::SendRecv: {
      // Each rank sends to rank+shift and receives from rank-shift.
      const int from = ((rank - k.shift) % n + n) % n;
      for (size_t i = 0; i < count; ++i) check(i, inputValue(k, from, i), 0);
      break;
    }
    case Collective::AllGatherV: case Collective::AlltoAllv: {
      // Every block from its sender's input; the gaps still poison.
      const UnevenLayout mine = unevenLayout(k, rank);
      std::vector<bool> block(unevenRecvSpan(k, rank), false);
      for (int p = 0; p < n; ++p) {
        const size_t from = k.coll == Collective::AllGatherV ? 0 : unevenLayout(k, p).sendDispls[rank];
        for (size_t i = 0; i < mine.recvCounts[p]; ++i) {
          check(mine.recvDispls[p] + i, inputValue(k, p, from + i), 0);
          block[mine.recvDispls[p] + i] = true;
        }
      }
      unsigned char poisoned[8];
      poison(k.type, poisoned, 1);
      const double untouched = load(k.type, poisoned, 0);
      for (size_t i = 0; i < block.size(); ++i)
        if (!block[i]) check(i, untouched, 0);
      break;
    }
  }
  return wrong;
}

uint64_t runSeed() {
  if (const char* s = getenv("HETCCL_TEST_SEED")) return strtoull(s, nullptr, 0);
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != sizeof(v)) v = 12345;
  return v;
}

}  // namespace hetccl::testing
