// The GPU runtime and kernels, on whatever GPU the machine has (each test
// skips on a machine without one, such as CI): memory kinds, stream flags
// and events, and every kernel bit-for-bit against the host reductions
// (both compile the same reduce_math.h). The embedded images are checked
// on every machine.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "common/error.h"
#include "kernels/device/device_kernels.h"
#include "kernels/host_reduce.h"
#include "kernels/device/kernel_images.h"
#include "reference.h"
#include "runtime/runtime.h"

using namespace hetccl;

namespace {

Runtime* gpu() {
  Runtime& r = processRuntime();
  return r.hasDevices() ? &r : nullptr;
}

#define REQUIRE_GPU()                                          \
  Runtime* rt = gpu();                                         \
  if (!rt) GTEST_SKIP() << "no GPU runtime on this machine";   \
  ASSERT_EQ(rt->setDevice(0), ncclSuccess) << lastError()

// Device memory that frees itself.
struct DeviceBuffer {
  Runtime& rt;
  void* p = nullptr;
  DeviceBuffer(Runtime& r, size_t bytes) : rt(r) { EXPECT_EQ(rt.allocDevice(&p, bytes), ncclSuccess) << lastError(); }
  ~DeviceBuffer() { rt.freeDevice(p); }
};

// Random finite values of `type`, in [-range, range] before rounding.
std::vector<char> randomValues(ncclDataType_t type, size_t n, std::mt19937_64& rng, double range) {
  std::vector<char> v(n * typeSize(type));
  std::uniform_real_distribution<double> dist(-range, range);
  for (size_t i = 0; i < n; ++i) hetccl::testing::writeScalar(type, dist(rng), v.data() + i * typeSize(type));
  return v;
}

}  // namespace

TEST(KernelImages, BuiltImagesAreEmbedded) {
  const KernelImage cuda = kernelImageFor("cuda"), hip = kernelImageFor("hip");
  if (cuda.data) {
    uint32_t magic;
    memcpy(&magic, cuda.data, 4);
    EXPECT_EQ(magic, 0xba55ed50u) << "not a CUDA fatbin";
    EXPECT_GT(cuda.size, 100000u);
  }
  if (hip.data) EXPECT_EQ(memcmp(hip.data, "__CLANG_OFFLOAD_BUNDLE__", 24), 0) << "not a clang offload bundle";
  if (!cuda.data && !hip.data) GTEST_SKIP() << "built without nvcc and hipcc";
}

TEST(GpuRuntime, MemoryKindsAndFlags) {
  REQUIRE_GPU();
  DeviceBuffer dev(*rt, 1 << 20);
  std::vector<char> host(1 << 20);
  void* pinned = nullptr;
  ASSERT_EQ(rt->allocPinned(&pinned, 4096), ncclSuccess) << lastError();
  MemoryKind kind;
  int device;
  ASSERT_EQ(rt->memoryKind(dev.p, &kind, &device), ncclSuccess);
  EXPECT_EQ(kind, MemoryKind::Device);
  EXPECT_EQ(device, 0);
  ASSERT_EQ(rt->memoryKind(host.data(), &kind, &device), ncclSuccess);
  EXPECT_EQ(kind, MemoryKind::Host);
  ASSERT_EQ(rt->memoryKind(pinned, &kind, &device), ncclSuccess);
  EXPECT_EQ(kind, MemoryKind::Pinned);

  // A stream held by a flag in pinned memory: the copies behind it wait
  // until the host raises the flag. (Copies from pinned memory only:
  // pageable ones would block this thread behind the flag.)
  Stream s;
  Event e;
  ASSERT_EQ(rt->createStream(&s), ncclSuccess);
  ASSERT_EQ(rt->createEvent(&e), ncclSuccess);
  auto* flag = static_cast<volatile uint32_t*>(pinned);
  flag[0] = 0;
  flag[1] = 0;
  const size_t bytes = 1 << 20;
  void *src = nullptr, *dst = nullptr;
  ASSERT_EQ(rt->allocPinned(&src, bytes), ncclSuccess);
  ASSERT_EQ(rt->allocPinned(&dst, bytes), ncclSuccess);
  memset(src, 7, bytes);
  memset(dst, 0, bytes);
  ASSERT_EQ(rt->waitFlag(s, flag, 1), ncclSuccess) << lastError();
  ASSERT_EQ(rt->copyAsync(dev.p, src, bytes, s), ncclSuccess);
  ASSERT_EQ(rt->copyAsync(dst, dev.p, bytes, s), ncclSuccess);
  ASSERT_EQ(rt->writeFlag(s, flag + 1, 5), ncclSuccess) << lastError();
  ASSERT_EQ(rt->recordEvent(e, s), ncclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  bool done = true;
  ASSERT_EQ(rt->eventDone(e, &done), ncclSuccess);
  EXPECT_FALSE(done) << "the stream ran past an unset flag";
  EXPECT_EQ(flag[1], 0u);
  __atomic_store_n(flag, 1u, __ATOMIC_RELEASE);
  ASSERT_EQ(rt->synchronize(s), ncclSuccess);
  EXPECT_EQ(flag[1], 5u);
  EXPECT_EQ(memcmp(dst, src, bytes), 0);
  rt->destroyEvent(e);
  rt->destroyStream(s);
  rt->freePinned(src);
  rt->freePinned(dst);
  rt->freePinned(pinned);
}

// dma-buf export (for RDMA registration of GPU memory): any range of a
// device allocation, the pages around it exported with its offset in
// them. A device without dma-buf gets a clear error (the test says so).
TEST(GpuRuntime, DmabufExportOfAnyRangeOfDeviceMemory) {
  REQUIRE_GPU();
  DeviceBuffer dev(*rt, 8 << 20);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  char* p = static_cast<char*>(dev.p) + 3 * page + 100;
  const size_t bytes = (1 << 20) + 7;
  int fd = -1;
  uint64_t offset = 0;
  const ncclResult_t r = rt->exportDmabuf(p, bytes, &fd, &offset);
  if (r != ncclSuccess) {
    EXPECT_NE(strstr(lastError(), "dma-buf"), nullptr) << lastError();
    GTEST_SKIP() << "no dma-buf here: " << lastError();
  }
  ASSERT_GE(fd, 0);
  EXPECT_EQ(offset, 100u);
  const off_t size = lseek(fd, 0, SEEK_END);  // a dma-buf's size
  EXPECT_EQ(static_cast<size_t>(size), (offset + bytes + page - 1) / page * page) << "exported " << size << " bytes";
  close(fd);
  std::vector<char> host(4096);
  EXPECT_NE(rt->exportDmabuf(host.data(), host.size(), &fd, &offset), ncclSuccess) << "host memory exported";
  EXPECT_NE(strstr(lastError(), "host memory"), nullptr) << lastError();
}

TEST(GpuKernels, EveryTypeAndOpMatchesTheHostBitForBit) {
  REQUIRE_GPU();
  std::unique_ptr<DeviceKernels> k;
  ASSERT_EQ(DeviceKernels::load(*rt, &k), ncclSuccess) << lastError();
  std::mt19937_64 rng(hetccl::testing::runSeed());
  const size_t n = 100003;
  Stream s;
  ASSERT_EQ(rt->createStream(&s), ncclSuccess);
  for (int t = 0; t < ncclNumTypes; ++t) {
    const auto type = static_cast<ncclDataType_t>(t);
    const size_t bytes = n * typeSize(type);
    const double range = hetccl::testing::isIntegerType(type) ? 1e6 : 8.0;
    DeviceBuffer a(*rt, bytes), b(*rt, bytes), d(*rt, bytes);
    for (int op = 0; op < 5; ++op) {
      Reduction r;
      r.type = type;
      r.kind = static_cast<RedKind>(op);
      hetccl::testing::writeScalar(type, 1.5, &r.scalar);
      const std::vector<char> x = randomValues(type, n, rng, range), y = randomValues(type, n, rng, range);
      std::vector<char> want(bytes), got(bytes);
      reduceInto(r, want.data(), x.data(), y.data(), n);
      ASSERT_EQ(rt->copyAsync(a.p, x.data(), bytes, s), ncclSuccess);
      ASSERT_EQ(rt->copyAsync(b.p, y.data(), bytes, s), ncclSuccess);
      ASSERT_EQ(k->reduce(r, d.p, a.p, b.p, n, s), ncclSuccess) << lastError();
      ASSERT_EQ(rt->copyAsync(got.data(), d.p, bytes, s), ncclSuccess);
      ASSERT_EQ(rt->synchronize(s), ncclSuccess) << lastError();
      EXPECT_EQ(memcmp(got.data(), want.data(), bytes), 0) << typeName(type) << " op " << op;
      if (op == static_cast<int>(RedKind::PreMulSum)) {
        prepareLocal(r, want.data(), y.data(), n);
        ASSERT_EQ(k->prepare(r, d.p, b.p, n, s), ncclSuccess) << lastError();
        ASSERT_EQ(rt->copyAsync(got.data(), d.p, bytes, s), ncclSuccess);
        ASSERT_EQ(rt->synchronize(s), ncclSuccess);
        EXPECT_EQ(memcmp(got.data(), want.data(), bytes), 0) << typeName(type) << " prepare";
      }
    }
    // ncclAvg's division, in place.
    Reduction avg;
    avg.type = type;
    avg.average = true;
    const std::vector<char> x = randomValues(type, n, rng, range);
    std::vector<char> want = x, got(bytes);
    finishAverage(avg, want.data(), n, 3);
    ASSERT_EQ(rt->copyAsync(a.p, x.data(), bytes, s), ncclSuccess);
    ASSERT_EQ(k->average(type, a.p, n, 3, s), ncclSuccess) << lastError();
    ASSERT_EQ(rt->copyAsync(got.data(), a.p, bytes, s), ncclSuccess);
    ASSERT_EQ(rt->synchronize(s), ncclSuccess);
    EXPECT_EQ(memcmp(got.data(), want.data(), bytes), 0) << typeName(type) << " average";
  }
  rt->destroyStream(s);
}

TEST(GpuKernels, CastsRoundOnceToTheDestination) {
  REQUIRE_GPU();
  std::unique_ptr<DeviceKernels> k;
  ASSERT_EQ(DeviceKernels::load(*rt, &k), ncclSuccess) << lastError();
  const ncclDataType_t floating[] = {ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  std::mt19937_64 rng(hetccl::testing::runSeed() + 1);
  const size_t n = 4099;
  for (ncclDataType_t from : floating) {
    const std::vector<char> x = randomValues(from, n, rng, 100.0);
    DeviceBuffer src(*rt, x.size());
    ASSERT_EQ(rt->copyAsync(src.p, x.data(), x.size(), nullptr), ncclSuccess);
    for (ncclDataType_t to : floating) {
      DeviceBuffer dst(*rt, n * typeSize(to));
      ASSERT_EQ(k->cast(from, to, dst.p, src.p, n, nullptr), ncclSuccess) << lastError();
      std::vector<char> got(n * typeSize(to)), want(n * typeSize(to));
      ASSERT_EQ(rt->copyAsync(got.data(), dst.p, got.size(), nullptr), ncclSuccess);
      ASSERT_EQ(rt->synchronize(nullptr), ncclSuccess);
      for (size_t i = 0; i < n; ++i)
        hetccl::testing::writeScalar(to, hetccl::testing::readScalar(from, x.data(), i), want.data() + i * typeSize(to));
      EXPECT_EQ(memcmp(got.data(), want.data(), got.size()), 0) << typeName(from) << " -> " << typeName(to);
    }
  }
  int8_t i8 = 0;
  EXPECT_EQ(k->cast(ncclInt8, ncclFloat32, &i8, &i8, 1, nullptr), ncclInvalidArgument);
}

// fp8 of both formats to and from float and into the other format (the
// fp8 bridge's kernels): every byte and a sweep of floats, against the
// host's conversions (kernels/fp8_cast.h), which the unit tests hold
// against an independent model of the formats.
TEST(GpuKernels, Fp8CastsOfBothFormatsMatchTheHost) {
  REQUIRE_GPU();
  std::unique_ptr<DeviceKernels> k;
  ASSERT_EQ(DeviceKernels::load(*rt, &k), ncclSuccess) << lastError();
  std::mt19937_64 rng(hetccl::testing::runSeed() + 2);
  const size_t n = 256 * 16;
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i);
  const std::vector<char> floats = randomValues(ncclFloat32, n, rng, 70000.0);  // past every fp8's range
  for (ncclDataType_t fp8 : {ncclFloat8e4m3, ncclFloat8e5m2})
    for (Fp8Format format : {Fp8Format::Ocp, Fp8Format::Fnuz})
      for (Fp8CastKind kind : {Fp8CastKind::ToFloat, Fp8CastKind::FromFloat, Fp8CastKind::ToOtherFormat}) {
        const Fp8Cast cast{fp8, format, kind};
        const bool fromFloat = kind == Fp8CastKind::FromFloat, toFloat = kind == Fp8CastKind::ToFloat;
        const void* input = fromFloat ? static_cast<const void*>(floats.data()) : bytes.data();
        const size_t inBytes = fromFloat ? n * 4 : n, outBytes = toFloat ? n * 4 : n;
        DeviceBuffer in(*rt, inBytes), out(*rt, outBytes);
        ASSERT_EQ(rt->copyAsync(in.p, input, inBytes, nullptr), ncclSuccess);
        ASSERT_EQ(k->castFp8(cast, out.p, in.p, n, nullptr), ncclSuccess) << lastError();
        std::vector<char> got(outBytes), want(outBytes);
        ASSERT_EQ(rt->copyAsync(got.data(), out.p, outBytes, nullptr), ncclSuccess);
        ASSERT_EQ(rt->synchronize(nullptr), ncclSuccess);
        castFp8OnHost(cast, want.data(), input, n);
        EXPECT_EQ(memcmp(got.data(), want.data(), outBytes), 0)
            << typeName(fp8) << " " << fp8FormatName(format) << " kind " << static_cast<int>(kind);
      }
}
