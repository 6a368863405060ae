// A receive that reduces incoming bytes into `dst` with the rank's own
// `local` data as they arrive: dst = incoming (op) local.
#pragma once

#include "kernels/host_reduce.h"
#include "transport/transport.h"

namespace hetccl {

class ReduceSink : public RecvSink {
 public:
  ReduceSink(const Reduction& red, void* dst, const void* local)
      : red_(red), dst_(static_cast<char*>(dst)), local_(static_cast<const char*>(local)), elem_(typeSize(red.type)) {}
  void consume(const void* src, size_t offset, size_t length) override {
    reduceInto(red_, dst_ + offset, src, local_ + offset, length / elem_);
  }

 private:
  Reduction red_;
  char* dst_;
  const char* local_;
  size_t elem_;
};

// Element range [begin, end) of block `i` when `count` elements are split
// into `blocks` nearly equal blocks.
inline size_t blockBegin(size_t count, int blocks, int i) { return count * static_cast<size_t>(i) / static_cast<size_t>(blocks); }

}  // namespace hetccl
