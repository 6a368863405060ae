#include "core/init.h"

#include <algorithm>
#include <cstring>

#include "bootstrap/unique_id.h"
#include "common/error.h"
#include "common/log.h"
#include "common/params.h"
#include "library/vendor_library.h"
#include "runtime/fp8_format.h"
#include "runtime/runtime.h"
#include "transport/network_choice.h"
#include "transport/transport_context.h"

namespace hetccl {

int currentDevice() {
  Runtime& rt = processRuntime();
  int device = -1;
  if (rt.hasDevices() && rt.currentDevice(&device) != ncclSuccess) device = -1;
  return device;
}

std::string localDomain() {
  Runtime& rt = processRuntime();
  return !params().domain.empty() ? params().domain : rt.hasDevices() ? rt.vendor() : "host";
}

std::string localLibrary(std::string* why) {
  Runtime& rt = processRuntime();
  VendorLibrary* lib = rt.hasDevices() ? vendorLibraryFor(rt, why) : nullptr;
  if (!lib) return "hetccl-native";
  const int v = lib->version();
  return std::string(lib->name()) + " " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

RankInfo localRankInfo(const SocketAddress& listenAddress, int device) {
  RankInfo info = RankInfo::local(listenAddress, device);
  Runtime& rt = processRuntime();
  snprintf(info.runtime, sizeof(info.runtime), "%s", rt.name());
  snprintf(info.domain, sizeof(info.domain), "%s", localDomain().c_str());
  if (rt.hasDevices()) {
    std::string why;
    snprintf(info.library, sizeof(info.library), "%s", localLibrary(&why).c_str());
    if (!why.empty())
      HETCCL_INFO("no vendor library for %s ranks (%s): hetccl's native algorithms serve them", rt.name(), why.c_str());
  }
  std::string why;
  const TransportChoice choice = transportInEffect();  // `auto` resolved (network_choice.h)
  if (choice == TransportChoice::Ucx || choice == TransportChoice::UcxAll) {
    info.ucx = !ucxUsable(&why) ? kMissing : choice == TransportChoice::Ucx ? kBetweenHosts : kEveryPair;
    if (info.ucx == kMissing) HETCCL_WARN("HETCCL_TRANSPORT asks for UCX, but UCX cannot be used here: %s", why.c_str());
    why.clear();
  }
  info.invalidSettings = !params().invalidSettings.empty();
  if (usesNetPlugin(choice)) {
    const bool betweenHosts = choice == TransportChoice::NetPlugin || choice == TransportChoice::Rdma;
    info.netPlugin = !netPluginUsable(&why) ? kMissing : betweenHosts ? kBetweenHosts : kEveryPair;
    if (info.netPlugin == kMissing)
      HETCCL_WARN("HETCCL_TRANSPORT asks for %s, but: %s", usesRdma(choice) ? "RDMA" : "a net plugin", why.c_str());
    why.clear();
  }
  const Fp8Format fp8 = rankFp8Format(rt, device, &why);
  info.fp8Format = static_cast<uint8_t>(fp8);
  HETCCL_INFO("fp8 on this rank is %s (%s)", fp8FormatName(fp8), why.c_str());
  return info;
}

namespace {

// Init may run on another thread than the application's: use the device
// that was current when the application called.
ncclResult_t useDevice(int device) {
  if (device < 0) return ncclSuccess;
  return processRuntime().setDevice(device);
}

}  // namespace

ncclResult_t initFromId(Communicator* comm, int nranks, const ncclUniqueId& id, int rank, int device,
                        const InitMarker& marker) {
  DecodedId decoded;
  HETCCL_TRY(decodeUniqueId(id, &decoded));
  if (decoded.rootStartedByRank0 && rank == 0) HETCCL_TRY(startRootAt(decoded));
  comm->rank = rank;
  comm->nranks = nranks;
  comm->device = device;
  HETCCL_TRY(useDevice(device));
  comm->secret = decoded.secret;
  HETCCL_TRY(comm->listener.open(decoded.secret));
  RankInfo mine = localRankInfo(comm->listener.address(), device);
  HETCCL_TRY(rendezvousWithRoot(decoded, rank, nranks, mine, &comm->peers, &comm->abort,
                                [&marker] { return marker.checkOthers(); }));
  std::vector<int> members;
  for (int r = 0; r < nranks; ++r) members.push_back(r);
  const Deadline deadline(params().timeoutSeconds);
  HETCCL_TRY(buildRing(comm->listener, comm->peers, members, rank, kTagRing, deadline, &comm->abort, &comm->ring));
  return comm->finishInit();
}

ncclResult_t splitMembers(Communicator* parent, int color, int key, std::vector<int>* members, int* myIndex) {
  struct Entry {
    int32_t color, key;
  };
  std::vector<Entry> all(static_cast<size_t>(parent->nranks));
  all[parent->rank] = Entry{color, key};
  HETCCL_TRY(parent->ring.allGather(all.data(), sizeof(Entry), Deadline(params().timeoutSeconds), &parent->abort));
  members->clear();
  *myIndex = -1;
  if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
  for (int r = 0; r < parent->nranks; ++r)
    if (all[r].color == color) members->push_back(r);
  // By key, ties in rank order (NCCL's split order); a plain sort with the
  // rank as the tie-break is stable by construction.
  std::sort(members->begin(), members->end(),
            [&](int a, int b) { return all[a].key != all[b].key ? all[a].key < all[b].key : a < b; });
  *myIndex = static_cast<int>(std::find(members->begin(), members->end(), parent->rank) - members->begin());
  return ncclSuccess;
}

ncclResult_t initChild(Communicator* parent, Communicator* child, const std::vector<int>& members, int myIndex,
                       uint64_t salt) {
  const Deadline deadline(params().timeoutSeconds);
  const uint64_t call = parent->childCounter;
  child->rank = myIndex;
  child->nranks = static_cast<int>(members.size());
  child->device = parent->device;
  HETCCL_TRY(useDevice(child->device));
  child->secret = mixHash(mixHash(parent->secret, call), salt);
  // A ring through the members over the parent's listeners; it becomes
  // the child's bootstrap ring. Excluded (maybe dead) ranks are not touched.
  HETCCL_TRY(buildRing(parent->listener, parent->peers, members, myIndex, kTagSubRingBase + call, deadline,
                       &parent->abort, &child->ring));
  HETCCL_TRY(child->listener.open(child->secret));
  child->peers.assign(members.size(), RankInfo{});
  child->peers[myIndex] = localRankInfo(child->listener.address(), child->device);
  // The child adopts its first member's tunables: make them the parent's
  // (rank 0's), so that a split or a domain behaves as the whole job does,
  // whatever its first member's own environment says.
  child->peers[myIndex].tunables = parent->tunables;
  const RankInfo mine = child->peers[myIndex];
  HETCCL_TRY(child->ring.allGather(child->peers.data(), sizeof(RankInfo), deadline, &child->abort));
  HETCCL_TRY(checkRankTable(&child->peers, myIndex, mine, "the split's members"));
  return child->finishInit();
}

}  // namespace hetccl
