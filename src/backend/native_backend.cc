// The native backend: hetccl's host algorithms over the domain's own
// communicator. It serves CPU domains, and later any domain whose vendor
// library is missing.
#include <vector>

#include "algorithms/op.h"
#include "backend/backend.h"
#include "algorithms/host_group.h"

namespace hetccl {

namespace {

class NativeBackend : public Backend {
 public:
  explicit NativeBackend(HostGroup& domain) : c_(domain) {}
  const char* name() const override { return "hetccl-native"; }
  std::string version() const override { return "0.1.0"; }
  int rank() const override { return c_.rank; }
  int nranks() const override { return c_.nranks; }
  void setCallContext(uint64_t tag) override { c_.callContext.store(tag); }

  ncclResult_t allReduce(const void* send, void* recv, size_t count, const Reduction& red) override {
    return run(OpKind::AllReduce, send, recv, count, red, 0);
  }
  ncclResult_t reduceScatter(const void* send, void* recv, size_t recvcount, const Reduction& red) override {
    return run(OpKind::ReduceScatter, send, recv, recvcount, red, 0);
  }
  ncclResult_t allGather(const void* send, void* recv, size_t sendcount, ncclDataType_t type) override {
    return run(OpKind::AllGather, send, recv, sendcount, copyOf(type), 0);
  }
  ncclResult_t broadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root) override {
    return run(OpKind::Broadcast, send, recv, count, copyOf(type), root);
  }
  ncclResult_t reduce(const void* send, void* recv, size_t count, const Reduction& red, int root) override {
    return run(OpKind::Reduce, send, recv, count, red, root);
  }
  ncclResult_t alltoAll(const void* send, void* recv, size_t count, ncclDataType_t type) override {
    return run(OpKind::AlltoAll, send, recv, count, copyOf(type), 0);
  }
  ncclResult_t gather(const void* send, void* recv, size_t count, ncclDataType_t type, int root) override {
    return run(OpKind::Gather, send, recv, count, copyOf(type), root);
  }
  ncclResult_t scatter(const void* send, void* recv, size_t count, ncclDataType_t type, int root) override {
    return run(OpKind::Scatter, send, recv, count, copyOf(type), root);
  }
  ncclResult_t pointToPoint(std::span<const Op* const> ops) override {
    std::vector<Op> mine;
    for (const Op* op : ops) {
      mine.push_back(*op);
      mine.back().comm = nullptr;  // the algorithms run on c_
    }
    std::vector<const Op*> pointers;
    for (const Op& op : mine) pointers.push_back(&op);
    return runOperations(c_, pointers);
  }

 private:
  static Reduction copyOf(ncclDataType_t type) {
    Reduction r;
    r.type = type;
    return r;
  }
  ncclResult_t run(OpKind kind, const void* send, void* recv, size_t count, const Reduction& red, int root) {
    Op op;
    op.kind = kind;
    op.sendbuff = send;
    op.recvbuff = recv;
    op.count = count;
    op.type = red.type;
    op.red = red;
    op.root = root;
    return runCollective(c_, op);
  }

  HostGroup& c_;
};

}  // namespace

std::unique_ptr<Backend> makeNativeBackend(HostGroup& domain) { return std::make_unique<NativeBackend>(domain); }

}  // namespace hetccl
