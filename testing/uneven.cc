#include "uneven.h"

#include <dlfcn.h>

#include <cstdint>

#include "hetccl.h"

namespace hetccl::testing {

namespace {

uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 33)) * 0xff51afd7ed558ccdull;
  x = (x ^ (x >> 33)) * 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

// Elements rank `from` sends to rank `to` (all-gather: the same to all):
// 0 to k.count, odd and even, zero for some ranks.
size_t blockSize(const Case& k, int from, int to) {
  if (k.count == 0) return 0;
  if (k.coll == Collective::AllGatherV) to = 0;
  const uint64_t h = mix(k.seed ^ (static_cast<uint64_t>(from) * 1315423911u + static_cast<uint64_t>(to) * 2654435761u + 7));
  return (k.count * (h % 3) + ((from + to) & 1)) / 2;
}

// Places blocks of `sizes` in the order `order`, a gap of one after each.
std::vector<size_t> place(const std::vector<size_t>& sizes, const std::vector<int>& order) {
  std::vector<size_t> displs(sizes.size());
  size_t at = 0;
  for (int p : order) {
    displs[p] = at;
    at += sizes[p] + 1;
  }
  return displs;
}

std::vector<int> reversed(int n) {
  std::vector<int> order;
  for (int p = n - 1; p >= 0; --p) order.push_back(p);
  return order;
}

std::vector<int> rotated(int n, int start) {
  std::vector<int> order;
  for (int i = 0; i < n; ++i) order.push_back((start + i) % n);
  return order;
}

}  // namespace

bool isUneven(Collective c) { return c == Collective::AllGatherV || c == Collective::AlltoAllv; }

UnevenLayout unevenLayout(const Case& k, int rank) {
  const int n = k.nranks;
  UnevenLayout l;
  if (k.coll == Collective::AllGatherV) {
    l.sendCounts = {blockSize(k, rank, 0)};
    l.sendDispls = {0};
    for (int p = 0; p < n; ++p) l.recvCounts.push_back(blockSize(k, p, 0));
    l.recvDispls = place(l.recvCounts, reversed(n));
    return l;
  }
  for (int p = 0; p < n; ++p) {
    l.sendCounts.push_back(blockSize(k, rank, p));
    l.recvCounts.push_back(blockSize(k, p, rank));
  }
  l.sendDispls = place(l.sendCounts, reversed(n));
  l.recvDispls = place(l.recvCounts, rotated(n, rank));
  return l;
}

size_t unevenInPlaceOffset(const Case& k, int rank) { return unevenLayout(k, rank).recvDispls[rank]; }

size_t unevenRecvSpan(const Case& k, int rank) {
  const UnevenLayout l = unevenLayout(k, rank);
  size_t span = 0;
  for (size_t p = 0; p < l.recvCounts.size(); ++p) span += l.recvCounts[p] + 1;
  return span;
}

ncclResult_t launchUneven(ncclComm_t comm, const Case& k, int rank, char* send, char* recv, bool inPlace,
                          cudaStream_t stream) {
  // Looked up, not linked: hetccl-perf-nccl links NVIDIA's NCCL, which has
  // neither (it finds them when hetccl is preloaded).
  static const auto allGatherV = reinterpret_cast<decltype(&hetcclAllGatherV)>(dlsym(RTLD_DEFAULT, "hetcclAllGatherV"));
  static const auto allToAllv = reinterpret_cast<decltype(&ncclAllToAllv)>(dlsym(RTLD_DEFAULT, "ncclAllToAllv"));
  const UnevenLayout l = unevenLayout(k, rank);
  const size_t es = typeBytes(k.type);
  if (k.coll == Collective::AllGatherV) {
    if (!allGatherV) return ncclInvalidUsage;
    char* out = inPlace ? send : recv;
    const char* in = inPlace ? send + l.recvDispls[rank] * es : send;
    return allGatherV(in, l.sendCounts[0], out, l.recvCounts.data(), l.recvDispls.data(), k.type, comm, stream);
  }
  if (!allToAllv) return ncclInvalidUsage;
  return allToAllv(send, l.sendCounts.data(), l.sendDispls.data(), recv, l.recvCounts.data(), l.recvDispls.data(), k.type,
                   comm, stream);
}

}  // namespace hetccl::testing
