#include "kernels/host_reduce.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/host_reduce_table.h"
#include "kernels/reduce_math.h"

// The loops are compiled twice on x86-64 with GCC: for the baseline and for
// x86-64-v3 (AVX2), which the loader picks at run time (an ifunc). The
// wider vectors make the bfloat16 and fp8 conversions about twice as fast
// again (docs/performance.md). Contraction into FMA stays off
// (CMakeLists.txt: -ffp-contract=off), so both give the same bits. half
// takes the CPU's own conversions where it has them (host_reduce_f16c.cc).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HETCCL_HOST_LOOP __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define HETCCL_HOST_LOOP
#endif

namespace hetccl {

namespace {

template <typename S>
typename Num<S>::C scalarOf(const Reduction& r) {
  S s;
  memcpy(&s, &r.scalar, sizeof(S));
  return Num<S>::load(s);
}

template <typename S, RedKind K>
HETCCL_HOST_LOOP void reduceT(const Reduction& r, void* dstv, const void* inv, const void* localv, size_t n) {
  using N = Num<S>;
  using C = typename N::C;
  S* dst = static_cast<S*>(dstv);
  const S* in = static_cast<const S*>(inv);
  const S* local = static_cast<const S*>(localv);
  [[maybe_unused]] const C scalar = K == RedKind::PreMulSum ? scalarOf<S>(r) : C{};
  for (size_t i = 0; i < n; ++i) dst[i] = reduceElement<S, K>(in[i], local[i], scalar);
}

template <typename S>
HETCCL_HOST_LOOP void prepareT(const Reduction& r, void* dstv, const void* localv, size_t n) {
  S* dst = static_cast<S*>(dstv);
  const S* local = static_cast<const S*>(localv);
  if (r.kind != RedKind::PreMulSum) {
    if (dstv != localv) memmove(dstv, localv, n * sizeof(S));
    return;
  }
  const auto scalar = scalarOf<S>(r);
  for (size_t i = 0; i < n; ++i) dst[i] = preMultiply<S>(local[i], scalar);
}

template <typename S>
HETCCL_HOST_LOOP void averageT(void* datav, size_t n, int nranks) {
  S* data = static_cast<S*>(datav);
  for (size_t i = 0; i < n; ++i) data[i] = divideBy<S>(data[i], nranks);
}

template <typename S>
constexpr HostReduceOps opsFor() {
  return HostReduceOps{{&reduceT<S, RedKind::Sum>, &reduceT<S, RedKind::Prod>, &reduceT<S, RedKind::Max>,
                        &reduceT<S, RedKind::Min>, &reduceT<S, RedKind::PreMulSum>},
                       &prepareT<S>,
                       &averageT<S>};
}

// Indexed by ncclDataType_t.
const HostReduceOps kTable[ncclNumTypes] = {
    opsFor<int8_t>(),   opsFor<uint8_t>(),  opsFor<int32_t>(), opsFor<uint32_t>(),
    opsFor<int64_t>(),  opsFor<uint64_t>(), opsFor<Half>(), opsFor<float>(),
    opsFor<double>(),   opsFor<Bf16>(),     opsFor<Fp8E4M3>(), opsFor<Fp8E5M2>(),
};

std::atomic<bool> useCpuConversions{true};

// half takes the CPU's conversions where it has them (host_reduce_f16c.cc).
const HostReduceOps& opsOf(ncclDataType_t type) {
  static const HostReduceOps* const half = halfOpsWithF16c();
  if (type == ncclFloat16 && half && useCpuConversions.load(std::memory_order_relaxed)) return *half;
  return kTable[type];
}

}  // namespace

void reduceInto(const Reduction& r, void* dst, const void* incoming, const void* local, size_t count) {
  if (count) opsOf(r.type).reduce[static_cast<int>(r.kind)](r, dst, incoming, local, count);
}

void prepareLocal(const Reduction& r, void* dst, const void* local, size_t count) {
  if (count) opsOf(r.type).prepare(r, dst, local, count);
}

void finishAverage(const Reduction& r, void* data, size_t count, int nranks) {
  if (r.average && count) opsOf(r.type).average(data, count, nranks);
}

bool hostReduceUsesCpuConversions(bool use) {
  useCpuConversions.store(use);
  return halfOpsWithF16c() != nullptr;
}

}  // namespace hetccl
