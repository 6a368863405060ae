#include "transport/ucx/ucx_api.h"

#include <dlfcn.h>

#include <mutex>

#include "common/log.h"
#include "common/params.h"
#include "runtime/dynamic_library.h"

namespace hetccl {

namespace {

struct LoadedUcx {
  UcxApi api;
  std::string why;  // empty when usable
};

// Binds every entry; false (and *why) when one is missing.
bool bind(const DynamicLibrary& lib, UcxApi* api, std::string* why) {
  bool ok = true;
  ok &= lib.bind(&api->configRead, "ucp_config_read", why);
  ok &= lib.bind(&api->configRelease, "ucp_config_release", why);
  ok &= lib.bind(&api->initVersion, "ucp_init_version", why);
  ok &= lib.bind(&api->workerCreate, "ucp_worker_create", why);
  ok &= lib.bind(&api->workerDestroy, "ucp_worker_destroy", why);
  ok &= lib.bind(&api->workerGetAddress, "ucp_worker_get_address", why);
  ok &= lib.bind(&api->workerReleaseAddress, "ucp_worker_release_address", why);
  ok &= lib.bind(&api->workerProgress, "ucp_worker_progress", why);
  ok &= lib.bind(&api->epCreate, "ucp_ep_create", why);
  ok &= lib.bind(&api->epCloseNbx, "ucp_ep_close_nbx", why);
  ok &= lib.bind(&api->tagSendNbx, "ucp_tag_send_nbx", why);
  ok &= lib.bind(&api->tagRecvNbx, "ucp_tag_recv_nbx", why);
  ok &= lib.bind(&api->tagRecvRequestTest, "ucp_tag_recv_request_test", why);
  ok &= lib.bind(&api->requestCheckStatus, "ucp_request_check_status", why);
  ok &= lib.bind(&api->requestCancel, "ucp_request_cancel", why);
  ok &= lib.bind(&api->requestFree, "ucp_request_free", why);
  ok &= lib.bind(&api->statusString, "ucs_status_string", why);
  if (!ok) *why = params().ucxLib + " lacks " + *why + " (UCX older than 1.10?)";
  return ok;
}

LoadedUcx load() {
  LoadedUcx out;
  const std::string& name = params().ucxLib;
  DynamicLibrary lib = DynamicLibrary::open(name, RTLD_NOW | RTLD_LOCAL, &out.why);
  if (!lib.loaded()) {
    out.why = "cannot load " + name + " (HETCCL_UCX_LIB): " + out.why;
    return out;
  }
  if (!bind(lib, &out.api, &out.why)) return out;
  ucp_config_t* config = nullptr;
  ucs_status_t s = out.api.configRead(nullptr, nullptr, &config);  // UCX_* variables
  if (s != UCS_OK) {
    out.why = std::string("ucp_config_read: ") + out.api.statusString(s);
    return out;
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG;
  params.mt_workers_shared = 1;  // each communicator lane has a worker, driven by its own thread
  s = out.api.initVersion(UCP_API_MAJOR, UCP_API_MINOR, &params, config, &out.api.context);
  out.api.configRelease(config);
  if (s != UCS_OK) {
    out.why = std::string("ucp_init: ") + out.api.statusString(s);
    return out;
  }
  lib.release();  // stays loaded with the context until exit
  HETCCL_INFO("UCX loaded (%s, built against API %d.%d)", name.c_str(), UCP_API_MAJOR, UCP_API_MINOR);
  return out;
}

}  // namespace

const UcxApi* ucxApi(std::string* why) {
  static std::once_flag once;
  static LoadedUcx* loaded = nullptr;  // never freed: see the header
  std::call_once(once, [] { loaded = new LoadedUcx(load()); });
  if (!loaded->why.empty()) {
    if (why) *why = loaded->why;
    return nullptr;
  }
  return &loaded->api;
}

}  // namespace hetccl
