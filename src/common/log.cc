#include "common/log.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>

#include "common/params.h"

namespace hetccl {

bool logEnabled(LogLevel level) { return static_cast<int>(level) <= params().debugLevel; }

void log(LogLevel level, const char* fmt, ...) {
  if (!logEnabled(level)) return;
  static std::mutex mutex;
  static char host[64] = {0};
  if (!host[0]) gethostname(host, sizeof(host) - 1);
  char msg[1200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const char* tag = level == LogLevel::Warn ? "WARN" : level == LogLevel::Info ? "INFO" : "TRACE";
  std::lock_guard<std::mutex> lock(mutex);
  FILE* out = params().debugFile ? params().debugFile : stderr;
  fprintf(out, "%s:%d hetccl %s %s\n", host, static_cast<int>(getpid()), tag, msg);
  fflush(out);
}

}  // namespace hetccl
