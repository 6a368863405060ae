// Logging controlled by NCCL_DEBUG (VERSION, WARN, INFO, TRACE) or
// HETCCL_DEBUG, read once; output goes to stderr (or NCCL_DEBUG_FILE).
#pragma once

namespace hetccl {

enum class LogLevel { None = 0, Version = 1, Warn = 2, Info = 3, Trace = 4 };

bool logEnabled(LogLevel level);
void log(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace hetccl

#define HETCCL_INFO(...) \
  do { if (::hetccl::logEnabled(::hetccl::LogLevel::Info)) ::hetccl::log(::hetccl::LogLevel::Info, __VA_ARGS__); } while (0)
#define HETCCL_WARN(...) ::hetccl::log(::hetccl::LogLevel::Warn, __VA_ARGS__)
