// Which fp8 a rank computes in. NCCL's fp8 types are OCP's on NVIDIA GPUs
// and CPU ranks; RCCL's are FNUZ on AMD MI300 (gfx940-942) and OCP on later
// AMD GPUs (gfx950, RDNA4). Ranks tell each other at init, and collectives
// among ranks that differ convert (src/route/fp8_bridge.h).
#pragma once

#include <string>

#include "common/types.h"
#include "runtime/runtime.h"

namespace hetccl {

// HETCCL_FP8_FORMAT (ocp or fnuz) if set, else what the rank's device uses
// (an AMD device's from its gfx target). *why: how it was decided.
Fp8Format rankFp8Format(Runtime& rt, int device, std::string* why);

// The KFD topology's gfx_target_version (90402 for gfx942) of the AMD GPU
// at PCI address `pciBusId` ("0000:c1:00.0"), 0 if not found. `nodesDir`
// is the topology's nodes directory (tests pass their own).
int amdGfxTargetVersion(const std::string& pciBusId,
                        const std::string& nodesDir = "/sys/class/kfd/kfd/topology/nodes");

// FNUZ for gfx940-942 (target versions 90400-90402), OCP otherwise.
Fp8Format fp8FormatOfGfxTarget(int gfxTargetVersion);

}  // namespace hetccl
