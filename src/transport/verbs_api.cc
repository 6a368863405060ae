#include "transport/verbs_api.h"

#include <dlfcn.h>

#include <mutex>
#include <type_traits>

#include "common/params.h"
#include "runtime/dynamic_library.h"

namespace hetccl {

namespace {

struct LoadedVerbs {
  VerbsApi api{};
  std::string why;  // empty when usable
};

bool bind(const DynamicLibrary& lib, VerbsApi* api, std::string* why) {
  bool ok = true;
  auto one = [&](auto* slot, const char* name, bool required = true) {
    *slot = reinterpret_cast<std::remove_pointer_t<decltype(slot)>>(lib.symbol(name));
    if (!*slot && required) {
      *why += std::string(why->empty() ? "" : ", ") + name;
      ok = false;
    }
  };
  one(&api->getDeviceList, "ibv_get_device_list");
  one(&api->freeDeviceList, "ibv_free_device_list");
  one(&api->getDeviceName, "ibv_get_device_name");
  one(&api->openDevice, "ibv_open_device");
  one(&api->closeDevice, "ibv_close_device");
  one(&api->queryDevice, "ibv_query_device");
  one(&api->queryPort, "ibv_query_port");
  one(&api->queryGid, "ibv_query_gid");
  one(&api->allocPd, "ibv_alloc_pd");
  one(&api->deallocPd, "ibv_dealloc_pd");
  one(&api->regMr, "ibv_reg_mr");
  one(&api->regDmabufMr, "ibv_reg_dmabuf_mr", false);
  one(&api->deregMr, "ibv_dereg_mr");
  one(&api->createCq, "ibv_create_cq");
  one(&api->destroyCq, "ibv_destroy_cq");
  one(&api->createQp, "ibv_create_qp");
  one(&api->modifyQp, "ibv_modify_qp");
  one(&api->destroyQp, "ibv_destroy_qp");
  one(&api->wcStatusString, "ibv_wc_status_str");
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
