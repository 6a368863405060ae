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

const char* lastError();
void clearLastError();
const char* resultName(ncclResult_t r);

}  // namespace hetccl

#define HETCCL_TRY(expr)                              \
  do {                                                \
    ncclResult_t hetccl_try_result_ = (expr);         \
    if (hetccl_try_result_ != ncclSuccess) return hetccl_try_result_; \
  } while (0)
