#include "transport/ucx/ucx_worker.h"

#include "common/error.h"
#include "common/log.h"
#include "common/params.h"

namespace hetccl {

ncclResult_t UcxWorker::create(const UcxApi& api, std::unique_ptr<UcxWorker>* out) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  ucp_worker_h w = nullptr;
  ucs_status_t s = api.workerCreate(api.context, &params, &w);
  if (s != UCS_OK) return fail(ncclSystemError, "ucp_worker_create: %s", api.statusString(s));
  auto made = std::unique_ptr<UcxWorker>(new UcxWorker(api, w));
  s = api.workerGetAddress(w, &made->address_, &made->addressBytes_);
  if (s != UCS_OK) return fail(ncclSystemError, "ucp_worker_get_address: %s", api.statusString(s));
  *out = std::move(made);
  return ncclSuccess;
}

UcxWorker::~UcxWorker() {
  if (address_) api_.workerReleaseAddress(worker_, address_);
  if (undestroyed_) {
    HETCCL_WARN("UCX: an endpoint or request did not end in time; its worker is left as it is");
    return;
  }
  api_.workerDestroy(worker_);
}

bool UcxWorker::progress() const {
  bool any = false;
  for (int i = 0; i < 16 && api_.workerProgress(worker_) != 0; ++i) any = true;
  return any;
}

void UcxWorker::release(void* request) const {
  if (!request) return;
  if (api_.requestCheckStatus(request) == UCS_INPROGRESS) leaveUndestroyed();
  api_.requestFree(request);
}

ncclResult_t sendUcxAddress(const Socket& line, const UcxWorker& worker, const Deadline& deadline, const AbortFlag* abort) {
  const uint32_t bytes = static_cast<uint32_t>(worker.addressBytes());
  HETCCL_TRY(line.sendAll(&bytes, sizeof bytes, deadline, abort));
  return line.sendAll(worker.address(), bytes, deadline, abort);
}

ncclResult_t createUcxEndpoint(const UcxApi& api, const UcxWorker& worker, const void* address, bool sameHost,
                               ucp_err_handler_cb_t onError, void* arg, int peer, ucp_ep_h* out) {
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.address = static_cast<const ucp_address_t*>(address);
  const UcxErrorMode mode = params().ucxErrorMode;
  const bool peerMode = mode == UcxErrorMode::Peer || (mode == UcxErrorMode::Auto && !sameHost);
  ep.err_mode = peerMode ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  ep.err_handler.cb = onError;
  ep.err_handler.arg = arg;
  *out = nullptr;
  const ucs_status_t s = api.epCreate(worker.handle(), &ep, out);
  if (s != UCS_OK) {
    *out = nullptr;
    return fail(ncclSystemError, "UCX cannot reach rank %d (ucp_ep_create: %s)", peer, api.statusString(s));
  }
  return ncclSuccess;
}

void closeUcxEndpoint(const UcxApi& api, const UcxWorker& worker, ucp_ep_h ep, bool force) {
  if (!ep) return;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  ucs_status_ptr_t p = api.epCloseNbx(ep, &param);
  if (p == nullptr || UCS_PTR_IS_ERR(p)) return;
  const Deadline deadline(2.0);
  while (api.requestCheckStatus(p) == UCS_INPROGRESS && !deadline.expired()) worker.progress();
  worker.release(p);
}

}  // namespace hetccl
