// NCCL 2.30's one-sided calls: a put into a peer's registered window
// followed by a signal, a signal alone, and a stream-ordered wait for
// signals. A communicator of one GPU vendor's domain (pass-through) hands
// them to the vendor library with the vendor's own window (the window
// calls give the application the vendor's handle there); NCCL 2.30 or
// later has them, an older library gets a clear ncclInvalidUsage naming
// it. hetccl's own communicators run them on their one-sided engine
// (src/plan/one_sided/one_sided.h).
#include <cstdint>
#include <span>

#include "api/api_util.h"
#include "common/types.h"
#include "plan/one_sided/one_sided.h"

using namespace hetccl;

namespace {

// hetccl's own communicator: its one-sided engine, unless it is suspended
// or its flags are set (NCCL reserves them).
ncclResult_t ownEngine(Communicator& c, unsigned flags, const char* caller, OneSided** out) {
  if (c.suspended.load())
    return fail(ncclInvalidUsage, "%s: the communicator is suspended (ncclCommSuspend): ncclCommResume it first", caller);
  if (flags) return fail(ncclInvalidArgument, "%s: flags 0x%x are reserved by NCCL (pass 0)", caller, flags);
  return routerOf(c).oneSided(out);
}

ncclResult_t checkPeer(const Communicator& c, int peer, const char* caller) {
  if (peer < 0 || peer >= c.nranks)
    return fail(ncclInvalidArgument, "%s: peer %d is not a rank of this communicator (0..%d)", caller, peer,
                c.nranks - 1);
  return ncclSuccess;
}

ncclResult_t checkSignal(int sigIdx, int ctx, const char* caller) {
  if (sigIdx < 0) return fail(ncclInvalidArgument, "%s: signal index %d is negative", caller, sigIdx);
  if (ctx < 0) return fail(ncclInvalidArgument, "%s: context %d is negative", caller, ctx);
  return ncclSuccess;
}

}  // namespace

HETCCL_EXPORT ncclResult_t pncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                                          ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                                          unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclPutSignal", &c));
  if (!validType(datatype)) return fail(ncclInvalidArgument, "ncclPutSignal: invalid data type %d", static_cast<int>(datatype));
  if (!localbuff && count) return fail(ncclInvalidArgument, "ncclPutSignal: localbuff is NULL");
  if (!peerWin) return fail(ncclInvalidArgument, "ncclPutSignal: peerWin is NULL");
  HETCCL_TRY(checkPeer(*c, peer, "ncclPutSignal"));
  HETCCL_TRY(checkSignal(sigIdx, ctx, "ncclPutSignal"));
  if (!vendorOf(*c)) {
    uint64_t window = 0;
    if (oneSidedWindow(c, peerWin, &window) != ncclSuccess)
      return fail(ncclInvalidArgument, "ncclPutSignal: peerWin is not a window of this communicator");
    const size_t es = typeSize(datatype);
    if (count > (size_t(1) << 62) / es)
      return fail(ncclInvalidArgument, "ncclPutSignal: count %zu of %s overflows the buffer size", count,
                  typeName(datatype));
    OneSided* engine = nullptr;
    HETCCL_TRY(ownEngine(*c, flags, "ncclPutSignal", &engine));
    return engine->put(localbuff, count * es, peer, window, peerWinOffset, sigIdx, ctx, stream);
  }
  VendorCommunicator* vendor = nullptr;
  HETCCL_TRY(passThroughEntry(*c, &VendorApi::putSignal, "ncclPutSignal", "2.30", "", &vendor));
  VendorLibrary& lib = vendor->library();
  return lib.check(lib.api().putSignal(localbuff, count, datatype, peer, peerWin, peerWinOffset, sigIdx, ctx, flags,
                                       vendor->handle(), stream),
                   "ncclPutSignal", vendor->handle());
}
HETCCL_WEAK_ALIAS(ncclPutSignal)

HETCCL_EXPORT ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                                       cudaStream_t stream) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclSignal", &c));
  HETCCL_TRY(checkPeer(*c, peer, "ncclSignal"));
  HETCCL_TRY(checkSignal(sigIdx, ctx, "ncclSignal"));
  if (!vendorOf(*c)) {
    OneSided* engine = nullptr;
    HETCCL_TRY(ownEngine(*c, flags, "ncclSignal", &engine));
    return engine->signal(peer, sigIdx, ctx, stream);
  }
  VendorCommunicator* vendor = nullptr;
  HETCCL_TRY(passThroughEntry(*c, &VendorApi::signal, "ncclSignal", "2.30", "", &vendor));
  VendorLibrary& lib = vendor->library();
  return lib.check(lib.api().signal(peer, sigIdx, ctx, flags, vendor->handle(), stream), "ncclSignal",
                   vendor->handle());
}
HETCCL_WEAK_ALIAS(ncclSignal)

HETCCL_EXPORT ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                                           cudaStream_t stream) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclWaitSignal", &c));
  if (nDesc < 0) return fail(ncclInvalidArgument, "ncclWaitSignal: nDesc %d is negative", nDesc);
  if (nDesc > 0 && !signalDescs) return fail(ncclInvalidArgument, "ncclWaitSignal: signalDescs is NULL");
  for (int i = 0; i < nDesc; ++i) {
    const ncclWaitSignalDesc_t& d = signalDescs[i];
    if (d.opCnt < 0) return fail(ncclInvalidArgument, "ncclWaitSignal: descriptor %d waits for %d signals", i, d.opCnt);
    HETCCL_TRY(checkPeer(*c, d.peer, "ncclWaitSignal"));
    HETCCL_TRY(checkSignal(d.sigIdx, d.ctx, "ncclWaitSignal"));
  }
  if (!vendorOf(*c)) {
    OneSided* engine = nullptr;
    HETCCL_TRY(ownEngine(*c, 0, "ncclWaitSignal", &engine));
    return engine->wait(std::span<const ncclWaitSignalDesc_t>(signalDescs, static_cast<size_t>(nDesc)), stream);
  }
  VendorCommunicator* vendor = nullptr;
  HETCCL_TRY(passThroughEntry(*c, &VendorApi::waitSignal, "ncclWaitSignal", "2.30", "", &vendor));
  VendorLibrary& lib = vendor->library();
  return lib.check(lib.api().waitSignal(nDesc, signalDescs, vendor->handle(), stream), "ncclWaitSignal",
                   vendor->handle());
}
HETCCL_WEAK_ALIAS(ncclWaitSignal)
