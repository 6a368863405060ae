#include "library/vendor_library.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "common/params.h"
#include "runtime/runtime.h"

namespace hetccl {

namespace {

struct Binding {
  size_t slot;         // offset in VendorApi
  const char* names;   // alternatives, '|'-separated (NCCL's spelling first, then RCCL's)
  bool required;
};

#define SLOT(member) offsetof(VendorApi, member)
const Binding kBindings[] = {
    {SLOT(getVersion), "ncclGetVersion", true},
    {SLOT(getErrorString), "ncclGetErrorString", true},
    {SLOT(getLastError), "ncclGetLastError", false},
    {SLOT(getUniqueId), "ncclGetUniqueId", true},
    {SLOT(commInitRank), "ncclCommInitRank", true},
    {SLOT(commInitRankConfig), "ncclCommInitRankConfig", false},
    {SLOT(commFinalize), "ncclCommFinalize", false},
    {SLOT(commDestroy), "ncclCommDestroy", true},
    {SLOT(commAbort), "ncclCommAbort", true},
    {SLOT(commGetAsyncError), "ncclCommGetAsyncError", true},
    {SLOT(allReduce), "ncclAllReduce", true},
    {SLOT(broadcast), "ncclBroadcast", true},
    {SLOT(reduce), "ncclReduce", true},
    {SLOT(allGather), "ncclAllGather", true},
    {SLOT(reduceScatter), "ncclReduceScatter", true},
    {SLOT(alltoAll), "ncclAlltoAll|ncclAllToAll", false},
    {SLOT(gather), "ncclGather", false},
    {SLOT(scatter), "ncclScatter", false},
    {SLOT(send), "ncclSend", true},
    {SLOT(recv), "ncclRecv", true},
    {SLOT(groupStart), "ncclGroupStart", true},
    {SLOT(groupEnd), "ncclGroupEnd", true},
    {SLOT(redOpCreatePreMulSum), "ncclRedOpCreatePreMulSum", true},
    {SLOT(redOpDestroy), "ncclRedOpDestroy", true},
    {SLOT(bcast), "ncclBcast", false},
    {SLOT(memAlloc), "ncclMemAlloc", false},
    {SLOT(memFree), "ncclMemFree", false},
    {SLOT(commRegister), "ncclCommRegister", false},
    {SLOT(commDeregister), "ncclCommDeregister", false},
    {SLOT(commWindowRegister), "ncclCommWindowRegister", false},
    {SLOT(commWindowDeregister), "ncclCommWindowDeregister", false},
    {SLOT(devCommCreate), "ncclDevCommCreate", false},
    {SLOT(devCommDestroy), "ncclDevCommDestroy", false},
    {SLOT(teamWorld), "ncclTeamWorld", false},
    {SLOT(teamLsa), "ncclTeamLsa", false},
    {SLOT(teamRail), "ncclTeamRail", false},
    {SLOT(teamRankToWorld), "ncclTeamRankToWorld", false},
    {SLOT(teamRankToLsa), "ncclTeamRankToLsa", false},
    {SLOT(llA2ACalcSlots), "ncclLLA2ACalcSlots", false},
    {SLOT(llA2ACreateRequirement), "ncclLLA2ACreateRequirement", false},
    {SLOT(lsaBarrierCreateRequirement), "ncclLsaBarrierCreateRequirement", false},
    {SLOT(ginBarrierCreateRequirement), "ncclGinBarrierCreateRequirement", false},
    {SLOT(commSuspend), "ncclCommSuspend", false},
    {SLOT(commResume), "ncclCommResume", false},
    {SLOT(commMemStats), "ncclCommMemStats", false},
    {SLOT(putSignal), "ncclPutSignal", false},
    {SLOT(signal), "ncclSignal", false},
    {SLOT(waitSignal), "ncclWaitSignal", false},
    {SLOT(paramBind), "ncclParamBind", false},
    {SLOT(paramGetI8), "ncclParamGetI8", false},
    {SLOT(paramGetI16), "ncclParamGetI16", false},
    {SLOT(paramGetI32), "ncclParamGetI32", false},
    {SLOT(paramGetI64), "ncclParamGetI64", false},
    {SLOT(paramGetU8), "ncclParamGetU8", false},
    {SLOT(paramGetU16), "ncclParamGetU16", false},
    {SLOT(paramGetU32), "ncclParamGetU32", false},
    {SLOT(paramGetU64), "ncclParamGetU64", false},
    {SLOT(paramGetStr), "ncclParamGetStr", false},
    {SLOT(paramGet), "ncclParamGet", false},
    {SLOT(paramGetParameter), "ncclParamGetParameter", false},
    {SLOT(paramGetAllParameterKeys), "ncclParamGetAllParameterKeys", false},
    {SLOT(paramDumpAll), "ncclParamDumpAll", false},
};
#undef SLOT

bool isHetccl(void* handle) { return dlsym(handle, "hetcclVersionString") != nullptr; }

// The file a loaded library came from.
std::string loadedPath(void* handle) {
  struct link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name) return {};
  return map->l_name;
}

// Libraries of this process whose file name contains `stem` (for an
// application that loaded NCCL from its own directory, like PyTorch).
std::vector<std::string> loadedLibrariesNamed(const char* stem) {
  std::vector<std::string> found;
  struct Search {
    const char* stem;
    std::vector<std::string>* found;
  } search{stem, &found};
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        if (info->dlpi_name && strstr(info->dlpi_name, s->stem)) s->found->push_back(info->dlpi_name);
        return 0;
      },
      &search);
  return found;
}

// The folder for private copies: HETCCL_CACHE_DIR, else
// $XDG_CACHE_HOME/hetccl, else ~/.cache/hetccl; created 0700. Empty if it
// cannot be used safely (not ours, or writable by others).
std::string cacheDirectory() {
  std::string dir = params().cacheDir;
  if (dir.empty()) {
    if (const char* x = getenv("XDG_CACHE_HOME"); x && *x) dir = std::string(x) + "/hetccl";
    else if (const char* h = getenv("HOME"); h && *h) dir = std::string(h) + "/.cache/hetccl";
    else return {};
  }
  for (size_t at = 1; at != std::string::npos; at = dir.find('/', at + 1))
    mkdir(dir.substr(0, at).c_str(), 0700);
  mkdir(dir.c_str(), 0700);
  struct stat st{};
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 022)) return {};
  return dir;
}

// Copies `src` into `dst` (a descriptor); true when complete.
bool copyFile(int src, int dst, off_t size) {
  off_t offset = 0;
  while (offset < size) {
    const ssize_t n = sendfile(dst, src, &offset, static_cast<size_t>(size - offset));
    if (n <= 0) return false;
  }
  return true;
}

// A private copy of `path`: a second file (a new inode, so the loader maps
// a second instance) opened with RTLD_DEEPBIND. Kept in the cache folder so
// the processes of a job share its pages (made once, by an atomic rename);
// an in-memory file where no cache folder can be used. nullptr and *why
// on failure; *copyPath says where the copy lives.
void* loadPrivateCopy(const std::string& path, std::string* why, std::string* copyPath) {
  const int src = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st{};
  if (src < 0 || fstat(src, &st) != 0) {
    if (src >= 0) close(src);
    *why += "; cannot read " + path;
    return nullptr;
  }
  void* handle = nullptr;
  if (const std::string dir = cacheDirectory(); !dir.empty()) {
    const std::string base = path.substr(path.rfind('/') + 1);
    char key[96];
    snprintf(key, sizeof(key), "%lx-%lx-%lx-%lx", static_cast<unsigned long>(st.st_dev),
             static_cast<unsigned long>(st.st_ino), static_cast<unsigned long>(st.st_size),
             static_cast<unsigned long>(st.st_mtime));
    const std::string target = dir + "/private-" + key + "-" + base;
    struct stat have{};
    const bool ready = stat(target.c_str(), &have) == 0 && have.st_size == st.st_size && have.st_uid == getuid() &&
                       !(have.st_mode & 022);
    if (!ready) {
      std::string temp = target + ".XXXXXX";
      const int out = mkstemp(temp.data());
      if (out >= 0) {
        const bool ok = copyFile(src, out, st.st_size) && fchmod(out, 0500) == 0;
        close(out);
        if (!ok || rename(temp.c_str(), target.c_str()) != 0) unlink(temp.c_str());
      }
    }
    handle = dlopen(target.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle) *copyPath = target;
  }
  if (!handle) {
    const int copy = memfd_create("hetccl-vendor-library", MFD_CLOEXEC);
    lseek(src, 0, SEEK_SET);
    if (copy >= 0 && copyFile(src, copy, st.st_size)) {
      const std::string fdPath = "/proc/self/fd/" + std::to_string(copy);
      handle = dlopen(fdPath.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (handle) *copyPath = "memory";
      else *why += std::string("; private copy of ") + path + ": " + dlerror();
    } else {
      *why += "; cannot copy " + path + " into memory";
    }
    if (copy >= 0) close(copy);  // the mapping outlives the descriptor
  }
  close(src);
  return handle;
}

std::mutex gMutex;
std::vector<VendorLibrary*> gLoaded;

}  // namespace

bool VendorLibrary::load(const std::string& configured, std::string* why) {
  std::vector<std::string> candidates;
  if (!configured.empty()) candidates.push_back(configured);
  const bool isNccl = strcmp(name_, "nccl") == 0;
  const char* soname = isNccl ? "libnccl.so.2" : "librccl.so.1";
  candidates.push_back(soname);
  for (const std::string& p : loadedLibrariesNamed(isNccl ? "libnccl.so" : "librccl.so")) candidates.push_back(p);
  if (isNccl) {
    for (const char* p : {"/usr/lib/x86_64-linux-gnu/libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2",
                          "/usr/lib64/libnccl.so.2"})
      candidates.push_back(p);
  } else {
    for (const char* p : {"librccl.so", "/opt/rocm/lib/librccl.so.1", "/opt/rocm/lib/librccl.so"}) candidates.push_back(p);
  }
  const bool isolate = params().vendorIsolation;
  for (const std::string& candidate : candidates) {
    if (!isolate) {  // a plain dlopen, for testing the self-check below
      handle_ = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!handle_ || isHetccl(handle_)) {
        handle_ = nullptr;
        continue;
      }
      path_ = loadedPath(handle_);
      break;
    }
    if (void* loaded = dlopen(candidate.c_str(), RTLD_LAZY | RTLD_NOLOAD)) {
      // Already in the process: its calls may be bound to hetccl; use a private copy.
      const bool self = isHetccl(loaded);
      const std::string file = loadedPath(loaded);
      dlclose(loaded);
      if (self || file.empty()) continue;
      handle_ = loadPrivateCopy(file, why, &copyPath_);
      if (!handle_) continue;
      path_ = file;
      privateCopy_ = true;
    } else {
      handle_ = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (!handle_) {
        const char* e = dlerror();
        *why += std::string(why->empty() ? "" : "; ") + (e ? e : candidate.c_str());
        continue;
      }
      if (isHetccl(handle_)) {  // hetccl itself, installed as libnccl.so.2
        dlclose(handle_);
        handle_ = nullptr;
        continue;
      }
      path_ = loadedPath(handle_);
      if (path_.empty()) path_ = candidate;
    }
    break;
  }
  if (!handle_) {
    *why = std::string(name_) + " not found (" + *why + ")";
    return false;
  }
  for (const Binding& b : kBindings) {
    void* f = nullptr;
    std::string names = b.names;
    for (size_t at = 0; !f && at <= names.size();) {
      const size_t bar = names.find('|', at);
      f = dlsym(handle_, names.substr(at, bar == std::string::npos ? std::string::npos : bar - at).c_str());
      if (bar == std::string::npos) break;
      at = bar + 1;
    }
    if (!f && b.required) {
      *why = std::string(name_) + " at " + path_ + " lacks " + b.names;
      return false;
    }
    memcpy(reinterpret_cast<char*>(&api_) + b.slot, &f, sizeof(f));
  }
  api_.getVersion(&version_);
  // Isolation: the vendor's ncclBcast calls its own ncclBroadcast. With a
  // null communicator the vendor refuses it; if hetccl's ncclBroadcast ran
  // instead, it would have left its own error message.
  if (api_.bcast) {
    clearLastError();
    api_.bcast(nullptr, 0, ncclInt8, 0, nullptr, nullptr);
    if (*lastError()) {
      *why = std::string(name_) + " at " + path_ + " calls into hetccl's exported symbols (not isolated): not used";
      clearLastError();
      return false;
    }
    // The vendor keeps this refusal as its last error until another one
    // replaces it: check() must not report it as the cause of a later
    // failure that leaves no text of its own.
    if (api_.getLastError && api_.getLastError(nullptr)) probeError_ = api_.getLastError(nullptr);
  }
  return true;
}

VendorLibrary* VendorLibrary::instance(const char* name, const std::string& configured, std::string* why) {
  struct Tried {
    std::string name;
    VendorLibrary* library;
    std::string why;
  };
  static std::mutex mutex;
  static std::vector<Tried> tried;
  std::lock_guard<std::mutex> lock(mutex);
  for (const Tried& t : tried)
    if (t.name == name) {
      if (why) *why = t.why;
      return t.library;
    }
  Tried t{name, nullptr, ""};
  if (!params().vendorLibraries) {
    t.why = "vendor libraries are off (HETCCL_VENDOR_LIBS=0)";
  } else {
    auto* lib = new VendorLibrary(name);  // lives until exit, like the library it holds
    if (lib->load(configured, &t.why)) {
      t.library = lib;
      HETCCL_INFO("loaded %s", lib->describe().c_str());
      std::lock_guard<std::mutex> loadedLock(gMutex);
      gLoaded.push_back(lib);
    } else {
      HETCCL_INFO("%s", t.why.c_str());
      delete lib;
    }
  }
  tried.push_back(t);
  if (why) *why = t.why;
  return t.library;
}

VendorLibrary* VendorLibrary::nccl(std::string* why) { return instance("nccl", params().ncclLib, why); }
VendorLibrary* VendorLibrary::rccl(std::string* why) { return instance("rccl", params().rcclLib, why); }

std::vector<VendorLibrary*> VendorLibrary::groupStartAll() {
  std::vector<VendorLibrary*> libs;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    libs = gLoaded;
  }
  for (VendorLibrary* lib : libs) lib->api_.groupStart();
  return libs;
}

ncclResult_t VendorLibrary::groupEnd(const std::vector<VendorLibrary*>& libs) {
  ncclResult_t first = ncclSuccess;
  for (VendorLibrary* lib : libs) {
    const ncclResult_t r = lib->check(lib->api_.groupEnd(), "ncclGroupEnd");
    if (r != ncclSuccess && first == ncclSuccess) first = r;
  }
  return first;
}

std::string VendorLibrary::describe() const {
  return std::string(name_) + " " + std::to_string(version_ / 10000) + "." + std::to_string(version_ / 100 % 100) + "." +
         std::to_string(version_ % 100) + " (" + path_ + (privateCopy_ ? ", private copy in " + copyPath_ : "") + ")";
}

ncclResult_t VendorLibrary::check(ncclResult_t r, const char* what, VendorComm comm) const {
  if (r == ncclSuccess || r == ncclInProgress) return r;
  const char* detail = api_.getLastError ? api_.getLastError(comm) : "";
  if (detail && !probeError_.empty() && probeError_ == detail) detail = "";  // the load's probe, not this call
  return fail(r, "%s: %s failed: %s%s%s", name_, what, api_.getErrorString(r), detail && *detail ? ": " : "",
              detail ? detail : "");
}

VendorLibrary* vendorLibraryFor(const Runtime& rt, std::string* why) {
  if (strcmp(rt.name(), "cuda") == 0) return VendorLibrary::nccl(why);
  if (strcmp(rt.name(), "hip") == 0) return VendorLibrary::rccl(why);
  return nullptr;
}

}  // namespace hetccl
