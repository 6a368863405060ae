#include "kernels/host_reduce.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/host_reduce_table.h"
#include "kernels/reduce_math.h"

// The loops are compiled twice: for the baseline and, on x86-64, for AVX2
// (twice the vector width), and each process takes the table its CPU can
// run. The wider vectors make the bfloat16 and fp8 conversions about twice
// as fast again (docs/performance.md). Contraction into FMA stays off
// (CMakeLists.txt: -ffp-contract=off), so both give the same bits. half
// takes the CPU's own conversions where it has them (host_reduce_f16c.cc).
#if HETCCL_X86_FEATURES
#define HETCCL_AVX2 __attribute__((target("avx2")))
#else
#define HETCCL_AVX2
#endif

namespace hetccl {

namespace {

// The loops, inlined into each build of them below.
template <typename S, RedKind K>
[[gnu::always_inline]] inline void reduceLoop(const Reduction& r, void* dstv, const void* inv, const void* localv, size_t n) {
  using N = Num<S>;
  using C = typename N::C;
  S* dst = static_cast<S*>(dstv);
  const S* in = static_cast<const S*>(inv);
  const S* local = static_cast<const S*>(localv);
  [[maybe_unused]] const C scalar = K == RedKind::PreMulSum ? scalarOf<S>(r) : C{};
  for (size_t i = 0; i < n; ++i) dst[i] = reduceElement<S, K>(in[i], local[i], scalar);
}

template <typename S>
[[gnu::always_inline]] inline void prepareLoop(const Reduction& r, void* dstv, const void* localv, size_t n) {
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
[[gnu::always_inline]] inline void averageLoop(void* datav, size_t n, int nranks) {
  S* data = static_cast<S*>(datav);
  for (size_t i = 0; i < n; ++i) data[i] = divideBy<S>(data[i], nranks);
}

template <typename S, RedKind K>
void reduceBase(const Reduction& r, void* dst, const void* in, const void* local, size_t n) {
  reduceLoop<S, K>(r, dst, in, local, n);
}
template <typename S, RedKind K>
HETCCL_AVX2 void reduceAvx2(const Reduction& r, void* dst, const void* in, const void* local, size_t n) {
  reduceLoop<S, K>(r, dst, in, local, n);
}
template <typename S>
void prepareBase(const Reduction& r, void* dst, const void* local, size_t n) {
  prepareLoop<S>(r, dst, local, n);
}
template <typename S>
HETCCL_AVX2 void prepareAvx2(const Reduction& r, void* dst, const void* local, size_t n) {
  prepareLoop<S>(r, dst, local, n);
}
template <typename S>
void averageBase(void* data, size_t n, int nranks) {
  averageLoop<S>(data, n, nranks);
}
template <typename S>
HETCCL_AVX2 void averageAvx2(void* data, size_t n, int nranks) {
  averageLoop<S>(data, n, nranks);
}

template <typename S, bool Avx2>
constexpr HostReduceOps opsFor() {
  if constexpr (Avx2)
    return HostReduceOps{{&reduceAvx2<S, RedKind::Sum>, &reduceAvx2<S, RedKind::Prod>, &reduceAvx2<S, RedKind::Max>,
                          &reduceAvx2<S, RedKind::Min>, &reduceAvx2<S, RedKind::PreMulSum>},
                         &prepareAvx2<S>,
                         &averageAvx2<S>};
  else
    return HostReduceOps{{&reduceBase<S, RedKind::Sum>, &reduceBase<S, RedKind::Prod>, &reduceBase<S, RedKind::Max>,
                          &reduceBase<S, RedKind::Min>, &reduceBase<S, RedKind::PreMulSum>},
                         &prepareBase<S>,
                         &averageBase<S>};
}

// Indexed by ncclDataType_t.
template <bool Avx2>
constexpr std::array<HostReduceOps, ncclNumTypes> tableFor() {
  return {opsFor<int8_t, Avx2>(),  opsFor<uint8_t, Avx2>(), opsFor<int32_t, Avx2>(), opsFor<uint32_t, Avx2>(),
          opsFor<int64_t, Avx2>(), opsFor<uint64_t, Avx2>(), opsFor<Half, Avx2>(),   opsFor<float, Avx2>(),
          opsFor<double, Avx2>(),  opsFor<Bf16, Avx2>(),     opsFor<Fp8E4M3, Avx2>(), opsFor<Fp8E5M2, Avx2>()};
}

const std::array<HostReduceOps, ncclNumTypes> kBaseTable = tableFor<false>();
const std::array<HostReduceOps, ncclNumTypes> kAvx2Table = tableFor<true>();

bool cpuHasAvx2() {
#if HETCCL_X86_FEATURES
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

std::atomic<bool> useCpuFeatures{true};  // tests: false takes the baseline loops

// The AVX2 loops where the CPU has AVX2, half with the CPU's conversions
// where it has them (host_reduce_f16c.cc).
const HostReduceOps& opsOf(ncclDataType_t type) {
  static const HostReduceOps* const half = halfOpsWithF16c();
  static const HostReduceOps* const table = cpuHasAvx2() ? kAvx2Table.data() : kBaseTable.data();
  if (!useCpuFeatures.load(std::memory_order_relaxed)) return kBaseTable[type];
  if (type == ncclFloat16 && half) return *half;
  return table[type];
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

bool hostReduceUsesCpuFeatures(bool use) {
  useCpuFeatures.store(use);
  return halfOpsWithF16c() != nullptr || cpuHasAvx2();
}

}  // namespace hetccl
