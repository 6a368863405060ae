// A domain's collective library, behind one interface: NCCL-style
// operations over the domain's own ranks (roots and peers are domain
// ranks). Two implement it: hetccl's native algorithms (native_backend.cc:
// host memory, each call runs to completion) and a vendor library's
// communicator (vendor_comm.h: device memory, each call queued on the
// Op's stream with the Op's vendor reduction).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "core/op.h"
#include "common/types.h"

namespace hetccl {

class HostGroup;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual std::string version() const = 0;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  // The cross-domain call this domain's steps belong to (its tag; 0 when
  // none): hetccl's own algorithms mix it into their messages' tags, so
  // members of a domain that disagree about the whole call (its root, its
  // kind) find out at their first message. Vendor libraries ignore it.
  virtual void setCallContext(uint64_t tag) { (void)tag; }
  // Whether it has the operation (an older vendor library may lack
  // all-to-all, gather or scatter).
  virtual bool has(OpKind kind) const {
    (void)kind;
    return true;
  }
  // One collective (Op::comm is not read).
  virtual ncclResult_t run(const Op& op) = 0;
  // A group of sends and receives (Op::root: the peer).
  virtual ncclResult_t pointToPoint(std::span<const Op* const> ops) = 0;
  // After an abort: the destructor must not wait for the peers.
  virtual void markAborted() {}

  // Shorthands for the cross-domain plans' steps (host memory, no stream).
  ncclResult_t reduceScatter(const void* send, void* recv, size_t recvcount, const Reduction& red);
  ncclResult_t allGather(const void* send, void* recv, size_t sendcount, ncclDataType_t type);
  ncclResult_t broadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root);
  ncclResult_t reduce(const void* send, void* recv, size_t count, const Reduction& red, int root);

 private:
  ncclResult_t runStep(OpKind kind, const void* send, void* recv, size_t count, const Reduction& red, int root);
};

// The vendor libraries' op for a reduction they have built in (sum,
// product, min, max); false for PreMulSum, which needs a handle made on the
// vendor's communicator.
bool builtinVendorOp(RedKind kind, ncclRedOp_t* out);

// hetccl's own algorithms over `domain` (a communicator of the domain's ranks).
std::unique_ptr<Backend> makeNativeBackend(HostGroup& domain);

}  // namespace hetccl
