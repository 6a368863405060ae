#include "comm/fp8_bridge.h"

#include <cstring>

#include "comm/communicator.h"
#include "common/error.h"
#include "plan/host_staging.h"

namespace hetccl {

namespace {

bool reduces(OpKind kind) {
  return kind == OpKind::AllReduce || kind == OpKind::Reduce || kind == OpKind::ReduceScatter;
}

Fp8Format formatOf(const Communicator& c) { return static_cast<Fp8Format>(c.peers[c.rank].fp8Format & 1u); }

}  // namespace

Fp8Bridge::~Fp8Bridge() {
  for (auto& b : blocks_) {
    if (b->passed) rt_.destroyEvent(b->passed);
    if (b->p) rt_.freeDevice(b->p);  // waits for work still using it (GPU runtimes)
  }
}

bool Fp8Bridge::needed(const Communicator& c, const Op& op) {
  if (c.vendor || !isFp8(op.type)) return false;
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
  return refuseCapture(rt_, op.stream, op.kind);
}

ncclResult_t Fp8Bridge::take(size_t bytes, Stream s, void** p) {
  Block* fit = nullptr;
  for (auto& b : blocks_) {
    if (b->taken || b->bytes < bytes || (fit && fit->bytes <= b->bytes)) continue;
    bool passed = !b->used || b->lastStream == s;  // the same stream orders the uses
    if (!passed) HETCCL_TRY(rt_.eventDone(b->passed, &passed));
    if (passed) fit = b.get();
  }
  if (!fit) {
    auto block = std::make_unique<Block>();
    const size_t rounded = (bytes + 65535) & ~size_t(65535);
    HETCCL_TRY(rt_.allocDevice(&block->p, rounded));
    block->bytes = rounded;
    if (ncclResult_t r = rt_.createEvent(&block->passed); r != ncclSuccess) {
      rt_.freeDevice(block->p);
      return r;
    }
    blocks_.push_back(std::move(block));
    fit = blocks_.back().get();
  }
  fit->taken = true;
  fit->lastStream = s;
  *p = fit->p;
  return ncclSuccess;
}

ncclResult_t Fp8Bridge::giveBack() {
  ncclResult_t first = ncclSuccess;
  for (auto& b : blocks_) {
    if (!b->taken) continue;
    b->taken = false;
    b->used = true;
    ncclResult_t r = rt_.recordEvent(b->passed, b->lastStream);
    if (r != ncclSuccess && first == ncclSuccess) first = r;
  }
  return first;
}

// Rewrites `op` into `wide`: its input converted into scratch now (on its
// stream), its output in scratch, converted back by the op left in
// `narrows` (sendbuff: the scratch; recvbuff: the user's buffer).
ncclResult_t Fp8Bridge::widen(const Communicator& c, const Op& op, Op* wide, std::vector<Op>* narrows) {
  const Fp8Format format = formatOf(c);
  const ncclDataType_t wideType = reduces(op.kind) ? ncclFloat32 : ncclFloat16;
  const size_t wideSize = typeSize(wideType);
  const Extents e = extentsOf(op, c.rank, c.nranks);  // fp8: bytes are elements
  const Stream s = static_cast<Stream>(op.stream);
  *wide = op;
  wide->type = wideType;
  wide->red.type = wideType;
  if (op.red.kind == RedKind::PreMulSum) {  // the scalar: this rank's fp8, as a float
    const uint8_t byte = static_cast<uint8_t>(op.red.scalar & 0xff);
    float f = 0;
    castFp8OnHost(Fp8Cast{op.type, format, ncclFloat32, true}, &f, &byte, 1);
    wide->red.scalar = 0;
    memcpy(&wide->red.scalar, &f, sizeof f);
  }
  wide->sendbuff = nullptr;
  wide->recvbuff = nullptr;
  if (e.sendBytes) {
    void* scratch = nullptr;
    HETCCL_TRY(take(e.sendBytes * wideSize, s, &scratch));
    HETCCL_TRY(caster_->castFp8(Fp8Cast{op.type, format, wideType, true}, scratch, op.sendbuff, e.sendBytes, s));
    wide->sendbuff = scratch;
  }
  if (e.recvBytes) {
    void* scratch = nullptr;
    HETCCL_TRY(take(e.recvBytes * wideSize, s, &scratch));
    wide->recvbuff = scratch;
    Op back = op;
    back.sendbuff = scratch;
    back.count = e.recvBytes;
    narrows->push_back(back);
  }
  return ncclSuccess;
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
  std::vector<Op> wide(ops.size()), narrows;
  std::vector<const Op*> list;
  ncclResult_t r = ncclSuccess;
  for (size_t i = 0; i < ops.size() && r == ncclSuccess; ++i) {
    if (!needed(c, *ops[i])) {
      list.push_back(ops[i]);
      continue;
    }
    r = widen(c, *ops[i], &wide[i], &narrows);
    list.push_back(&wide[i]);
  }
  if (r == ncclSuccess) r = dispatch(list);
  const Fp8Format format = formatOf(c);
  for (const Op& n : narrows) {
    if (r != ncclSuccess) break;
    const ncclDataType_t wideType = reduces(n.kind) ? ncclFloat32 : ncclFloat16;
    r = caster_->castFp8(Fp8Cast{n.type, format, wideType, false}, n.recvbuff, n.sendbuff, n.count,
                         static_cast<Stream>(n.stream));
  }
  const ncclResult_t given = giveBack();
  return r != ncclSuccess ? r : given;
}

}  // namespace hetccl
