// The native backend: hetccl's host algorithms over the domain's own
// communicator. It serves CPU domains, and GPU domains whose vendor
// library is missing (on host-staged copies of their buffers).
#include "core/host_group.h"
#include "algorithms/algorithms.h"
#include "core/op.h"
#include "backend/backend.h"

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

  // The algorithms run on c_ (they never read Op::comm).
  ncclResult_t run(const Op& op) override { return runCollective(c_, op); }
  ncclResult_t pointToPoint(std::span<const Op* const> ops) override { return runOperations(c_, ops); }

 private:
  HostGroup& c_;
};

}  // namespace

std::unique_ptr<Backend> makeNativeBackend(HostGroup& domain) { return std::make_unique<NativeBackend>(domain); }

}  // namespace hetccl
