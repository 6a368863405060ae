#include "plan/hierarchy/stream_hierarchy.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/domains.h"
#include "core/host_group.h"
#include "plan/host_staging/host_staging.h"
#include "plan/stream/stream_collectives.h"
#include "common/error.h"
#include "common/log.h"
#include "common/params.h"
#include "kernels/reducer.h"
#include "runtime/runtime.h"

namespace hetccl {

namespace {

// Block copies for every domain d and position j: block to(d, j) of dst
// (blocks of `bytes`) gets block from(d, j) of src.
template <typename To, typename From>
ncclResult_t moveBlocks(Runtime& rt, size_t domains, size_t k, char* dst, const char* src, size_t bytes, To to, From from,
                        cudaStream_t stream) {
  for (size_t j = 0; j < k; ++j)
    for (size_t d = 0; d < domains; ++d)
      HETCCL_TRY(rt.copyAsync(dst + to(d, j) * bytes, src + from(d, j) * bytes, bytes, stream));
  return ncclSuccess;
}

// Block indices for moveBlocks: (domain d, position j) as the global rank,
// position-major, or domain-major.
auto globalOrder(const Partition& p) {
  return [&p](size_t d, size_t j) { return static_cast<size_t>(p.member(d, static_cast<int>(j))); };
}
auto byPosition(size_t domains) {
  return [domains](size_t d, size_t j) { return j * domains + d; };
}
auto byDomain(size_t k) {
  return [k](size_t d, size_t j) { return d * k + j; };
}

}  // namespace

bool StreamHierarchy::fits(const HierarchyGroup& g) {
  const Partition& p = g.partition;
  const Tunables& t = g.host.tunables;
  if (!t.streamHierarchy || !t.streamCollectives || p.domains.size() < 2) return false;
  size_t largest = 0;
  for (const Domain& d : p.domains) largest = std::max(largest, d.members.size());
  if (largest < 2) return false;  // one rank per domain: the flat stream collectives
  for (const RankInfo& r : g.peers) {
    const bool host = strcmp(r.runtime, "host") == 0;
    // GPU ranks need their vendor library (without it, "hetccl-native": host-staged)
    if (host ? !t.hostRanksStaged : (r.library[0] == 0 || strcmp(r.library, "hetccl-native") == 0)) return false;
  }
  return true;
}

std::vector<int> StreamHierarchy::crossMembers(const Partition& p, int rank) {
  size_t smallest = p.domains[0].members.size();
  for (const Domain& d : p.domains) smallest = std::min(smallest, d.members.size());
  const int index = p.indexInDomain[static_cast<size_t>(rank)];
  std::vector<int> members;
  if (static_cast<size_t>(index) < smallest)
    for (size_t d = 0; d < p.domains.size(); ++d) members.push_back(p.member(d, index));
  return members;
}

ncclResult_t StreamHierarchy::create(const HierarchyGroup& g, StreamCollectives* cross, std::unique_ptr<Backend> vendor,
                                     Backend* native, std::unique_ptr<StreamHierarchy>* out) {
  out->reset();
  const Partition& p = g.partition;
  HostGroup& host = g.host;
  std::unique_ptr<StreamHierarchy> h(new StreamHierarchy(g));
  const int myDomain = p.domainOf[static_cast<size_t>(host.rank)];
  size_t smallest = p.domains[0].members.size(), largest = 0;
  for (const Domain& d : p.domains) {
    smallest = std::min(smallest, d.members.size());
    largest = std::max(largest, d.members.size());
  }
  h->k_ = static_cast<int>(smallest);
  h->uneven_ = smallest != largest;
  h->domainSize_ = static_cast<int>(p.domains[static_cast<size_t>(myDomain)].members.size());
  h->index_ = p.indexInDomain[static_cast<size_t>(host.rank)];
  h->cross_ = cross;
  h->domainVendor_ = std::move(vendor);
  h->domain_ = h->domainVendor_ ? h->domainVendor_.get() : native;
  Runtime& rt = processRuntime();
  HETCCL_TRY(makeReducer(rt, &h->reducer_));
  // Every cross group must be on the streams, or none is used (bit 0);
  // send/recv too where every rank can (bit 1: HETCCL_STREAM_HIERARCHY_P2P,
  // rank 0's, and a cross group with send/recv on its streams).
  std::vector<uint8_t> usable(static_cast<size_t>(host.nranks), 0);
  const bool inCrossGroup = h->index_ < h->k_;
  const bool streams = (!inCrossGroup || h->cross_) && h->domain_;
  const bool p2p = streams && !h->uneven_ && host.tunables.hierarchyP2p && h->cross_->p2pOnStreams();
  usable[static_cast<size_t>(host.rank)] = static_cast<uint8_t>((streams ? 1 : 0) | (p2p ? 2 : 0));
  HETCCL_TRY(host.ring.allGather(usable.data(), 1, Deadline(params().timeoutSeconds), &host.abort));
  h->p2p_ = true;
  for (uint8_t u : usable) {
    if (!(u & 1)) {
      HETCCL_INFO("stream hierarchy: not every cross group can use the streams; the collectives stay host-staged");
      return ncclSuccess;
    }
    h->p2p_ = h->p2p_ && (u & 2);
  }
  if (host.rank == 0)
    HETCCL_INFO("stream hierarchy: %zu domains of %s%d ranks, %d cross groups on the streams; domain steps in %s",
                p.domains.size(), h->uneven_ ? "at least " : "", h->k_, h->k_,
                h->domainVendor_ ? h->domain_->name() : "hetccl's algorithms");
  *out = std::move(h);
  return ncclSuccess;
}

StreamHierarchy::StreamHierarchy(const HierarchyGroup& g)
    : host_(g.host), partition_(g.partition), device_(g.device), rt_(processRuntime()) {}

Op StreamHierarchy::stepOf(const Op& op, const void* send, void* recv, size_t count, int root) {
  Op step = op;
  step.sendbuff = send;
  step.recvbuff = recv;
  step.count = count;
  step.root = root;
  return step;
}

StreamHierarchy::~StreamHierarchy() = default;

bool StreamHierarchy::handles(const Op& op) const {
  ncclRedOp_t v;
  if (uneven_ && op.kind == OpKind::AlltoAll) return false;  // host-staged in unequal domains
  if (uneven_ && (op.kind == OpKind::Gather || op.kind == OpKind::Scatter)) return true;  // on the all-reduce
  switch (op.kind) {
    case OpKind::AllGather:
    case OpKind::Broadcast: return true;
    case OpKind::AlltoAll:  // the domain's step needs the library's own
    case OpKind::Gather:
    case OpKind::Scatter: return domain_->has(op.kind);
    case OpKind::AllReduce:
    case OpKind::ReduceScatter:
    case OpKind::Reduce: return op.red.kind == RedKind::PreMulSum || builtinVendorOp(op.red.kind, &v);
    default: return false;
  }
}

// Send/recv, each by its pair alone (so both ends route it alike, whatever
// else their groups hold): a peer in my domain through the domain's
// library, a peer at my position in another domain through my cross
// group's streams, in that order; any other peer is left in `rest` (the
// caller stages it, after these).
ncclResult_t StreamHierarchy::enqueueP2p(std::span<const Op* const> ops, std::vector<const Op*>* rest) {
  const Partition& p = partition_;
  const int myDomain = p.domainOf[static_cast<size_t>(host_.rank)];
  std::vector<Op> inDomain, across;
  for (const Op* op : ops) {
    const size_t peer = static_cast<size_t>(op->root);
    if (p.domainOf[peer] == myDomain) {
      inDomain.push_back(stepOf(*op, op->sendbuff, op->recvbuff, op->count, p.indexInDomain[peer]));
    } else if (p.indexInDomain[peer] == index_) {
      across.push_back(stepOf(*op, op->sendbuff, op->recvbuff, op->count, p.domainOf[peer]));
    } else {
      rest->push_back(op);
    }
  }
  std::vector<const Op*> acrossOps;
  for (const Op& op : across) acrossOps.push_back(&op);
  std::optional<DeviceGuard> onDevice;
  if (device_ >= 0) {
    onDevice.emplace(rt_, device_);
    HETCCL_TRY(onDevice->status());
  }
  if (!inDomain.empty()) HETCCL_TRY(domainPointToPoint(inDomain));
  return acrossOps.empty() ? ncclSuccess : cross_->enqueueP2p(acrossOps);
}

ncclResult_t StreamHierarchy::checkP2p(std::span<const Op* const> ops) {
  for (const Op* op : ops) HETCCL_TRY(check(*op));
  return ncclSuccess;
}

ncclResult_t StreamHierarchy::domainPointToPoint(const std::vector<Op>& ops) {
  std::vector<const Op*> pointers;
  for (const Op& op : ops) pointers.push_back(&op);
  return domain_->pointToPoint(pointers);
}

ncclResult_t StreamHierarchy::check(const Op& op) {
  const Extents used = extentsOf(op, host_.rank, host_.nranks);  // e.g. a gather's recvbuff at the root only
  if (used.sendBytes) HETCCL_TRY(checkDeviceBuffer(rt_, op.sendbuff, "sendbuff", op.kind));
  if (used.recvBytes) HETCCL_TRY(checkDeviceBuffer(rt_, op.recvbuff, "recvbuff", op.kind));
  return ncclSuccess;  // a capturing stream never gets here: dispatch sends captures to HostStaging::capture
}

ncclResult_t StreamHierarchy::releaseScratch() {
  bool done = true;
  if (done_) HETCCL_TRY(rt_.eventDone(done_.get(), &done));
  if (!done)
    return fail(ncclInvalidUsage, "ncclCommSuspend: a collective queued on this communicator is still running on "
                                  "the GPU; synchronize its stream first");
  for (int i = 0; i < 3; ++i) {
    scratch_[i].reset();
    scratchBytes_[i] = 0;
  }
  return ncclSuccess;
}

ncclResult_t StreamHierarchy::scratch(int which, size_t bytes, char** out) {
  if (bytes > scratchBytes_[which]) {
    scratch_[which].reset();  // (freeing device memory synchronizes with the device)
    scratchBytes_[which] = 0;
    HETCCL_TRY(allocDevice(rt_, bytes, &scratch_[which]));
    scratchBytes_[which] = bytes;
  }
  *out = static_cast<char*>(scratch_[which].get());
  return ncclSuccess;
}

// The domain's library reduces with its built-in op: PreMulSum's inputs
// were scaled before (summable), ncclAvg divides at the end (averaged).
ncclResult_t StreamHierarchy::domainStep(const Op& step) {
  Op op = step;
  op.red.average = false;
  op.vendorOp = ncclSum;
  builtinVendorOp(op.red.kind, &op.vendorOp);
  return domain_->run(op);
}

ncclResult_t StreamHierarchy::crossStep(const Op& op) {
  Op x = op;
  x.red.average = false;
  return cross_->enqueue(x);
}

ncclResult_t StreamHierarchy::enqueue(const Op& op) {
  if (op.count == 0) return ncclSuccess;  // nothing moves, on any rank
  std::optional<DeviceGuard> onDevice;
  if (device_ >= 0) {
    onDevice.emplace(rt_, device_);
    HETCCL_TRY(onDevice->status());
  }
  if (!done_) HETCCL_TRY(createEvent(rt_, &done_));
  // The scratch buffers are shared: a call on another stream than the last
  // one's starts after it.
  if (called_ && op.stream != lastStream_) HETCCL_TRY(rt_.waitEvent(op.stream, done_.get()));
  Op steps = op;
  HETCCL_TRY(summable(op, &steps));
  ncclResult_t r = uneven_                            ? unevenCollective(steps)
                   : op.kind == OpKind::AllGather     ? allGather(steps)
                   : op.kind == OpKind::ReduceScatter ? reduceScatter(steps)
                   : op.kind == OpKind::Broadcast     ? broadcast(steps)
                   : op.kind == OpKind::Reduce        ? reduce(steps)
                   : op.kind == OpKind::AlltoAll      ? alltoAll(steps)
                   : op.kind == OpKind::Gather        ? gather(steps)
                   : op.kind == OpKind::Scatter       ? scatter(steps)
                                                      : allReduce(steps);
  HETCCL_TRY(r);
  HETCCL_TRY(rt_.recordEvent(done_.get(), op.stream));
  lastStream_ = op.stream;
  called_ = true;
  return ncclSuccess;
}

// The steps reduce with sum, prod, min or max only: a PreMulSum's inputs
// are scaled into scratch first and summed from there. An average is summed
// by the steps (domainStep and crossStep drop the flag: each would divide
// by its own group's size) and divided by the communicator's size at the
// end (averaged()).
ncclResult_t StreamHierarchy::summable(const Op& op, Op* steps) {
  *steps = op;
  if (op.red.kind != RedKind::PreMulSum ||
      (op.kind != OpKind::AllReduce && op.kind != OpKind::ReduceScatter && op.kind != OpKind::Reduce))
    return ncclSuccess;
  const size_t inputs = op.kind == OpKind::ReduceScatter ? op.count * static_cast<size_t>(host_.nranks) : op.count;
  char* scaled = nullptr;
  HETCCL_TRY(scratch(2, inputs * typeSize(op.type), &scaled));
  HETCCL_TRY(reducer_->prepare(op.red, scaled, op.sendbuff, inputs, op.stream));
  steps->sendbuff = scaled;
  steps->red = op.red.merging();
  return ncclSuccess;
}

// ncclAvg: `count` summed elements at `data` divided by the number of ranks.
ncclResult_t StreamHierarchy::averaged(const Op& op, void* data, size_t count) {
  if (!op.red.average || count == 0) return ncclSuccess;
  return reducer_->average(op.red, data, count, host_.nranks, op.stream);
}

ncclResult_t StreamHierarchy::allGather(const Op& op) {
  const Partition& p = partition_;
  const size_t chunk = op.count * typeSize(op.type), domains = p.domains.size(), k = static_cast<size_t>(k_);
  char *fromDomains = nullptr, *all = nullptr;
  HETCCL_TRY(scratch(0, domains * chunk, &fromDomains));
  HETCCL_TRY(scratch(1, k * domains * chunk, &all));
  // My chunk from every domain's rank at my position, then every position's
  // chunks: `all` holds (position, domain).
  HETCCL_TRY(crossStep(stepOf(op, op.sendbuff, fromDomains, op.count, op.root)));
  HETCCL_TRY(domainStep(stepOf(op, fromDomains, all, op.count * domains, op.root)));
  return moveBlocks(rt_, domains, k, static_cast<char*>(op.recvbuff), all, chunk, globalOrder(p), byPosition(domains),
                    op.stream);
}

ncclResult_t StreamHierarchy::reduceScatter(const Op& op) {
  const Partition& p = partition_;
  const size_t chunk = op.count * typeSize(op.type), domains = p.domains.size(), k = static_cast<size_t>(k_);
  char *ordered = nullptr, *mine = nullptr;
  HETCCL_TRY(scratch(0, k * domains * chunk, &ordered));
  HETCCL_TRY(scratch(1, domains * chunk, &mine));
  // (position, domain) order: member i's block is every rank at position i
  HETCCL_TRY(moveBlocks(rt_, domains, k, ordered, static_cast<const char*>(op.sendbuff), chunk, byPosition(domains),
                        globalOrder(p), op.stream));
  // The domain's partial chunks of the ranks at my position, then across
  // domains my own chunk.
  HETCCL_TRY(domainStep(stepOf(op, ordered, mine, op.count * domains, op.root)));
  HETCCL_TRY(crossStep(stepOf(op, mine, op.recvbuff, op.count, op.root)));
  return averaged(op, op.recvbuff, op.count);
}

ncclResult_t StreamHierarchy::broadcast(const Op& op) {
  const Partition& p = partition_;
  const int rootDomain = p.domainOf[static_cast<size_t>(op.root)];
  const bool rootsDomain = p.domainOf[static_cast<size_t>(host_.rank)] == rootDomain;
  const size_t es = typeSize(op.type), k = static_cast<size_t>(k_);
  const size_t shard = op.count / k, tail = op.count % k;
  char* recv = static_cast<char*>(op.recvbuff);
  if (rootsDomain) {  // the whole buffer inside the root's domain
    Op b = op;
    b.root = p.indexInDomain[static_cast<size_t>(op.root)];
    HETCCL_TRY(domainStep(b));
  }
  Op x = op;  // each cross group: its shard, from the root's domain
  x.root = rootDomain;
  if (shard > 0) {
    x.sendbuff = x.recvbuff = recv + static_cast<size_t>(index_) * shard * es;
    x.count = shard;
    HETCCL_TRY(crossStep(x));
  }
  if (tail > 0) {
    x.sendbuff = x.recvbuff = recv + k * shard * es;
    x.count = tail;
    HETCCL_TRY(crossStep(x));
  }
  if (rootsDomain) return ncclSuccess;
  return gatherShards(op, recv);  // the other domains: the shards, in place
}

// The first steps of all-reduce and reduce: the domain's reduce-scatter of
// sendbuff (my shard to `into` + index * shard) and its all-reduce of the
// tail (to the end of `into`), then the cross group's `crossKind`
// (all-reduce, or reduce to the root's domain) of both, in place.
ncclResult_t StreamHierarchy::reduceAcross(const Op& op, char* into, OpKind crossKind, int crossRoot) {
  const size_t es = typeSize(op.type), k = static_cast<size_t>(k_);
  const size_t shard = op.count / k, tail = op.count % k;
  Op x = op;
  x.kind = crossKind;
  x.root = crossRoot;
  if (shard > 0) {
    Op rs = op;
    rs.kind = OpKind::ReduceScatter;
    rs.recvbuff = into + static_cast<size_t>(index_) * shard * es;  // in place when sendbuff == into, as NCCL defines it
    rs.count = shard;
    HETCCL_TRY(domainStep(rs));
    x.sendbuff = x.recvbuff = rs.recvbuff;
    x.count = shard;
    HETCCL_TRY(crossStep(x));
  }
  if (tail > 0) {
    Op t = op;
    t.kind = OpKind::AllReduce;
    t.sendbuff = static_cast<const char*>(op.sendbuff) + k * shard * es;
    t.recvbuff = into + k * shard * es;
    t.count = tail;
    HETCCL_TRY(domainStep(t));
    x.sendbuff = x.recvbuff = t.recvbuff;
    x.count = tail;
    HETCCL_TRY(crossStep(x));
  }
  return ncclSuccess;
}

// The domain's all-gather of the shards in `base` (mine at index * shard).
ncclResult_t StreamHierarchy::gatherShards(const Op& op, char* base) {
  const size_t shard = op.count / static_cast<size_t>(k_);
  if (shard == 0) return ncclSuccess;
  Op ag = op;
  ag.kind = OpKind::AllGather;
  ag.sendbuff = base + static_cast<size_t>(index_) * shard * typeSize(op.type);
  ag.recvbuff = base;
  ag.count = shard;
  return domainStep(ag);
}

ncclResult_t StreamHierarchy::allReduce(const Op& op) {
  char* recv = static_cast<char*>(op.recvbuff);
  HETCCL_TRY(reduceAcross(op, recv, OpKind::AllReduce, 0));
  const size_t es = typeSize(op.type), k = static_cast<size_t>(k_), shard = op.count / k;
  HETCCL_TRY(averaged(op, recv + static_cast<size_t>(index_) * shard * es, shard));  // my shard, and the tail
  HETCCL_TRY(averaged(op, recv + k * shard * es, op.count % k));
  return gatherShards(op, recv);
}

ncclResult_t StreamHierarchy::reduce(const Op& op) {
  const Partition& p = partition_;
  const int rootDomain = p.domainOf[static_cast<size_t>(op.root)];
  char* all = nullptr;  // the vector, shard by shard (receive buffers exist at the root only)
  HETCCL_TRY(scratch(0, op.count * typeSize(op.type), &all));
  HETCCL_TRY(reduceAcross(op, all, OpKind::Reduce, rootDomain));
  if (p.domainOf[static_cast<size_t>(host_.rank)] != rootDomain) return ncclSuccess;
  HETCCL_TRY(gatherShards(op, all));  // the root's domain; the root keeps the result
  if (host_.rank != op.root) return ncclSuccess;
  HETCCL_TRY(rt_.copyAsync(op.recvbuff, all, op.count * typeSize(op.type), op.stream));
  return averaged(op, op.recvbuff, op.count);
}

// All-to-all (c elements from every rank to every rank):
//   1. my input by (position j, domain d): block j is what goes to the
//      ranks at position j, domain by domain;
//   2. the domain's all-to-all of those blocks: from member s, what it
//      sends to position index_ of every domain, (source s, domain d);
//   3. regrouped by (domain d, source s);
//   4. the cross group's all-to-all: to domain d what my domain's ranks send
//      to (d, index_); from domain d what its ranks send me, (d, source s);
//   5. each chunk to its source's place.
ncclResult_t StreamHierarchy::alltoAll(const Op& op) {
  const Partition& p = partition_;
  const size_t chunk = op.count * typeSize(op.type), domains = p.domains.size(), k = static_cast<size_t>(k_);
  char *a = nullptr, *b = nullptr;
  HETCCL_TRY(scratch(0, k * domains * chunk, &a));
  HETCCL_TRY(scratch(1, k * domains * chunk, &b));
  HETCCL_TRY(moveBlocks(rt_, domains, k, a, static_cast<const char*>(op.sendbuff), chunk, byPosition(domains),
                        globalOrder(p), op.stream));
  HETCCL_TRY(domainStep(stepOf(op, a, b, op.count * domains, op.root)));
  HETCCL_TRY(moveBlocks(rt_, domains, k, a, b, chunk, byDomain(k), byPosition(domains), op.stream));
  HETCCL_TRY(crossStep(stepOf(op, a, b, op.count * k, op.root)));
  return moveBlocks(rt_, domains, k, static_cast<char*>(op.recvbuff), b, chunk, globalOrder(p), byDomain(k), op.stream);
}

// Gather to root (rd, ri): the cross group's gather of my chunk to my
// position in the root's domain (by domain), then that domain's gather of
// those to the root (by position, domain), each chunk to its source's place.
ncclResult_t StreamHierarchy::gather(const Op& op) {
  const Partition& p = partition_;
  const size_t chunk = op.count * typeSize(op.type), domains = p.domains.size(), k = static_cast<size_t>(k_);
  const int rootDomain = p.domainOf[static_cast<size_t>(op.root)];
  char *mine = nullptr, *all = nullptr;
  HETCCL_TRY(rootedScratch(op, &mine, &all));
  HETCCL_TRY(crossStep(stepOf(op, op.sendbuff, mine, op.count, rootDomain)));
  if (p.domainOf[static_cast<size_t>(host_.rank)] != rootDomain) return ncclSuccess;
  HETCCL_TRY(domainStep(stepOf(op, mine, all, op.count * domains, p.indexInDomain[static_cast<size_t>(op.root)])));
  if (host_.rank != op.root) return ncclSuccess;
  return moveBlocks(rt_, domains, k, static_cast<char*>(op.recvbuff), all, chunk, globalOrder(p), byPosition(domains),
                    op.stream);
}

// Scatter from root (rd, ri), the gather reversed: the root orders its
// input by (position, domain), its domain scatters the positions' blocks,
// each cross group scatters its block from the root's domain.
ncclResult_t StreamHierarchy::scatter(const Op& op) {
  const Partition& p = partition_;
  const size_t chunk = op.count * typeSize(op.type), domains = p.domains.size(), k = static_cast<size_t>(k_);
  const int rootDomain = p.domainOf[static_cast<size_t>(op.root)];
  char *mine = nullptr, *all = nullptr;
  HETCCL_TRY(rootedScratch(op, &mine, &all));
  if (p.domainOf[static_cast<size_t>(host_.rank)] == rootDomain) {
    if (host_.rank == op.root)
      HETCCL_TRY(moveBlocks(rt_, domains, k, all, static_cast<const char*>(op.sendbuff), chunk, byPosition(domains),
                            globalOrder(p), op.stream));
    HETCCL_TRY(domainStep(stepOf(op, all, mine, op.count * domains, p.indexInDomain[static_cast<size_t>(op.root)])));
  }
  return crossStep(stepOf(op, mine, op.recvbuff, op.count, rootDomain));
}

// Gather's and scatter's scratch: my position's chunk from (or for) every
// domain, and every position's of those.
ncclResult_t StreamHierarchy::rootedScratch(const Op& op, char** mine, char** all) {
  const size_t perDomain = partition_.domains.size() * op.count * typeSize(op.type);
  HETCCL_TRY(scratch(0, perDomain, mine));
  return scratch(1, static_cast<size_t>(k_) * perDomain, all);
}

void StreamHierarchy::release() {
  if (cross_) cross_->release();
  if (domainVendor_) domainVendor_->markAborted();
}

const char* StreamHierarchy::describe() const {
  if (uneven_)
    return domainVendor_ ? "unequal domains: an all-reduce of the domains' reduces and broadcasts in their vendor "
                           "library and the cross groups' stream all-reduces through shared pinned memory"
                         : "unequal domains: an all-reduce of the domains' reduces and broadcasts in hetccl's "
                           "algorithms and the cross groups' stream all-reduces through shared pinned memory";
  return domainVendor_ ? "the domains' steps in their vendor library, the cross groups' stream collectives through "
                         "shared pinned memory"
                       : "the domains' steps in hetccl's algorithms, the cross groups' stream collectives through "
                         "shared pinned memory";
}

}  // namespace hetccl
