// A domain's collective library, behind one interface: NCCL-style
// collectives over the domain's own ranks (roots are domain ranks). The
// native backend runs hetccl's algorithms; NCCL and RCCL backends (loaded
// at run time) are the GPU issue's.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "common/types.h"

namespace hetccl {

class HostGroup;
struct Op;

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

  virtual ncclResult_t allReduce(const void* send, void* recv, size_t count, const Reduction& red) = 0;
  virtual ncclResult_t reduceScatter(const void* send, void* recv, size_t recvcount, const Reduction& red) = 0;
  virtual ncclResult_t allGather(const void* send, void* recv, size_t sendcount, ncclDataType_t type) = 0;
  virtual ncclResult_t broadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root) = 0;
  virtual ncclResult_t reduce(const void* send, void* recv, size_t count, const Reduction& red, int root) = 0;
  virtual ncclResult_t alltoAll(const void* send, void* recv, size_t count, ncclDataType_t type) = 0;
  virtual ncclResult_t gather(const void* send, void* recv, size_t count, ncclDataType_t type, int root) = 0;
  virtual ncclResult_t scatter(const void* send, void* recv, size_t count, ncclDataType_t type, int root) = 0;
  // A group of sends and receives (Op::root: the peer, a domain rank).
  virtual ncclResult_t pointToPoint(std::span<const Op* const> ops) = 0;
};

// hetccl's own algorithms over `domain` (a communicator of the domain's ranks).
std::unique_ptr<Backend> makeNativeBackend(HostGroup& domain);

}  // namespace hetccl
