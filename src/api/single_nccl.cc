#include "api/single_nccl.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "common/error.h"
#include "common/params.h"

namespace hetccl {

ncclResult_t checkSingleNccl() {
  static std::once_flag once;
  static std::string problem;
  std::call_once(once, [] {
    void* global = dlsym(RTLD_DEFAULT, "ncclAllReduce");
    Dl_info mine{}, theirs{};
    if (!global || !dladdr(reinterpret_cast<void*>(&checkSingleNccl), &mine) || !dladdr(global, &theirs)) return;
    if (mine.dli_fbase == theirs.dli_fbase) return;
    problem = std::string("two NCCL libraries in this process: the application's ncclAllReduce is ") +
              (theirs.dli_fname ? theirs.dli_fname : "?") + "'s, but this call reached hetccl (" +
              (mine.dli_fname ? mine.dli_fname : "?") +
              "); its calls would be split between them. Load hetccl ahead of the other (LD_PRELOAD=" +
              (mine.dli_fname ? mine.dli_fname : "libhetccl.so") +
              "), drop one, or set HETCCL_ALLOW_TWO_NCCL=1 if the application keeps them apart itself";
  });
  if (problem.empty() || params().allowTwoNccl) return ncclSuccess;  // allowed: the caller keeps the two apart
  return fail(ncclInvalidUsage, "%s", problem.c_str());
}

}  // namespace hetccl
