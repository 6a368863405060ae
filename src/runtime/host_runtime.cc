// The host runtime (host_runtime.h) and what every runtime shares.
#include "runtime/host_runtime.h"

namespace hetccl {

const char* memoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Host: return "host";
    case MemoryKind::Pinned: return "pinned host";
    case MemoryKind::Device: return "device";
    case MemoryKind::Managed: return "managed";
  }
  return "?";
}

Runtime& hostRuntime() {
  static HostRuntime runtime;
  return runtime;
}

}  // namespace hetccl
