#include "transport/verbs/verbs_api.h"

#include <dlfcn.h>

#include <mutex>
#include <type_traits>

#include "common/params.h"
#include "runtime/dynamic_library.h"

namespace hetccl {

namespace {

// The optional entry points, as rdma-core's header declares them.
static_assert(std::is_same<decltype(VerbsApi::regMrIova2), decltype(&::ibv_reg_mr_iova2)>::value, "ibv_reg_mr_iova2");
static_assert(std::is_same<decltype(VerbsApi::regDmabufMr), decltype(&::ibv_reg_dmabuf_mr)>::value, "ibv_reg_dmabuf_mr");

struct LoadedVerbs {
  VerbsApi api{};
  std::string why;  // empty when usable
};

bool bind(const DynamicLibrary& lib, VerbsApi* api, std::string* why) {
  bool ok = true;
  ok &= lib.bind(&api->getDeviceList, "ibv_get_device_list", why);
  ok &= lib.bind(&api->freeDeviceList, "ibv_free_device_list", why);
  ok &= lib.bind(&api->getDeviceName, "ibv_get_device_name", why);
  ok &= lib.bind(&api->openDevice, "ibv_open_device", why);
  ok &= lib.bind(&api->closeDevice, "ibv_close_device", why);
  ok &= lib.bind(&api->queryDevice, "ibv_query_device", why);
  ok &= lib.bind(&api->queryPort, "ibv_query_port", why);
  ok &= lib.bind(&api->queryGid, "ibv_query_gid", why);
  ok &= lib.bind(&api->allocPd, "ibv_alloc_pd", why);
  ok &= lib.bind(&api->deallocPd, "ibv_dealloc_pd", why);
  ok &= lib.bind(&api->regMr, "ibv_reg_mr", why);
  lib.bind(&api->regMrIova2, "ibv_reg_mr_iova2", nullptr);    // optional
  lib.bind(&api->regDmabufMr, "ibv_reg_dmabuf_mr", nullptr);  // optional
  ok &= lib.bind(&api->deregMr, "ibv_dereg_mr", why);
  ok &= lib.bind(&api->createCq, "ibv_create_cq", why);
  ok &= lib.bind(&api->destroyCq, "ibv_destroy_cq", why);
  ok &= lib.bind(&api->createQp, "ibv_create_qp", why);
  ok &= lib.bind(&api->modifyQp, "ibv_modify_qp", why);
  ok &= lib.bind(&api->destroyQp, "ibv_destroy_qp", why);
  ok &= lib.bind(&api->wcStatusString, "ibv_wc_status_str", why);
  if (!ok) *why = params().ibLib + " lacks " + *why;
  return ok;
}

LoadedVerbs load() {
  LoadedVerbs out;
  const std::string& name = params().ibLib;
  DynamicLibrary lib = DynamicLibrary::open(name, RTLD_NOW | RTLD_LOCAL, &out.why);
  if (!lib.loaded()) {
    out.why = "cannot load " + name + " (HETCCL_IB_LIB; install rdma-core's libibverbs1): " + out.why;
    return out;
  }
  if (!bind(lib, &out.api, &out.why)) return out;
  lib.release();  // verbs objects live until exit
  return out;
}

}  // namespace

const VerbsApi* verbsApi(std::string* why) {
  static std::once_flag once;
  static LoadedVerbs* loaded = nullptr;  // never freed, as the library stays loaded
  std::call_once(once, [] { loaded = new LoadedVerbs(load()); });
  if (!loaded->why.empty()) {
    if (why) *why = loaded->why;
    return nullptr;
  }
  return &loaded->api;
}

}  // namespace hetccl
