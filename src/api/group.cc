#include "api/group.h"

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "api/api_util.h"
#include "library/vendor_library.h"
#include "core/communicator.h"
#include "route/router.h"

using namespace hetccl;

namespace {

struct GroupState {
  int depth = 0;
  std::vector<Op> ops;
  std::vector<ncclComm_t> inits;
  std::vector<ncclComm_t> destroys;  // ncclCommDestroy inside the group: done at its end
  ncclResult_t error = ncclSuccess;
  std::string errorText;
  std::vector<VendorLibrary*> vendorGroups;  // vendor libraries in a group with this one
};

thread_local GroupState tGroup;

// One communicator's share of a group, through its router.
ncclResult_t runOnComm(Communicator* c, std::span<const Op* const> ops) { return routerOf(*c).run(ops); }

ncclResult_t execute(std::vector<Op>& ops) {
  std::vector<Communicator*> comms;
  std::vector<std::vector<const Op*>> perComm;
  for (const Op& op : ops) {
    size_t i = 0;
    while (i < comms.size() && comms[i] != op.comm) ++i;
    if (i == comms.size()) {
      comms.push_back(op.comm);
      perComm.emplace_back();
    }
    perComm[i].push_back(&op);
  }
  if (comms.size() == 1) return runOnComm(comms[0], perComm[0]);
  std::vector<std::string> errors(comms.size());
  for (size_t i = 0; i < comms.size(); ++i) {
    Communicator* c = comms[i];
    if (!c->worker) c->worker = std::make_unique<JobThread>();
    auto* list = &perComm[i];
    auto* text = &errors[i];
    c->worker->submit([c, list, text] {
      ncclResult_t r = runOnComm(c, *list);
      if (r != ncclSuccess) *text = lastError();
      return r;
    });
  }
  ncclResult_t first = ncclSuccess;
  for (size_t i = 0; i < comms.size(); ++i) {
    ncclResult_t r = comms[i]->worker->wait();
    if (r != ncclSuccess && first == ncclSuccess) first = fail(r, "%s", errors[i].c_str());
  }
  return first;
}

}  // namespace

namespace hetccl {

ncclResult_t enqueue(const Op& op) {
  if (op.comm->suspended.load()) {
    const ncclResult_t r = fail(ncclInvalidUsage, "%s: the communicator is suspended (ncclCommSuspend): "
                                "ncclCommResume it first", opKindName(op.kind));
    recordGroupError(r);
    return r;
  }
  if (tGroup.depth > 0) {
    tGroup.ops.push_back(op);
    return ncclSuccess;
  }
  const Op* single = &op;  // outside a group: run now, nothing allocated
  return runOnComm(op.comm, std::span<const Op* const>(&single, 1));
}

}  // namespace hetccl

HETCCL_EXPORT ncclResult_t pncclGroupStart(void) {
  // Pass-through calls go straight to the vendor library: open its group too.
  if (tGroup.depth++ == 0) tGroup.vendorGroups = VendorLibrary::groupStartAll();
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclGroupStart)

namespace {

// Remembers an argument error raised inside a group; ncclGroupEnd reports it.
struct GroupEnd {
  static ncclResult_t finish(bool simulate, ncclSimInfo_t* sim) {
    if (tGroup.depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd called without a matching ncclGroupStart");
    if (--tGroup.depth > 0) return ncclSuccess;
    std::vector<ncclComm_t> destroys;
    destroys.swap(tGroup.destroys);
    ncclResult_t r = run(simulate, sim);
    // The group's operations have run (or failed): now the communicators
    // destroyed inside it go, as NCCL does at the group's end.
    const std::string text = r != ncclSuccess ? lastError() : "";
    for (ncclComm_t comm : destroys) {
      const ncclResult_t d = pncclCommDestroy(comm);
      if (d != ncclSuccess && r == ncclSuccess) return d;
    }
    return r == ncclSuccess ? r : fail(r, "%s", text.c_str());
  }

 private:
  static ncclResult_t run(bool simulate, ncclSimInfo_t* sim) {
    std::vector<VendorLibrary*> vendorGroups;
    vendorGroups.swap(tGroup.vendorGroups);
    const ncclResult_t vendorResult = VendorLibrary::groupEnd(vendorGroups);
    std::vector<Op> ops;
    ops.swap(tGroup.ops);
    std::vector<ncclComm_t> inits;
    inits.swap(tGroup.inits);
    for (ncclComm_t comm : inits) {
      // Blocking communicators finish init here; non-blocking ones report
      // through ncclCommGetAsyncError as usual.
      if (!comm->impl->config.blocking) continue;
      ncclResult_t r = comm->impl->waitReady();
      if (r != ncclSuccess && tGroup.error == ncclSuccess) {
        tGroup.error = r;
        tGroup.errorText = comm->impl->asyncErrorText;
      }
    }
    ncclResult_t pending = tGroup.error;
    std::string text = tGroup.errorText;
    tGroup.error = ncclSuccess;
    tGroup.errorText.clear();
    if (pending != ncclSuccess) return fail(pending, "%s (operations of this group were not run)", text.c_str());
    if (simulate) {
      // A coarse estimate: 20 us per operation plus bytes at 1 GB/s.
      double bytes = 0;
      for (const Op& op : ops) bytes += static_cast<double>(op.count * typeSize(op.type));
      sim->estimatedTime = static_cast<float>(20.0 * ops.size() + bytes / 1e3);
      return ncclSuccess;
    }
    if (vendorResult != ncclSuccess) return vendorResult;
    if (ops.empty()) return ncclSuccess;
    return execute(ops);
  }
};

}  // namespace

namespace hetccl {
bool inGroup() { return tGroup.depth > 0; }
void deferInit(ncclComm_t comm) { tGroup.inits.push_back(comm); }

bool deferDestroy(ncclComm_t comm) {
  if (tGroup.depth == 0) return false;
  if (std::find(tGroup.destroys.begin(), tGroup.destroys.end(), comm) == tGroup.destroys.end())
    tGroup.destroys.push_back(comm);
  return true;
}

void dropGroupWork(ncclComm_t comm) {
  Communicator* c = comm->impl;
  const size_t before = tGroup.ops.size();
  std::erase_if(tGroup.ops, [c](const Op& op) { return op.comm == c; });
  std::erase(tGroup.inits, comm);
  std::erase(tGroup.destroys, comm);
  if (tGroup.ops.size() != before && tGroup.error == ncclSuccess) {
    tGroup.error = ncclInvalidUsage;
    tGroup.errorText = "a communicator was aborted inside the group before its operations ran";
  }
}

// Called by the API layer when an enqueued call fails its checks.
void recordGroupError(ncclResult_t r) {
  if (tGroup.depth > 0 && tGroup.error == ncclSuccess) {
    tGroup.error = r;
    tGroup.errorText = lastError();
  }
}
}  // namespace hetccl

HETCCL_EXPORT ncclResult_t pncclGroupEnd(void) { return GroupEnd::finish(false, nullptr); }
HETCCL_WEAK_ALIAS(ncclGroupEnd)

HETCCL_EXPORT ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  if (!simInfo) return fail(ncclInvalidArgument, "ncclGroupSimulateEnd: simInfo is NULL");
  if (simInfo->magic != 0x74685283)
    return fail(ncclInvalidArgument, "ncclGroupSimulateEnd: simInfo not set with NCCL_SIM_INFO_INITIALIZER");
  return GroupEnd::finish(true, simInfo);
}
HETCCL_WEAK_ALIAS(ncclGroupSimulateEnd)
