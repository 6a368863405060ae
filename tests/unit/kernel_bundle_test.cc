// The AMD kernel image embedded in libhetccl.so, checked where no AMD GPU
// exists: it is a clang offload bundle with one code object for every
// architecture the build says it built (cmake/kernels.cmake), each an AMD
// GPU ELF for that architecture holding every kernel DeviceKernels binds.
// Formats: the offload bundle header (magic, entry count, then offset,
// size and target id per entry) and ELF64 with EF_AMDGPU_MACH in e_flags,
// as LLVM's AMDGPUUsage documents them.
#include <elf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/device/device_kernels.h"
#include "kernels/device/kernel_images.h"

namespace hetccl {
namespace {

struct BundleEntry {
  std::string target;  // e.g. hipv4-amdgcn-amd-amdhsa--gfx942
  const unsigned char* data;
  uint64_t size;
};

template <typename T> T readAt(const unsigned char* base, uint64_t offset) {
  T v;
  memcpy(&v, base + offset, sizeof v);
  return v;
}

std::vector<BundleEntry> parseBundle(const KernelImage& image) {
  const auto* b = static_cast<const unsigned char*>(image.data);
  std::vector<BundleEntry> entries;
  const char kMagic[] = "__CLANG_OFFLOAD_BUNDLE__";
  if (image.size < 32 || memcmp(b, kMagic, 24) != 0) return entries;
  const uint64_t count = readAt<uint64_t>(b, 24);
  uint64_t at = 32;
  for (uint64_t i = 0; i < count; ++i) {
    EXPECT_LE(at + 24, image.size) << "bundle header runs past the image";
    if (at + 24 > image.size) break;
    const uint64_t offset = readAt<uint64_t>(b, at), size = readAt<uint64_t>(b, at + 8);
    const uint64_t idSize = readAt<uint64_t>(b, at + 16);
    at += 24;
    EXPECT_LE(at + idSize, image.size);
    EXPECT_LE(offset + size, image.size) << "entry " << i << " runs past the image";
    if (at + idSize > image.size || offset + size > image.size) break;
    entries.push_back({std::string(reinterpret_cast<const char*>(b + at), idSize), b + offset, size});
    at += idSize;
  }
  return entries;
}

// Every symbol name in the ELF's symbol tables.
std::set<std::string> symbolsOf(const unsigned char* elf, uint64_t size) {
  std::set<std::string> names;
  const auto header = readAt<Elf64_Ehdr>(elf, 0);
  if (header.e_shoff + uint64_t{header.e_shnum} * sizeof(Elf64_Shdr) > size) return names;
  for (int s = 0; s < header.e_shnum; ++s) {
    const auto section = readAt<Elf64_Shdr>(elf, header.e_shoff + s * sizeof(Elf64_Shdr));
    if (section.sh_type != SHT_SYMTAB && section.sh_type != SHT_DYNSYM) continue;
    const auto strings = readAt<Elf64_Shdr>(elf, header.e_shoff + section.sh_link * sizeof(Elf64_Shdr));
    for (uint64_t at = 0; at + sizeof(Elf64_Sym) <= section.sh_size; at += sizeof(Elf64_Sym)) {
      const auto symbol = readAt<Elf64_Sym>(elf, section.sh_offset + at);
      if (strings.sh_offset + symbol.st_name < size)
        names.insert(reinterpret_cast<const char*>(elf + strings.sh_offset + symbol.st_name));
    }
  }
  return names;
}

// EF_AMDGPU_MACH (the low byte of e_flags) of the architectures hetccl builds.
const std::map<std::string, unsigned> kMachOf = {
    {"gfx908", 0x30},  {"gfx90a", 0x3f},  {"gfx942", 0x4c},  {"gfx950", 0x4f},
    {"gfx1030", 0x36}, {"gfx1100", 0x41}, {"gfx1101", 0x46}, {"gfx1200", 0x48}, {"gfx1201", 0x4e}};

std::vector<std::string> archsBuilt() {
  std::vector<std::string> archs;
  std::stringstream list(HETCCL_HIP_ARCHS_BUILT);
  for (std::string arch; std::getline(list, arch, ',');)
    if (!arch.empty()) archs.push_back(arch);
  return archs;
}

TEST(KernelBundle, EveryBuiltArchitectureHoldsEveryKernel) {
  const KernelImage image = kernelImageFor("hip");
  const std::vector<std::string> archs = archsBuilt();
  if (!image.data) {
    EXPECT_TRUE(archs.empty()) << "architectures built but no image embedded";
    GTEST_SKIP() << "built without AMD kernels";
  }
  ASSERT_FALSE(archs.empty());
  const std::vector<BundleEntry> entries = parseBundle(image);
  ASSERT_FALSE(entries.empty()) << "the HIP image is not a clang offload bundle";
  for (const BundleEntry& e : entries) {  // nothing but the host entry and the architectures built
    if (e.target.rfind("host-", 0) == 0) continue;
    bool known = false;
    for (const std::string& arch : archs) known |= e.target == "hipv4-amdgcn-amd-amdhsa--" + arch;
    EXPECT_TRUE(known) << "unexpected bundle entry '" << e.target << "'";
  }
  const std::vector<std::string> kernels = DeviceKernels::kernelNames();
  ASSERT_GT(kernels.size(), 100u);
  for (const std::string& arch : archs) {
    SCOPED_TRACE(arch);
    const BundleEntry* entry = nullptr;
    for (const BundleEntry& e : entries)
      if (e.target == "hipv4-amdgcn-amd-amdhsa--" + arch) entry = &e;
    ASSERT_NE(entry, nullptr) << "no code object for " << arch;
    ASSERT_GE(entry->size, sizeof(Elf64_Ehdr));
    const auto header = readAt<Elf64_Ehdr>(entry->data, 0);
    ASSERT_EQ(memcmp(header.e_ident, ELFMAG, SELFMAG), 0);
    EXPECT_EQ(header.e_machine, EM_AMDGPU);
    ASSERT_TRUE(kMachOf.count(arch)) << "add " << arch << "'s EF_AMDGPU_MACH to the table";
    EXPECT_EQ(header.e_flags & 0xffu, kMachOf.at(arch)) << "the code object is for another architecture";
    const std::set<std::string> symbols = symbolsOf(entry->data, entry->size);
    for (const std::string& kernel : kernels)
      EXPECT_TRUE(symbols.count(kernel + ".kd")) << kernel << " has no kernel descriptor";
  }
}

}  // namespace
}  // namespace hetccl
