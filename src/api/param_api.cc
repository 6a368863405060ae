// NCCL 2.30's parameter API over hetccl's settings (src/common/params.cc):
// every variable hetccl reads, by its name or the NCCL name it falls back
// to, with the value in effect when the settings were read. Keys hetccl
// does not have go to the vendor library of this process's GPUs where it
// has the call (NCCL 2.30 or later): its own parameters, through its own
// handles wrapped in hetccl's. Handles and returned strings belong to the
// library; strings stay valid until the same call on the same thread.
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "api/api_util.h"
#include "common/params.h"
#include "core/init.h"
#include "runtime/runtime.h"

using namespace hetccl;

struct ncclParamHandle {
  std::string key;
  bool own = false;                  // one of hetccl's settings
  ncclParamHandle_t vendor = nullptr;  // else the vendor library's handle
  VendorLibrary* lib = nullptr;
};

namespace {

std::mutex gHandlesMutex;
std::map<std::string, ncclParamHandle> gHandles;  // by key, for the process's life (map nodes never move)

// The vendor library of this process's GPUs when it has the call, else null.
template <typename F>
VendorLibrary* vendorWith(F VendorApi::*entry) {
  Runtime& rt = processRuntime();
  if (!rt.hasDevices()) return nullptr;
  VendorLibrary* lib = vendorLibraryFor(rt, nullptr);
  return lib && lib->api().*entry ? lib : nullptr;
}

ncclResult_t checkHandle(ncclParamHandle_t h, const void* out, const char* caller) {
  if (!h) return fail(ncclInvalidArgument, "%s: handle is NULL", caller);
  if (!out) return fail(ncclInvalidArgument, "%s: out is NULL", caller);
  std::lock_guard<std::mutex> lock(gHandlesMutex);
  for (const auto& [key, handle] : gHandles)
    if (&handle == h) return ncclSuccess;
  return fail(ncclInvalidArgument, "%s: not a handle from ncclParamBind", caller);
}

// A setting's value as an integer of type T: the whole value, in range.
template <typename T>
ncclResult_t ownInteger(const ncclParamHandle& h, T* out, const char* caller) {
  std::string v;
  settingValue(h.key.c_str(), &v);
  if (v.empty())
    return fail(ncclInvalidArgument, "%s: %s has no value (hetccl decides it at run time)", caller, h.key.c_str());
  char* end = nullptr;
  errno = 0;
  bool fits = false;
  if constexpr (std::is_signed_v<T>) {
    const long long x = strtoll(v.c_str(), &end, 0);
    fits = x >= std::numeric_limits<T>::min() && x <= std::numeric_limits<T>::max();
    *out = static_cast<T>(x);
  } else {
    const unsigned long long x = strtoull(v.c_str(), &end, 0);
    fits = v[0] != '-' && x <= std::numeric_limits<T>::max();
    *out = static_cast<T>(x);
  }
  if (errno || !end || *end != '\0' || !fits) {
    *out = T{};
    return fail(ncclInvalidArgument, "%s: %s is \"%s\", not an integer of this type", caller, h.key.c_str(), v.c_str());
  }
  return ncclSuccess;
}

template <typename T>
ncclResult_t getInteger(ncclParamHandle_t h, T* out, ncclResult_t (*VendorApi::*entry)(ncclParamHandle_t, T*),
                        const char* caller) {
  HETCCL_TRY(checkHandle(h, out, caller));
  if (h->own) return ownInteger(*h, out, caller);
  return h->lib->check((h->lib->api().*entry)(h->vendor, out), caller);
}

// What ncclParamGetStr and ncclParamGetParameter return: each valid until
// the same call again on the same thread.
thread_local std::string tStrValue, tParameterValue;
thread_local std::vector<const char*> tKeys;
thread_local std::vector<std::string> tKeyStore;

}  // namespace

HETCCL_EXPORT ncclResult_t pncclParamBind(ncclParamHandle_t* out, const char* key) {
  if (!out) return fail(ncclInvalidArgument, "ncclParamBind: out is NULL");
  if (!key) return fail(ncclInvalidArgument, "ncclParamBind: key is NULL");
  std::string ignored;
  ncclParamHandle made{key};
  if (settingValue(key, &ignored)) {
    made.own = true;
  } else if (VendorLibrary* lib = vendorWith(&VendorApi::paramBind)) {
    HETCCL_TRY(lib->check(lib->api().paramBind(&made.vendor, key), "ncclParamBind"));
    made.lib = lib;
  } else {
    return fail(ncclInvalidArgument, "ncclParamBind: no parameter named %s (hetccl's are its variables' names: "
                "hetccl-info --settings)", key);
  }
  std::lock_guard<std::mutex> lock(gHandlesMutex);
  *out = &gHandles.try_emplace(key, std::move(made)).first->second;
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclParamBind)

#define HETCCL_PARAM_GET_INTEGER(Name, T)                                                     \
  HETCCL_EXPORT ncclResult_t pncclParamGet##Name(ncclParamHandle_t h, T* out) {               \
    return getInteger<T>(h, out, &VendorApi::paramGet##Name, "ncclParamGet" #Name);            \
  }                                                                                           \
  HETCCL_WEAK_ALIAS(ncclParamGet##Name)
HETCCL_PARAM_GET_INTEGER(I8, int8_t)
HETCCL_PARAM_GET_INTEGER(I16, int16_t)
HETCCL_PARAM_GET_INTEGER(I32, int32_t)
HETCCL_PARAM_GET_INTEGER(I64, int64_t)
HETCCL_PARAM_GET_INTEGER(U8, uint8_t)
HETCCL_PARAM_GET_INTEGER(U16, uint16_t)
HETCCL_PARAM_GET_INTEGER(U32, uint32_t)
HETCCL_PARAM_GET_INTEGER(U64, uint64_t)
#undef HETCCL_PARAM_GET_INTEGER

HETCCL_EXPORT ncclResult_t pncclParamGetStr(ncclParamHandle_t h, const char** out) {
  HETCCL_TRY(checkHandle(h, out, "ncclParamGetStr"));
  if (!h->own) return h->lib->check(h->lib->api().paramGetStr(h->vendor, out), "ncclParamGetStr");
  settingValue(h->key.c_str(), &tStrValue);
  *out = tStrValue.c_str();
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclParamGetStr)

// The value's bytes with their terminating zero; *len says how many, also
// when maxLen is too small (then ncclInvalidArgument).
HETCCL_EXPORT ncclResult_t pncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len) {
  HETCCL_TRY(checkHandle(h, out, "ncclParamGet"));
  if (!len) return fail(ncclInvalidArgument, "ncclParamGet: len is NULL");
  if (!h->own) return h->lib->check(h->lib->api().paramGet(h->vendor, out, maxLen, len), "ncclParamGet");
  std::string v;
  settingValue(h->key.c_str(), &v);
  *len = static_cast<int>(v.size() + 1);
  if (maxLen < *len)
    return fail(ncclInvalidArgument, "ncclParamGet: %s needs %d bytes, maxLen is %d", h->key.c_str(), *len, maxLen);
  memcpy(out, v.c_str(), v.size() + 1);
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclParamGet)

HETCCL_EXPORT ncclResult_t pncclParamGetParameter(const char* key, const char** value, int* valueLen) {
  if (!key || !value || !valueLen) return fail(ncclInvalidArgument, "ncclParamGetParameter: key, value or valueLen is NULL");
  if (settingValue(key, &tParameterValue)) {
    *value = tParameterValue.c_str();
    *valueLen = static_cast<int>(tParameterValue.size());
    return ncclSuccess;
  }
  if (VendorLibrary* lib = vendorWith(&VendorApi::paramGetParameter))
    return lib->check(lib->api().paramGetParameter(key, value, valueLen), "ncclParamGetParameter");
  return fail(ncclInvalidArgument, "ncclParamGetParameter: no parameter named %s", key);
}
HETCCL_WEAK_ALIAS(ncclParamGetParameter)

HETCCL_EXPORT ncclResult_t pncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  if (!table || !tableLen) return fail(ncclInvalidArgument, "ncclParamGetAllParameterKeys: table or tableLen is NULL");
  tKeyStore.clear();
  tKeys = settingKeys();
  if (VendorLibrary* lib = vendorWith(&VendorApi::paramGetAllParameterKeys)) {
    const char** theirs = nullptr;
    int n = 0;
    HETCCL_TRY(lib->check(lib->api().paramGetAllParameterKeys(&theirs, &n), "ncclParamGetAllParameterKeys"));
    std::string ignored;
    for (int i = 0; i < n; ++i)
      if (theirs[i] && !settingValue(theirs[i], &ignored)) tKeyStore.emplace_back(theirs[i]);
    for (const std::string& k : tKeyStore) tKeys.push_back(k.c_str());
  }
  *table = tKeys.data();
  *tableLen = static_cast<int>(tKeys.size());
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclParamGetAllParameterKeys)

// Every hetccl setting, one "key=value" line each, where hetccl logs
// (NCCL_DEBUG_FILE, else stderr); then the vendor library's own dump.
HETCCL_EXPORT void pncclParamDumpAll() {
  FILE* to = params().debugFile ? params().debugFile : stderr;
  std::string v;
  for (const char* key : settingKeys()) {
    settingValue(key, &v);
    fprintf(to, "hetccl parameter %s=%s\n", key, v.c_str());
  }
  fflush(to);
  if (VendorLibrary* lib = vendorWith(&VendorApi::paramDumpAll)) lib->api().paramDumpAll();
}
HETCCL_WEAK_ALIAS(ncclParamDumpAll)
