#include "kernels/device/device_kernels.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/error.h"
#include "kernels/device/kernel_images.h"

namespace hetccl {

namespace {

// Kernel name suffixes, indexed by ncclDataType_t and RedKind (see device_kernels.cu).
const char* const kTypeSuffix[ncclNumTypes] = {"i8", "u8", "i32", "u32", "i64", "u64",
                                               "f16", "f32", "f64", "bf16", "e4m3", "e5m2"};
const char* const kOpSuffix[5] = {"sum", "prod", "max", "min", "premulsum"};
// The floating types casts convert between, in the kernels' order.
const ncclDataType_t kCastType[] = {ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};

int castIndex(ncclDataType_t t) {
  for (int i = 0; i < 6; ++i)
    if (kCastType[i] == t) return i;
  return -1;
}

constexpr unsigned kThreads = 512;
constexpr size_t kMaxBlocks = 4096;
constexpr unsigned kLowLatencyThreads = 256;
constexpr uint64_t kLowLatencyBlocks = 64;

}  // namespace

ncclResult_t DeviceKernels::load(Runtime& runtime, std::unique_ptr<DeviceKernels>* out) {
  const KernelImage image = kernelImageFor(runtime.name());
  if (!image.data)
    return fail(ncclInvalidUsage, "this libhetccl.so was built without %s kernels (its compiler was missing at build time)",
                runtime.name());
  std::unique_ptr<DeviceKernels> k(new DeviceKernels(runtime));
  HETCCL_TRY(runtime.loadModule(image.data, &k->module_));
  HETCCL_TRY(k->bind());
  *out = std::move(k);
  return ncclSuccess;
}

DeviceKernels::~DeviceKernels() {
  if (module_) runtime_.unloadModule(module_);
}

void DeviceKernels::eachKernel(DeviceKernels* k, const std::function<void(const std::string&, Function*)>& visit) {
  for (int t = 0; t < ncclNumTypes; ++t) {
    const std::string type = kTypeSuffix[t];
    for (int op = 0; op < 5; ++op)
      visit("hetccl_reduce_" + type + "_" + kOpSuffix[op], k ? &k->reduce_[t][op] : nullptr);
    visit("hetccl_ll_" + type, k ? &k->lowLatency_[t] : nullptr);
    visit("hetccl_prepare_" + type, k ? &k->prepare_[t] : nullptr);
    visit("hetccl_average_" + type, k ? &k->average_[t] : nullptr);
  }
  for (int f = 0; f < kCastTypes; ++f)
    for (int t = 0; t < kCastTypes; ++t)
      visit(std::string("hetccl_cast_") + kTypeSuffix[kCastType[f]] + "_" + kTypeSuffix[kCastType[t]],
            k ? &k->cast_[f][t] : nullptr);
  for (int t = 0; t < 2; ++t) {
    const std::string ocp = t ? "e5m2" : "e4m3", fnuz = ocp + "fnuz";
    visit("hetccl_cast_" + fnuz + "_f32", k ? &k->fnuzCast_[t][static_cast<int>(Fp8CastKind::ToFloat)] : nullptr);
    visit("hetccl_cast_f32_" + fnuz, k ? &k->fnuzCast_[t][static_cast<int>(Fp8CastKind::FromFloat)] : nullptr);
    visit("hetccl_cast_" + fnuz + "_" + ocp, k ? &k->fnuzCast_[t][static_cast<int>(Fp8CastKind::ToOtherFormat)] : nullptr);
    visit("hetccl_cast_" + ocp + "_" + fnuz, k ? &k->ocpToFnuz_[t] : nullptr);
  }
  visit("hetccl_inbox_pump", k ? &k->pump_ : nullptr);
  visit("hetccl_ll_p2p", k ? &k->lowLatencyP2p_ : nullptr);
}

std::vector<std::string> DeviceKernels::kernelNames() {
  std::vector<std::string> names;
  eachKernel(nullptr, [&](const std::string& name, Function*) { names.push_back(name); });
  return names;
}

ncclResult_t DeviceKernels::bind() {
  ncclResult_t result = ncclSuccess;
  eachKernel(this, [&](const std::string& name, Function* slot) {
    if (result == ncclSuccess) result = runtime_.getFunction(module_, name.c_str(), slot);
  });
  return result;
}

ncclResult_t DeviceKernels::run(Function f, size_t n, void** args, Stream s) {
  if (n == 0) return ncclSuccess;
  const size_t blocks = std::min(kMaxBlocks, (n + kThreads - 1) / kThreads);
  return runtime_.launch(f, static_cast<unsigned>(blocks), kThreads, args, s);
}

ncclResult_t DeviceKernels::reduce(const Reduction& r, void* dst, const void* incoming, const void* local, size_t n,
                                   Stream s) {
  uint64_t count = n, scalar = r.scalar;
  void* args[] = {&dst, &incoming, &local, &count, &scalar};
  return run(reduce_[r.type][static_cast<int>(r.kind)], n, args, s);
}

ncclResult_t DeviceKernels::prepare(const Reduction& r, void* dst, const void* local, size_t n, Stream s) {
  if (r.kind != RedKind::PreMulSum) return dst == local ? ncclSuccess : runtime_.copyAsync(dst, local, n * typeSize(r.type), s);
  uint64_t count = n, scalar = r.scalar;
  void* args[] = {&dst, &local, &count, &scalar};
  return run(prepare_[r.type], n, args, s);
}

ncclResult_t DeviceKernels::average(ncclDataType_t type, void* data, size_t n, int nranks, Stream s) {
  uint64_t count = n;
  void* args[] = {&data, &count, &nranks};
  return run(average_[type], n, args, s);
}

ncclResult_t DeviceKernels::cast(ncclDataType_t from, ncclDataType_t to, void* dst, const void* src, size_t n, Stream s) {
  const int f = castIndex(from), t = castIndex(to);
  if (f < 0 || t < 0)
    return fail(ncclInvalidArgument, "no cast kernel from %s to %s (floating types only)", typeName(from), typeName(to));
  uint64_t count = n;
  void* args[] = {&dst, &src, &count};
  return run(cast_[f][t], n, args, s);
}

ncclResult_t DeviceKernels::castFp8(const Fp8Cast& c, void* dst, const void* src, size_t n, Stream s) {
  HETCCL_TRY(checkFp8Cast(c));
  const int t = c.fp8 == ncclFloat8e5m2;
  Function f = nullptr;
  if (c.format == Fp8Format::Fnuz) f = fnuzCast_[t][static_cast<int>(c.kind)];
  else if (c.kind == Fp8CastKind::ToFloat) return cast(c.fp8, ncclFloat32, dst, src, n, s);
  else if (c.kind == Fp8CastKind::FromFloat) return cast(ncclFloat32, c.fp8, dst, src, n, s);
  else f = ocpToFnuz_[t];
  uint64_t count = n;
  void* args[] = {&dst, &src, &count};
  return run(f, n, args, s);
}

ncclResult_t DeviceKernels::pumpInbox(const inbox::PumpArgs& a, Stream s) {
  inbox::PumpArgs copy = a;
  void* args[] = {&copy};
  return runtime_.launch(pump_, 1, 256, args, s);
}

ncclResult_t DeviceKernels::lowLatency(ncclDataType_t type, const low_latency::Args& a, Stream s) {
  // A thread per group posted or read (each read a PCIe round trip, so
  // many in flight), up to kLowLatencyBlocks blocks.
  low_latency::Args copy = a;
  void* args[] = {&copy};
  const uint64_t blocks = std::clamp<uint64_t>((low_latency::work(a) + kLowLatencyThreads - 1) / kLowLatencyThreads, 1,
                                               kLowLatencyBlocks);
  return runtime_.launch(lowLatency_[type], static_cast<unsigned>(blocks), kLowLatencyThreads, args, s);
}

ncclResult_t DeviceKernels::lowLatencyP2p(const low_latency::P2pArgs& a, Stream s) {
  if (a.count <= 0) return ncclSuccess;
  low_latency::P2pArgs copy = a;
  void* args[] = {&copy};
  return runtime_.launch(lowLatencyP2p_, static_cast<unsigned>(a.count), kLowLatencyThreads, args, s);
}

}  // namespace hetccl
