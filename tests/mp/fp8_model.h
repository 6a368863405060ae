// A model of fp8 collectives among ranks whose fp8 formats differ (OCP,
// FNUZ): every rank's input in its own format, every output the true value
// re-encoded in the receiver's format where the sender's differs
// (src/route/fp8_bridge.h), checked
// byte for byte against an independent model of the formats
// (testing/minifloat_oracle.h). Shared by the CPU-rank tests
// (fp8_formats_test.cc) and the GPU ones (tests/gpu/gpu_comm_test.cc).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "minifloat_oracle.h"
#include "nccl.h"
#include "reference.h"

namespace fp8model {

using namespace hetccl::testing;

inline double decode(ncclDataType_t t, bool fnuz, uint8_t b) {
  if (t == ncclFloat8e4m3) return fnuz ? oracleFp8E4M3FnuzToFloat(b) : oracleFp8E4M3ToFloat(b);
  return fnuz ? oracleFp8E5M2FnuzToFloat(b) : oracleFp8E5M2ToFloat(b);
}

inline uint8_t encode(ncclDataType_t t, bool fnuz, double v) {
  const float f = static_cast<float>(v);
  if (t == ncclFloat8e4m3) return fnuz ? oracleFloatToFp8E4M3Fnuz(f) : oracleFloatToFp8E4M3(f);
  return fnuz ? oracleFloatToFp8E5M2Fnuz(f) : oracleFloatToFp8E5M2(f);
}

struct Call {
  Collective coll;
  ncclDataType_t type;
  int op;  // ncclRedOp_t, or kPreMulSum
  size_t count;
  int root;
  bool inPlace;
  uint64_t salt;
};

class Fp8Ranks {
 public:
  Fp8Ranks(std::vector<int> fnuz, int rank, uint64_t seed)
      : fnuz_(std::move(fnuz)), me_(rank), n_(static_cast<int>(fnuz_.size())), seed_(seed) {}

  // Rank q's input. Reductions get values exact in every fp8 format and
  // whose float sums and products are exact (so the reference rounds once,
  // as the library does); moves get any byte of q's format but NaN.
  std::vector<uint8_t> input(const Call& c, int q) const {
    std::mt19937_64 rng(seed_ ^ (c.salt * 0x9e3779b97f4a7c15ull) ^ (static_cast<uint64_t>(q) << 56));
    const size_t len = sendElements(c.coll, c.count, n_);
    std::vector<uint8_t> v(len);
    const bool fnuz = fnuz_[q];
    for (auto& b : v) {
      if (collectiveReduces(c.coll)) {
        const int mantBits = c.type == ncclFloat8e4m3 ? 3 : 2;
        const int spread = c.op == ncclProd ? 2 : 4;
        const double mant = 1.0 + static_cast<double>(rng() % (1u << mantBits)) / (1 << mantBits);
        const double value = (rng() % 2 ? -1 : 1) * std::ldexp(mant, static_cast<int>(rng() % (2 * spread + 1)) - spread);
        b = encode(c.type, fnuz, rng() % 16 == 0 ? 0.0 : value);
      } else {
        do b = static_cast<uint8_t>(rng()); while (std::isnan(decode(c.type, fnuz, b)));
      }
    }
    return v;
  }
  uint8_t scalarByte(const Call& c, int q) const { return encode(c.type, fnuz_[q], std::ldexp(1.0, q % 3 - 1)); }

  // The value rank me must hold at output element j (nullopt-free: callers
  // ask only where the rank has output).
  uint8_t expected(const Call& c, const std::vector<std::vector<uint8_t>>& in, size_t j) const {
    const size_t k = c.count;
    auto moved = [&](int q, size_t at) {  // bytes between ranks of one format stay as they are
      return fnuz_[q] == fnuz_[me_] ? in[q][at] : encode(c.type, fnuz_[me_], decode(c.type, fnuz_[q], in[q][at]));
    };
    switch (c.coll) {
      case Collective::AllReduce:
      case Collective::Reduce: return reduced(c, in, j);
      case Collective::ReduceScatter: return reduced(c, in, static_cast<size_t>(me_) * k + j);
      case Collective::Broadcast: return moved(c.root, j);
      case Collective::AllGather:
      case Collective::Gather: return moved(static_cast<int>(j / k), j % k);
      case Collective::AlltoAll: return moved(static_cast<int>(j / k), static_cast<size_t>(me_) * k + j % k);
      case Collective::Scatter: return moved(c.root, static_cast<size_t>(me_) * k + j);
      case Collective::SendRecv: return moved((me_ - 1 + n_) % n_, j);
      case Collective::AllGatherV: case Collective::AlltoAllv: break;  // not modelled: grouped send/recv, as SendRecv
    }
    return 0;
  }

 private:
  uint8_t reduced(const Call& c, const std::vector<std::vector<uint8_t>>& in, size_t at) const {
    double acc = 0;
    for (int q = 0; q < n_; ++q) {
      double v = decode(c.type, fnuz_[q], in[q][at]);
      if (c.op == kPreMulSum) v *= decode(c.type, fnuz_[q], scalarByte(c, q));
      if (q == 0) acc = v;
      else if (c.op == ncclProd) acc *= v;
      else if (c.op == ncclMax) acc = std::max(acc, v);
      else if (c.op == ncclMin) acc = std::min(acc, v);
      else acc += v;
    }
    if (c.op == ncclAvg) acc = static_cast<double>(static_cast<float>(acc) / static_cast<float>(n_));
    return encode(c.type, fnuz_[me_], acc);
  }

  std::vector<int> fnuz_;
  int me_, n_;
  uint64_t seed_;
};

// GPU ranks: the calls take device copies of the buffers (made by upload,
// read back by download after the stream is done).
struct DeviceMirror {
  std::function<uint8_t*(const std::vector<uint8_t>&)> upload;
  std::function<bool(std::vector<uint8_t>*, const uint8_t*)> download;  // frees the device copy
  cudaStream_t stream = nullptr;
};

// Runs one call on this rank and checks its output; returns the wrong count.
inline size_t runAndCheck(ncclComm_t comm, const Fp8Ranks& ranks, const Call& c, int rank, int n, std::string* what,
                          const DeviceMirror* device = nullptr) {
  std::vector<std::vector<uint8_t>> in(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) in[q] = ranks.input(c, q);
  const size_t k = c.count, sendLen = sendElements(c.coll, k, n), recvLen = recvElements(c.coll, k, n);
  std::vector<uint8_t> send(std::max(sendLen, recvLen) + 1, 0x5a), recv(recvLen + 1, 0x5a);
  // In place, the input sits where NCCL expects it inside the output buffer.
  const bool inputInsideOutput = c.coll == Collective::AllGather || c.coll == Collective::Gather;
  std::copy(in[rank].begin(), in[rank].end(), send.begin() + (c.inPlace && inputInsideOutput ? rank * k : 0));
  uint8_t* s = device ? device->upload(send) : send.data();
  uint8_t* rb = device ? device->upload(recv) : recv.data();
  uint8_t* r = c.inPlace ? s : rb;
  cudaStream_t stream = device ? device->stream : nullptr;
  ncclRedOp_t op = static_cast<ncclRedOp_t>(c.op);
  if (c.op == kPreMulSum) {
    uint8_t scalar = ranks.scalarByte(c, rank);
    if (ncclRedOpCreatePreMulSum(&op, &scalar, c.type, ncclScalarHostImmediate, comm) != ncclSuccess) return 1;
  }
  ncclResult_t res = ncclInternalError;
  switch (c.coll) {
    case Collective::AllReduce: res = ncclAllReduce(s, r, k, c.type, op, comm, stream); break;
    case Collective::Reduce: res = ncclReduce(s, r, k, c.type, op, c.root, comm, stream); break;
    case Collective::ReduceScatter:
      res = ncclReduceScatter(s, c.inPlace ? s + rank * k : r, k, c.type, op, comm, stream);
      break;
    case Collective::Broadcast: res = ncclBroadcast(s, r, k, c.type, c.root, comm, stream); break;
    case Collective::AllGather: res = ncclAllGather(c.inPlace ? s + rank * k : s, r, k, c.type, comm, stream); break;
    case Collective::Gather: res = ncclGather(c.inPlace ? s + rank * k : s, r, k, c.type, c.root, comm, stream); break;
    case Collective::Scatter: res = ncclScatter(s, c.inPlace ? s + rank * k : r, k, c.type, c.root, comm, stream); break;
    case Collective::AlltoAll: res = ncclAlltoAll(s, r, k, c.type, comm, stream); break;
    case Collective::SendRecv:
      ncclGroupStart();
      ncclSend(s, k, c.type, (rank + 1) % n, comm, stream);
      ncclRecv(r, k, c.type, (rank - 1 + n) % n, comm, stream);
      res = ncclGroupEnd();
      break;
    case Collective::AllGatherV: case Collective::AlltoAllv: break;  // not in the model (see expected())
  }
  if (device) {  // both copies come back (and are freed) whatever happened
    const bool back = device->download(&send, s);
    if (!device->download(&recv, rb) || !back) res = res == ncclSuccess ? ncclUnhandledCudaError : res;
    s = send.data();
    r = c.inPlace ? s : recv.data();
  }
  if (c.op == kPreMulSum) ncclRedOpDestroy(op, comm);
  *what = std::string(collectiveName(c.coll)) + " " + typeLabel(c.type) + " " + opLabel(c.op) + " count " +
          std::to_string(k) + (c.inPlace ? " in place" : "");
  if (res != ncclSuccess) {
    *what += std::string(": ") + ncclGetErrorString(res) + ": " + ncclGetLastError(comm);
    return 1;
  }
  const bool rootOnly = c.coll == Collective::Reduce || c.coll == Collective::Gather;
  if (rootOnly && rank != c.root) return 0;
  // Where the output sits in the buffer that holds it.
  const uint8_t* out = r;
  if (c.inPlace && (c.coll == Collective::ReduceScatter || c.coll == Collective::Scatter)) out = s + rank * k;
  const size_t outLen = recvLen;
  size_t wrong = 0;
  for (size_t j = 0; j < outLen; ++j) {
    const uint8_t want = ranks.expected(c, in, j);
    if (out[j] != want && wrong++ == 0) {
      char text[80];
      snprintf(text, sizeof text, " element %zu: got 0x%02x, want 0x%02x", j, out[j], want);
      *what += text;
    }
  }
  if (!c.inPlace && recv[recvLen] != 0x5a) ++wrong;  // nothing written past the output
  return wrong;
}

// Every call the tests make: both fp8 types, every collective, counts 0,
// 1, odd and `large`, in and out of place, every op (reductions up to the
// odd count, sum above), one after another with a fresh salt each.
inline void forEachCall(int nranks, size_t large, const std::function<void(const Call&)>& run) {
  const Collective all[] = {Collective::AllReduce, Collective::Reduce,   Collective::ReduceScatter,
                            Collective::Broadcast, Collective::AllGather, Collective::Gather,
                            Collective::Scatter,   Collective::AlltoAll,  Collective::SendRecv};
  uint64_t salt = 0;
  for (ncclDataType_t type : {ncclFloat8e4m3, ncclFloat8e5m2})
    for (Collective coll : all)
      for (size_t count : {size_t(0), size_t(1), size_t(1001), large})
        for (bool inPlace : {false, true}) {
          if (inPlace && (coll == Collective::AlltoAll || coll == Collective::SendRecv)) continue;
          std::vector<int> ops = {ncclSum};
          if (collectiveReduces(coll) && count <= 1001) ops = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg, kPreMulSum};
          for (int op : ops) {
            ++salt;
            run(Call{coll, type, op, count, static_cast<int>(salt % static_cast<uint64_t>(nranks)), inPlace, salt});
          }
        }
}

}  // namespace fp8model
