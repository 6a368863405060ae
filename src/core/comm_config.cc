#include "core/comm_config.h"

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "common/error.h"
#include "common/log.h"

namespace hetccl {

namespace {

// NCCL's own rules for the numeric fields (undefined is INT_MIN): counts
// are not negative, switches are 0 or 1. The same answer on every rank
// whatever library serves it.
ncclResult_t checkConfigValues(const ncclConfig_t& c) {
  const struct {
    const char* name;
    int value;
    bool onOff;
  } fields[] = {
      {"cgaClusterSize", c.cgaClusterSize, false}, {"minCTAs", c.minCTAs, false},
      {"maxCTAs", c.maxCTAs, false},               {"splitShare", c.splitShare, true},
      {"trafficClass", c.trafficClass, false},     {"collnetEnable", c.collnetEnable, true},
      {"shrinkShare", c.shrinkShare, true},        {"nvlsCTAs", c.nvlsCTAs, false},
      {"nChannelsPerNetPeer", c.nChannelsPerNetPeer, false}, {"nvlinkCentricSched", c.nvlinkCentricSched, true},
  };
  for (const auto& f : fields) {
    if (f.value == NCCL_CONFIG_UNDEF_INT) continue;
    if (f.value < 0 || (f.onOff && f.value > 1))
      return fail(ncclInvalidArgument, "ncclConfig_t.%s must be %s, not %d", f.name, f.onOff ? "0 or 1" : ">= 0",
                  f.value);
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t readConfig(const ncclConfig_t* config, CommConfig* out) {
  *out = CommConfig{};
  if (!config) return ncclSuccess;
  if (config->magic != 0xcafebeef)
    return fail(ncclInvalidArgument, "ncclConfig_t was not initialized with NCCL_CONFIG_INITIALIZER (bad magic)");
  noteApplicationVersion(config->version);  // an application of 2.30's header gets ncclTimeout for timeouts
  // Older layouts are prefixes of the current one: read only what the
  // application's struct has, by its size field.
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  size_t n = config->size;
  if (n < offsetof(ncclConfig_t, blocking) + sizeof(int) || n > 4096)
    return fail(ncclInvalidArgument, "ncclConfig_t has an invalid size %zu", n);
  memcpy(&c, config, n < sizeof(c) ? n : sizeof(c));
  if (n > sizeof(c)) {
    // A newer NCCL's struct (a newer PyTorch, say): the fields hetccl knows
    // are read; the new ones cannot be honoured, and the user is told once.
    char text[240];
    snprintf(text, sizeof(text),
             "ncclConfig_t of %zu bytes (version %u) is newer than the NCCL %d.%d.%d layout hetccl knows (%zu bytes): "
             "its fields past byte %zu are ignored",
             n, config->version, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, sizeof(c), sizeof(c));
    out->note = text;
    static std::once_flag once;
    std::call_once(once, [&] { HETCCL_WARN("%s", text); });
  }
  if (c.blocking != NCCL_CONFIG_UNDEF_INT) {
    if (c.blocking != 0 && c.blocking != 1)
      return fail(ncclInvalidArgument, "ncclConfig_t.blocking must be 0 or 1, not %d", c.blocking);
    out->blocking = c.blocking == 1;
  }
  if (n >= offsetof(ncclConfig_t, commName) + sizeof(char*) && c.commName) out->name = c.commName;
  HETCCL_TRY(checkConfigValues(c));
  out->given = true;
  out->fields = c;
  out->fields.size = sizeof(ncclConfig_t);
  out->fields.version = NCCL_VERSION_CODE;
  if (c.netName) out->netName = c.netName;
  out->fields.netName = NCCL_CONFIG_UNDEF_PTR;  // kept as strings above, set again for the vendor
  out->fields.commName = NCCL_CONFIG_UNDEF_PTR;
  return ncclSuccess;
}

}  // namespace hetccl
