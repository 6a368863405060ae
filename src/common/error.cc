#include "common/error.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

#include "common/log.h"

namespace hetccl {

namespace {
thread_local std::string tLastError;
std::atomic<bool> gApplicationKnowsTimeout{false};  // ncclTimeout exists for it (NCCL 2.30 and later)
}

void noteApplicationVersion(unsigned ncclVersion) {
  if (ncclVersion >= static_cast<unsigned>(NCCL_VERSION(2, 30, 0))) gApplicationKnowsTimeout.store(true);
}

namespace {

__attribute__((format(printf, 2, 0))) ncclResult_t record(ncclResult_t code, const char* fmt, va_list ap) {
  char buf[1024];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  tLastError = buf;
  log(LogLevel::Warn, "%s (%s)", buf, resultName(code));
  return code;
}

}  // namespace

ncclResult_t timedOut(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const ncclResult_t r = record(gApplicationKnowsTimeout.load() ? ncclTimeout : ncclRemoteError, fmt, ap);
  va_end(ap);
  return r;
}

ncclResult_t fail(ncclResult_t code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  record(code, fmt, ap);
  va_end(ap);
  return code;
}

const char* lastError() { return tLastError.c_str(); }
void clearLastError() { tLastError.clear(); }

const char* resultName(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the hetccl developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclTimeout: return "a wait ran past its timeout";
    default: return "unknown result code";
  }
}

}  // namespace hetccl
