// Where a pointer's memory lives, as a runtime reports it.
#pragma once

#include <cstdint>

namespace hetccl {

enum class MemoryKind : uint8_t { Host, Pinned, Device, Managed };
const char* memoryKindName(MemoryKind kind);

}  // namespace hetccl
