// The uneven collectives (hetcclAllGatherV, ncclAllToAllv) in the tests and
// hetccl-perf: the blocks every rank derives from a Case without any
// exchange (random sizes from 0 to the case's count, placed out of rank
// order with a one-element gap after each, so that a write past a block's
// end or into the wrong place shows), and the calls.
#pragma once

#include <cstddef>
#include <vector>

#include "nccl.h"
#include "reference.h"

namespace hetccl::testing {

// A rank's blocks, in elements. All-gather: `send*` hold its one block
// ({size}, {0}), `recv*` every rank's block. All-to-all: per peer.
struct UnevenLayout {
  std::vector<size_t> sendCounts, sendDispls, recvCounts, recvDispls;
};

bool isUneven(Collective c);
UnevenLayout unevenLayout(const Case& k, int rank);
// Where the input of an in-place all-gather goes: the rank's block in the
// receive buffer (element offset).
size_t unevenInPlaceOffset(const Case& k, int rank);
// How many of the receive buffer's elements the layout spans (its gaps
// included).
size_t unevenRecvSpan(const Case& k, int rank);

// The call. In place (all-gather only): `send` is the receive buffer, the
// input at its rank's block.
ncclResult_t launchUneven(ncclComm_t comm, const Case& k, int rank, char* send, char* recv, bool inPlace,
                          cudaStream_t stream);

}  // namespace hetccl::testing
