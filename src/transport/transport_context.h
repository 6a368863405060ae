// What a transport needs to know about its communicator.
#pragma once

#include <cstdint>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/rank_info.h"
#include "common/deadline.h"

namespace hetccl {

struct TransportContext {
  int rank = 0;
  int nranks = 1;
  uint64_t secret = 0;                  // unique per communicator
  const std::vector<RankInfo>* peers = nullptr;
  Listener* listener = nullptr;
  const AbortFlag* abort = nullptr;
  double timeoutSeconds = 300.0;
};

std::unique_ptr<class Transport> makeSocketTransport(const TransportContext& ctx);
std::unique_ptr<class Transport> makeShmTransport(const TransportContext& ctx);

}  // namespace hetccl
