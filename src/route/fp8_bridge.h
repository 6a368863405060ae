// fp8 collectives among ranks that read fp8 differently: NVIDIA GPUs and
// CPU ranks use OCP's formats, AMD MI300 FNUZ's (runtime/fp8_format.h).
// Moving the bytes as they are would change every value (an OCP byte read
// as FNUZ is half the value; OCP's -0 is FNUZ's NaN). So:
// - collectives that move data (and send/recv) move the bytes, and each
//   receiver then converts, in place, every part that came from a rank of
//   the other format into its own (rounded to nearest even, saturating);
// - reductions run on float: each rank converts its input into float
//   scratch, the reduction runs there, and each rank converts the result
//   into its own format. Also when every rank is FNUZ, because hetccl's
//   kernels and host math reduce OCP fp8.
// The conversions are queued on the call's stream (GPU ranks) or done at
// once (CPU ranks). Pass-through communicators are left alone: the
// vendor's library reads its own fp8. docs/numerics.md has the semantics.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/op.h"
#include "kernels/reducer.h"
#include "runtime/owned.h"
#include "runtime/runtime.h"

namespace hetccl {

class Communicator;

class Fp8Bridge {
 public:
  explicit Fp8Bridge(Runtime& rt) : rt_(rt) {}
  ~Fp8Bridge();
  Fp8Bridge(const Fp8Bridge&) = delete;
  Fp8Bridge& operator=(const Fp8Bridge&) = delete;

  // Whether `op` on `c` needs converting (never on pass-through: the
  // vendor library reads its own format; the router asks only otherwise).
  static bool needed(const Communicator& c, const Op& op);
  using Dispatch = std::function<ncclResult_t(std::span<const Op* const>)>;
  // Runs `ops` (one communicator's share of a call or group, in order)
  // through `dispatch`, converting those that are `needed`.
  ncclResult_t run(Communicator& c, std::span<const Op* const> ops, const Dispatch& dispatch);

 private:
  // Device (GPU ranks) or host memory; reused once the stream that last
  // used it has passed that use, or by a later call on the same stream.
  struct Block {
    DeviceMemory memory;  // (freeing it waits for work still using it, on GPU runtimes)
    size_t bytes = 0;
    OwnedEvent passed;
    Stream lastStream = nullptr;
    bool used = false;  // recorded at least once
    bool taken = false; // by the call running now
  };
  ncclResult_t check(const Communicator& c, const Op& op) const;
  ncclResult_t take(size_t bytes, Stream s, void** p);
  // Idle blocks (no call of theirs still queued) too small for `bytes`.
  ncclResult_t freeIdleBlocksSmallerThan(size_t bytes);
  // A conversion left for after the call: `n` elements at `p`, into this
  // rank's format: from float scratch (`from`; `format` is this rank's),
  // or in place from the sender's format (`from` null; `format` the sender's).
  struct After {
    void* p;
    const void* from;  // float scratch, or nullptr: in place from `format`
    size_t n;
    Fp8Format format;
    ncclDataType_t type;
    Stream stream;
  };
  ncclResult_t reduceOnFloat(const Communicator& c, const Op& op, Op* onFloat, std::vector<After>* after);
  static void partsToConvert(const Communicator& c, const Op& op, std::vector<After>* after);
  // Marks the blocks this call took as passed once their streams get here.
  ncclResult_t giveBack();

  Runtime& rt_;
  std::unique_ptr<Reducer> caster_;
  std::vector<std::unique_ptr<Block>> blocks_;
};

}  // namespace hetccl
