// Error reporting: every failure carries an NCCL result code and a message
// kept per thread for ncclGetLastError.
#pragma once

#include <cstdarg>
#include <string>

#include "nccl.h"

namespace hetccl {

// Records a formatted message as this thread's last error, logs it at WARN
// level and returns `code`, so call sites read `return fail(code, ...)`.
ncclResult_t fail(ncclResult_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// A wait that ran past HETCCL_TIMEOUT: fail() with ncclTimeout where the
// application was built against NCCL 2.30 or later (a config it passed
// said so: noteApplicationVersion), else ncclRemoteError, as NCCL 2.28
// programs expect.
ncclResult_t timedOut(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void noteApplicationVersion(unsigned ncclVersion);  // the version field of an application's ncclConfig_t

const char* lastError();
void clearLastError();
const char* resultName(ncclResult_t r);

}  // namespace hetccl

#define HETCCL_TRY(expr)                              \
  do {                                                \
    ncclResult_t hetccl_try_result_ = (expr);         \
    if (hetccl_try_result_ != ncclSuccess) return hetccl_try_result_; \
  } while (0)
