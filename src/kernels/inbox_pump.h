// The one-sided inbox's pump (kernels/inbox.h) queued on a runtime's
// stream, whatever the device: the GPU kernel on CUDA and HIP ranks; on
// CPU ranks the same steps on the CPU, in the stream's order (at once on
// the host runtime's synchronous streams, queued on a threaded one).
#pragma once

#include <memory>

#include "kernels/inbox.h"
#include "runtime/runtime.h"

namespace hetccl {

class InboxPump {
 public:
  virtual ~InboxPump() = default;
  virtual ncclResult_t queue(const inbox::PumpArgs& a, Stream s) = 0;
};

// The pump for `runtime`'s current device (loads the GPU kernels).
ncclResult_t makeInboxPump(Runtime& runtime, std::unique_ptr<InboxPump>* out);

// The host's pump, run to its end: the kernel's steps on the CPU.
void pumpInboxOnHost(const inbox::PumpArgs& a);

}  // namespace hetccl
