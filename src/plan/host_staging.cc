#include "plan/host_staging.h"

#include <algorithm>

#include "common/error.h"

namespace hetccl {

Extents extentsOf(const Op& op, int rank, int nranks) {
  const size_t b = op.count * typeSize(op.type), all = b * static_cast<size_t>(nranks);
  const bool root = rank == op.root;
  switch (op.kind) {
    case OpKind::AllReduce: return {b, b};
    case OpKind::Broadcast: return {root ? b : 0, b};
    case OpKind::Reduce: return {b, root ? b : 0};
    case OpKind::AllGather: return {b, all};
    case OpKind::ReduceScatter: return {all, b};
    case OpKind::AlltoAll: return {all, all};
    case OpKind::Gather: return {b, root ? all : 0};
    case OpKind::Scatter: return {root ? all : 0, b};
    case OpKind::Send: return {b, 0};
    case OpKind::Recv: return {0, b};
  }
  return {};
}

HostStaging::~HostStaging() {
  if (pinned_) rt_.freePinned(pinned_);
}

ncclResult_t HostStaging::checkDeviceMemory(const void* p, const char* what, const Op& op) {
  if (!rt_.hasDevices()) return ncclSuccess;  // host ranks (HETCCL_FORCE_STAGING, for tests)
  MemoryKind kind;
  int device;
  HETCCL_TRY(rt_.memoryKind(p, &kind, &device));
  if (kind == MemoryKind::Device || kind == MemoryKind::Managed) return ncclSuccess;
  return fail(ncclInvalidArgument, "%s: %s %p is %s memory; a %s rank needs device memory", opKindName(op.kind), what, p,
              memoryKindName(kind), rt_.name());
}

ncclResult_t HostStaging::stageIn(std::span<const Op* const> ops, int rank, int nranks) {
  regions_.clear();
  stagedOps_.clear();
  // Each operation's buffers: one region for send and receive when they
  // overlap (in place stays in place), else one each.
  struct Plan {
    const char *sendBegin, *recvBegin;
    size_t first, second;  // region indices (second = first when merged), or SIZE_MAX
  };
  std::vector<Plan> plans;
  size_t total = 0;
  auto addRegion = [&](const char* p, size_t bytes, cudaStream_t stream, bool written) {
    regions_.push_back(Region{const_cast<char*>(p), total, bytes, stream, written});
    total += (bytes + 255) / 256 * 256;
    return regions_.size() - 1;
  };
  for (const Op* op : ops) {
    const Extents e = extentsOf(*op, rank, nranks);
    const char* s = static_cast<const char*>(op->sendbuff);
    const char* r = static_cast<const char*>(op->recvbuff);
    if (e.sendBytes) HETCCL_TRY(checkDeviceMemory(s, "sendbuff", *op));
    if (e.recvBytes) HETCCL_TRY(checkDeviceMemory(r, "recvbuff", *op));
    Plan p{s, r, SIZE_MAX, SIZE_MAX};
    const bool overlap = e.sendBytes && e.recvBytes && s < r + e.recvBytes && r < s + e.sendBytes;
    if (overlap) {
      const char* lo = std::min(s, r);
      const char* hi = std::max(s + e.sendBytes, r + e.recvBytes);
      p.first = p.second = addRegion(lo, static_cast<size_t>(hi - lo), op->stream, true);
    } else {
      if (e.sendBytes) p.first = addRegion(s, e.sendBytes, op->stream, false);
      if (e.recvBytes) p.second = addRegion(r, e.recvBytes, op->stream, true);
    }
    plans.push_back(p);
  }
  if (total > pinnedBytes_) {
    if (pinned_) HETCCL_TRY(rt_.freePinned(pinned_));
    pinned_ = nullptr;
    pinnedBytes_ = 0;
    void* p = nullptr;
    HETCCL_TRY(rt_.allocPinned(&p, total));
    pinned_ = static_cast<char*>(p);
    pinnedBytes_ = total;
  }
  // Everything the application queued before the call completes first;
  // then the buffers come to the host.
  for (const Region& g : regions_) HETCCL_TRY(rt_.copyAsync(pinned_ + g.offset, g.device, g.bytes, g.stream));
  for (const Region& g : regions_) HETCCL_TRY(rt_.synchronize(g.stream));
  for (size_t i = 0; i < ops.size(); ++i) {
    Op staged = *ops[i];
    const Plan& p = plans[i];
    auto translate = [&](const char* user, size_t region) -> char* {
      const Region& g = regions_[region];
      return pinned_ + g.offset + (user - g.device);
    };
    if (p.first != SIZE_MAX) staged.sendbuff = translate(p.sendBegin, p.first);
    if (p.second != SIZE_MAX) staged.recvbuff = translate(p.recvBegin, p.second);
    stagedOps_.push_back(staged);
  }
  return ncclSuccess;
}

ncclResult_t HostStaging::stageOut() {
  for (const Region& g : regions_)
    if (g.written) HETCCL_TRY(rt_.copyAsync(g.device, pinned_ + g.offset, g.bytes, g.stream));
  for (const Region& g : regions_) HETCCL_TRY(rt_.synchronize(g.stream));
  return ncclSuccess;
}

}  // namespace hetccl
