// Group semantics: between ncclGroupStart and ncclGroupEnd operations are
// collected per thread; ncclGroupEnd runs them (each communicator's on its
// own worker thread when a group spans several). Outside a group an
// operation runs at once. Host ranks: when the call (or ncclGroupEnd)
// returns, the operation has completed.
#pragma once

#include "algorithms/op.h"

namespace hetccl {

ncclResult_t enqueue(const Op& op);
// Inside a group, remembers the first failed call for ncclGroupEnd.
void recordGroupError(ncclResult_t r);

}  // namespace hetccl
