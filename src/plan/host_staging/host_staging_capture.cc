// Cross-domain calls inside a CUDA/HIP graph capture (host_staging.h) that
// the stream collectives' replayable chains do not take (stream_graph_
// lane.cc: send/recv, the relay between hosts, domains of several ranks,
// HETCCL_STREAM_GRAPHS=0). The ordinary stream plans cannot be captured
// (their flags' values are fixed when the call is queued), so a capture
// takes the host-staged plans as graph nodes:
//
//   copies of the call's buffers into pinned memory of its own
//   -> a host node that runs the host plans on that memory
//   -> copies of the results back,
//
// each replayed in stream order. The pinned memory lives as long as the
// graph: the runtime says when the graph is destroyed (a user object the
// graph holds), and later captures reuse it; it is released to the
// runtime only with the communicator (freeing pinned memory can wait for
// the device, whose streams may wait for this rank's host). A graph must
// not be launched after its communicator is destroyed, as with NCCL.
#include "plan/host_staging/host_staging.h"

#include <algorithm>
#include <bit>

#include "common/log.h"

namespace hetccl {

ncclResult_t HostStaging::capturing(std::span<const Op* const> ops, bool* any) const {
  *any = false;
  for (const Op* op : ops) {
    bool c = false;
    HETCCL_TRY(rt_.streamCapturing(op->stream, &c));
    *any |= c;
  }
  return ncclSuccess;
}

ncclResult_t HostStaging::capture(std::span<const Op* const> ops) {
  if (!captureRefusal_.empty())
    return fail(ncclInvalidUsage, "%s: a call across domains cannot be captured in a CUDA graph here: %s", opKindName(ops[0]->kind),
                captureRefusal_.c_str());
  std::vector<Op> list;
  for (const Op* op : ops) list.push_back(*op);
  for (const Op& op : list)
    if (op.stream != list[0].stream)
      return fail(ncclInvalidUsage,
                  "%s: a captured group across domains must use one stream (it uses two); capture the calls on one "
                  "stream, or run them outside the capture",
                  opKindName(op.kind));
  // Allocations and pointer queries are not allowed under a global-mode
  // capture (PyTorch's default); they touch no stream, so relax it here.
  RelaxedCaptureMode relaxed(rt_);
  HETCCL_TRY(checkBuffers(list));
  const Layout l = layout(list);
  cudaStream_t s = list[0].stream;
  auto call = std::make_unique<CapturedCall>();
  call->owner = this;
  // Sizes in powers of two (4 KiB up), so that blocks come back for
  // captures of other sizes too.
  call->bytes = std::bit_ceil(std::max<size_t>(l.total, 4096));
  {
    std::lock_guard<std::mutex> lock(captureMutex_);
    reapReleased();
    if (auto it = pool_.find(call->bytes); it != pool_.end()) {
      call->pinned = std::move(it->second);
      pool_.erase(it);
    }
  }
  if (!call->pinned) HETCCL_TRY(allocPinned(rt_, call->bytes, &call->pinned));
  call->staged = translate(l, list, call->base());
  auto* note = new ReleaseNote{book_, call.get()};
  bool tied = false;
  if (rt_.releaseWithCapturedGraph(s, &HostStaging::onGraphReleased, note, &tied) != ncclSuccess || !tied) {
    delete note;  // kept until the communicator goes
    HETCCL_INFO("%s: a captured call's %zu bytes of pinned memory stay until the communicator is destroyed (the "
                "runtime cannot tie them to the graph)",
                opKindName(list[0].kind), call->bytes);
  }
  for (const Region& g : l.regions)
    if (g.read) HETCCL_TRY(rt_.copyAsync(call->base() + g.offset, g.device, g.bytes, s));
  HETCCL_TRY(rt_.launchHostFunc(s, &HostStaging::runCaptured, call.get()));
  for (const Region& g : l.regions)
    if (g.written) HETCCL_TRY(rt_.copyAsync(g.device, call->base() + g.offset, g.bytes, s));
  HETCCL_INFO("%s: captured a call of %zu operation(s) across domains: %zu bytes staged", opKindName(list[0].kind),
               list.size(), l.total);
  std::lock_guard<std::mutex> lock(captureMutex_);
  captured_.push_back(std::move(call));
  return ncclSuccess;
}

void HostStaging::onGraphReleased(void* arg) {
  auto* note = static_cast<ReleaseNote*>(arg);
  {
    std::lock_guard<std::mutex> lock(note->book->mutex);
    if (note->book->alive) note->book->released.push_back(note->call);
  }
  delete note;
}

void HostStaging::reapReleased() {
  std::vector<CapturedCall*> released;
  {
    std::lock_guard<std::mutex> lock(book_->mutex);
    released.swap(book_->released);
  }
  for (CapturedCall* gone : released) {
    auto it = std::find_if(captured_.begin(), captured_.end(), [gone](const auto& c) { return c.get() == gone; });
    if (it == captured_.end()) continue;
    pool_.emplace(gone->bytes, std::move(gone->pinned));
    captured_.erase(it);
  }
}

void HostStaging::runCaptured(void* arg) {
  auto* call = static_cast<CapturedCall*>(arg);
  HostStaging& self = *call->owner;
  if (self.replayFailed_.load()) return;  // the communicator is fatal already: its peers are not in step
  const ncclResult_t r = self.run(call->staged);
  if (r != ncclSuccess) {
    self.replayFailed_ = true;
    self.onError_(r);
  }
}

}  // namespace hetccl
