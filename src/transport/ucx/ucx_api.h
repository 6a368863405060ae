// UCX (openucx.org), loaded at run time for the UCX transport
// (ucx_transport.cc): the UCP entry points it uses, bound from libucp.so.0
// (HETCCL_UCX_LIB) with dlopen, and the process's one UCP context. The types and signatures
// come from UCX's own header (libucx-dev), so a table entry that does not
// match UCX's declaration does not compile; nothing links against UCX, so
// libhetccl.so starts where UCX is not installed.
#pragma once

#include <ucp/api/ucp.h>

#include <string>

namespace hetccl {

struct UcxApi {
  decltype(&ucp_config_read) configRead = nullptr;
  decltype(&ucp_config_release) configRelease = nullptr;
  decltype(&ucp_init_version) initVersion = nullptr;
  decltype(&ucp_worker_create) workerCreate = nullptr;
  decltype(&ucp_worker_destroy) workerDestroy = nullptr;
  decltype(&ucp_worker_get_address) workerGetAddress = nullptr;
  decltype(&ucp_worker_release_address) workerReleaseAddress = nullptr;
  decltype(&ucp_worker_progress) workerProgress = nullptr;
  decltype(&ucp_ep_create) epCreate = nullptr;
  decltype(&ucp_ep_close_nbx) epCloseNbx = nullptr;
  decltype(&ucp_tag_send_nbx) tagSendNbx = nullptr;
  decltype(&ucp_tag_recv_nbx) tagRecvNbx = nullptr;
  decltype(&ucp_tag_recv_request_test) tagRecvRequestTest = nullptr;
  decltype(&ucp_request_check_status) requestCheckStatus = nullptr;
  decltype(&ucp_request_cancel) requestCancel = nullptr;
  decltype(&ucp_request_free) requestFree = nullptr;
  decltype(&ucs_status_string) statusString = nullptr;  // libucs, which libucp loads

  ucp_context_h context = nullptr;  // tag matching; workers of several threads share it
};

// The process's UCX, loaded and initialised on the first call (any thread)
// and kept until exit (communicators' workers may outlive any one owner).
// nullptr, with the reason in *why, when UCX cannot be used here.
const UcxApi* ucxApi(std::string* why);

}  // namespace hetccl
