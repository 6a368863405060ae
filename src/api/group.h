// Group semantics: between ncclGroupStart and ncclGroupEnd operations are
// collected per thread; ncclGroupEnd runs them (each communicator's on its
// own worker thread when a group spans several). Outside a group an
// operation runs at once. Host ranks: when the call (or ncclGroupEnd)
// returns, the operation has completed.
#pragma once

#include "core/op.h"

namespace hetccl {

ncclResult_t enqueue(const Op& op);
// Inside a group, remembers the first failed call for ncclGroupEnd.
void recordGroupError(ncclResult_t r);
// True between ncclGroupStart and ncclGroupEnd on this thread.
bool inGroup();
// A communicator whose init was started inside a group: ncclGroupEnd
// waits for it (so one thread can init several ranks, as nccl-tests does).
void deferInit(ncclComm_t comm);
// ncclCommDestroy inside a group: true if it is left for ncclGroupEnd,
// which runs the group's operations first (false outside a group).
bool deferDestroy(ncclComm_t comm);
// ncclCommAbort inside a group: the group forgets the communicator's
// operations (ncclGroupEnd then fails, saying so) and its pending destroy.
void dropGroupWork(ncclComm_t comm);

}  // namespace hetccl
