#include "runtime/fp8_format.h"

#include <dirent.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/params.h"

namespace hetccl {

namespace {

// "dddd:bb:dd.f" -> domain and KFD's location_id (bus << 8 | device << 3 | function).
bool parseBusId(const std::string& id, unsigned* domain, unsigned* location) {
  unsigned d = 0, bus = 0, dev = 0, fn = 0;
  if (sscanf(id.c_str(), "%x:%x:%x.%x", &d, &bus, &dev, &fn) != 4) return false;
  *domain = d;
  *location = bus << 8 | dev << 3 | fn;
  return true;
}

}  // namespace

int amdGfxTargetVersion(const std::string& pciBusId, const std::string& nodesDir) {
  unsigned domain = 0, location = 0;
  if (!parseBusId(pciBusId, &domain, &location)) return 0;
  DIR* dir = opendir(nodesDir.c_str());
  if (!dir) return 0;
  int found = 0;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream in(nodesDir + "/" + entry->d_name + "/properties");
    long version = -1, loc = -1, dom = 0;
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string key;
      long value = 0;
      if (!(fields >> key >> value)) continue;
      if (key == "gfx_target_version") version = value;
      else if (key == "location_id") loc = value;
      else if (key == "domain") dom = value;
    }
    if (version > 0 && loc == static_cast<long>(location) && dom == static_cast<long>(domain)) {
      found = static_cast<int>(version);
      break;
    }
  }
  closedir(dir);
  return found;
}

Fp8Format fp8FormatOfGfxTarget(int v) { return v >= 90400 && v <= 90402 ? Fp8Format::Fnuz : Fp8Format::Ocp; }

Fp8Format rankFp8Format(Runtime& rt, int device, std::string* why) {
  const std::string& chosen = params().fp8Format;
  if (!chosen.empty()) {
    *why = "HETCCL_FP8_FORMAT=" + chosen;
    return chosen == "fnuz" ? Fp8Format::Fnuz : Fp8Format::Ocp;
  }
  if (!rt.hasDevices() || std::string(rt.vendor()) != "amd") {
    *why = std::string(rt.vendor()) + " ranks compute in OCP fp8";
    return Fp8Format::Ocp;
  }
  std::string busId;
  const int version = rt.pciBusId(device, &busId) == ncclSuccess ? amdGfxTargetVersion(busId) : 0;
  if (!version) {
    // MI300 is the AMD GPU mixed clusters hold today; a wrong guess the
    // other way would mix formats silently too, so say so.
    *why = "the gfx target of " + busId + " is unknown (no KFD topology); FNUZ assumed, set HETCCL_FP8_FORMAT";
    return Fp8Format::Fnuz;
  }
  *why = "gfx target version " + std::to_string(version);
  return fp8FormatOfGfxTarget(version);
}

}  // namespace hetccl
