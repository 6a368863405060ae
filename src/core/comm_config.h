// A communicator's configuration, as the application gave it
// (ncclCommInitRankConfig) and as hetccl could honour it.
#pragma once

#include <string>

#include "nccl.h"

namespace hetccl {

struct CommConfig {
  bool blocking = true;
  std::string name;
  std::string note;  // what could not be honoured (a newer struct's fields)
  // The application's ncclConfig_t in NCCL 2.30's layout (fields an older
  // struct lacks stay undefined), for the vendor library's own init on
  // pass-through: the performance knobs (CTAs, CGA cluster size, network,
  // traffic class, CTA policy ...) reach it. given: a config was passed.
  bool given = false;
  ncclConfig_t fields = NCCL_CONFIG_INITIALIZER;
  std::string netName;
};

// Reads an application's ncclConfig_t of any layout from NCCL 2.14 on.
ncclResult_t readConfig(const ncclConfig_t* config, CommConfig* out);

}  // namespace hetccl
