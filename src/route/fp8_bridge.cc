#include "route/fp8_bridge.h"

#include <cstring>

#include "core/communicator.h"
#include "common/error.h"
#include "common/log.h"
#include "plan/host_staging/host_staging.h"

namespace hetccl {

namespace {

bool reduces(OpKind kind) {
  return kind == OpKind::AllReduce || kind == OpKind::Reduce || kind == OpKind::ReduceScatter;
}

Fp8Format formatOf(const Communicator& c) { return static_cast<Fp8Format>(c.peers[c.rank].fp8Format & 1u); }

}  // namespace

Fp8Bridge::~Fp8Bridge() = default;

bool Fp8Bridge::needed(const Communicator& c, const Op& op) {
  if (!isFp8(op.type)) return false;
  if (c.partition.fp8FormatsDiffer()) return true;
  return c.partition.anyFp8Fnuz() && reduces(op.kind);
}

// The checks the plans make on the user's buffers, made here because the
// plans see only the scratch: nothing may be queued for a call they refuse.
ncclResult_t Fp8Bridge::check(const Communicator& c, const Op& op) const {
  if (!rt_.hasDevices()) return ncclSuccess;
  const Extents e = extentsOf(op, c.rank, c.nranks);
  if (e.sendBytes) HETCCL_TRY(checkDeviceBuffer(rt_, op.sendbuff, "sendbuff", op.kind));
  if (e.recvBytes) HETCCL_TRY(checkDeviceBuffer(rt_, op.recvbuff, "recvbuff", op.kind));
  return refuseCapture(rt_, op.stream, op.kind, "fp8 between OCP and FNUZ ranks (converted on the device around the call)");
}

ncclResult_t Fp8Bridge::take(size_t bytes, Stream s, void** p) {
  Block* fit = nullptr;
  for (auto& b : blocks_) {
    if (b->taken || b->bytes < bytes || (fit && fit->bytes <= b->bytes)) continue;
    bool passed = !b->used || b->lastStream == s;  // the same stream orders the uses
    if (!passed) HETCCL_TRY(rt_.eventDone(b->passed.get(), &passed));
    if (passed) fit = b.get();
  }
  if (!fit) {
    HETCCL_TRY(freeIdleBlocksSmallerThan(bytes));  // scratch grows to the calls' sizes, not by their sum
    auto block = std::make_unique<Block>();
    const size_t rounded = (bytes + 65535) & ~size_t(65535);
    HETCCL_TRY(allocDevice(rt_, rounded, &block->memory));
    block->bytes = rounded;
    HETCCL_TRY(createEvent(rt_, &block->passed));
    blocks_.push_back(std::move(block));
    fit = blocks_.back().get();
    HETCCL_INFO("fp8 bridge: scratch block %zu of %zu bytes", blocks_.size(), rounded);
  }
  fit->taken = true;
  fit->lastStream = s;
  *p = fit->memory.get();
  return ncclSuccess;
}

ncclResult_t Fp8Bridge::freeIdleBlocksSmallerThan(size_t bytes) {
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    Block& b = **it;
    bool passed = !b.used;
    if (!b.taken && b.bytes < bytes && !passed) HETCCL_TRY(rt_.eventDone(b.passed.get(), &passed));
    if (b.taken || b.bytes >= bytes || !passed) {
      ++it;
      continue;
    }
    HETCCL_INFO("fp8 bridge: scratch block of %zu bytes freed (a larger one is due)", b.bytes);
    it = blocks_.erase(it);
  }
  return ncclSuccess;
}

ncclResult_t Fp8Bridge::giveBack() {
  ncclResult_t first = ncclSuccess;
  for (auto& b : blocks_) {
    if (!b->taken) continue;
    b->taken = false;
    b->used = true;
    ncclResult_t r = rt_.recordEvent(b->passed.get(), b->lastStream);
    if (r != ncclSuccess && first == ncclSuccess) first = r;
  }
  return first;
}

// Rewrites a reduction into `onFloat`: its input converted into float
// scratch now (on its stream), its output in float scratch, converted into
// the user's buffer after the call (left in `after`).
ncclResult_t Fp8Bridge::reduceOnFloat(const Communicator& c, const Op& op, Op* onFloat, std::vector<After>* after) {
  const Fp8Format format = formatOf(c);
  const Extents e = extentsOf(op, c.rank, c.nranks);  // fp8: bytes are elements
  const Stream s = static_cast<Stream>(op.stream);
  *onFloat = op;
  onFloat->type = ncclFloat32;
  onFloat->red.type = ncclFloat32;
  if (op.red.kind == RedKind::PreMulSum) {  // the scalar: this rank's fp8, as a float
    const uint8_t byte = static_cast<uint8_t>(op.red.scalar & 0xff);
    float f = 0;
    castFp8OnHost(Fp8Cast{op.type, format, Fp8CastKind::ToFloat}, &f, &byte, 1);
    onFloat->red.scalar = 0;
    memcpy(&onFloat->red.scalar, &f, sizeof f);
  }
  onFloat->sendbuff = nullptr;
  onFloat->recvbuff = nullptr;
  if (e.sendBytes) {
    void* scratch = nullptr;
    HETCCL_TRY(take(e.sendBytes * sizeof(float), s, &scratch));
    HETCCL_TRY(caster_->castFp8(Fp8Cast{op.type, format, Fp8CastKind::ToFloat}, scratch, op.sendbuff, e.sendBytes, s));
    onFloat->sendbuff = scratch;
  }
  if (e.recvBytes) {
    void* scratch = nullptr;
    HETCCL_TRY(take(e.recvBytes * sizeof(float), s, &scratch));
    onFloat->recvbuff = scratch;
    after->push_back(After{op.recvbuff, scratch, e.recvBytes, format, op.type, s});
  }
  return ncclSuccess;
}

// The parts of a move's output that came from ranks of the other format
// (adjacent ones merged): converted in place after the call.
void Fp8Bridge::partsToConvert(const Communicator& c, const Op& op, std::vector<After>* after) {
  const Fp8Format mine = formatOf(c);
  const Extents e = extentsOf(op, c.rank, c.nranks);
  if (!e.recvBytes) return;
  char* out = static_cast<char*>(op.recvbuff);
  const size_t k = op.count;
  std::vector<After> parts;
  auto add = [&](size_t at, int from) {
    const Fp8Format format = static_cast<Fp8Format>(c.peers[from].fp8Format & 1u);
    if (format == mine) return;
    if (!parts.empty() && static_cast<char*>(parts.back().p) + parts.back().n == out + at && parts.back().format == format)
      parts.back().n += k;  // continues the previous part
    else
      parts.push_back(After{out + at, nullptr, k, format, op.type, static_cast<Stream>(op.stream)});
  };
  switch (op.kind) {
    case OpKind::Broadcast:
    case OpKind::Scatter:
    case OpKind::Recv: add(0, op.root); break;
    case OpKind::AllGather:
    case OpKind::Gather:
    case OpKind::AlltoAll:
      for (int q = 0; q < c.nranks; ++q) add(static_cast<size_t>(q) * k, q);
      break;
    default: break;
  }
  after->insert(after->end(), parts.begin(), parts.end());
}

ncclResult_t Fp8Bridge::run(Communicator& c, std::span<const Op* const> ops, const Dispatch& dispatch) {
  for (const Op* op : ops)
    if (needed(c, *op)) HETCCL_TRY(check(c, *op));
  std::optional<DeviceGuard> onDevice;
  if (rt_.hasDevices() && c.device >= 0) {
    onDevice.emplace(rt_, c.device);
    HETCCL_TRY(onDevice->status());
  }
  if (!caster_) HETCCL_TRY(makeReducer(rt_, &caster_));
  std::vector<Op> onFloat(ops.size());
  std::vector<After> after;
  std::vector<const Op*> list;
  ncclResult_t r = ncclSuccess;
  for (size_t i = 0; i < ops.size() && r == ncclSuccess; ++i) {
    list.push_back(ops[i]);
    if (!needed(c, *ops[i])) continue;
    if (reduces(ops[i]->kind)) {
      r = reduceOnFloat(c, *ops[i], &onFloat[i], &after);
      list.back() = &onFloat[i];
    } else {
      partsToConvert(c, *ops[i], &after);
    }
  }
  if (r == ncclSuccess) r = dispatch(list);
  for (const After& a : after) {
    if (r != ncclSuccess) break;
    r = a.from ? caster_->castFp8(Fp8Cast{a.type, a.format, Fp8CastKind::FromFloat}, a.p, a.from, a.n, a.stream)
               : caster_->castFp8(Fp8Cast{a.type, a.format, Fp8CastKind::ToOtherFormat}, a.p, a.p, a.n, a.stream);
  }
  const ncclResult_t given = giveBack();
  return r != ncclSuccess ? r : given;
}

}  // namespace hetccl
