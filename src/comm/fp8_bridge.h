// fp8 collectives among ranks that read fp8 differently: NVIDIA GPUs and
// CPU ranks use OCP's formats, AMD MI300 FNUZ's (runtime/fp8_format.h).
// Moving the bytes as they are would change every value (an OCP byte read
// as FNUZ is half the value; OCP's -0 is FNUZ's NaN), so such a call runs
// on a wide type instead: each rank converts its input from its own fp8
// into scratch (half for collectives that move data, float for reductions),
// the collective runs on the scratch, and each rank converts the result
// back into its own fp8 (rounded to nearest even, saturating). Reductions
// where some rank is FNUZ run the same way even when all agree, because
// hetccl's kernels and host math reduce OCP fp8.
//
// The conversions are queued on the call's stream (GPU ranks) or done at
// once (CPU ranks). Pass-through communicators are left alone: the
// vendor's library reads its own fp8.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "algorithms/op.h"
#include "kernels/reducer.h"
#include "runtime/runtime.h"

namespace hetccl {

class Communicator;

class Fp8Bridge {
 public:
  explicit Fp8Bridge(Runtime& rt) : rt_(rt) {}
  ~Fp8Bridge();
  Fp8Bridge(const Fp8Bridge&) = delete;
  Fp8Bridge& operator=(const Fp8Bridge&) = delete;

  // Whether `op` on `c` must run on a wide type.
  static bool needed(const Communicator& c, const Op& op);
  using Dispatch = std::function<ncclResult_t(std::span<const Op* const>)>;
  // Runs `ops` (one communicator's share of a call or group, in order)
  // through `dispatch`, each op that is `needed` on its wide type.
  ncclResult_t run(Communicator& c, std::span<const Op* const> ops, const Dispatch& dispatch);

 private:
  // Device (GPU ranks) or host memory; reused once the stream that last
  // used it has passed that use, or by a later call on the same stream.
  struct Block {
    void* p = nullptr;
    size_t bytes = 0;
    Event passed = nullptr;
    Stream lastStream = nullptr;
    bool used = false;  // recorded at least once
    bool taken = false; // by the call running now
  };
  ncclResult_t check(const Communicator& c, const Op& op) const;
  ncclResult_t take(size_t bytes, Stream s, void** p);
  ncclResult_t widen(const Communicator& c, const Op& op, Op* wide, std::vector<Op>* narrows);
  // Marks the blocks this call took as passed once their streams get here.
  ncclResult_t giveBack();

  Runtime& rt_;
  std::unique_ptr<Reducer> caster_;
  std::vector<std::unique_ptr<Block>> blocks_;
};

}  // namespace hetccl
