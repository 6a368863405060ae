// Which fp8 a rank computes in: an AMD GPU's gfx target from a KFD topology
// (a made-up one in a temporary directory), and the formats it implies.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/fp8_format.h"

using namespace hetccl;

namespace {

class Topology {
 public:
  Topology() {
    char pattern[] = "/tmp/hetccl-kfd-XXXXXX";
    root_ = mkdtemp(pattern);
  }
  ~Topology() {
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
  void addNode(int node, const std::string& properties) {
    const std::string dir = root_ + "/" + std::to_string(node);
    mkdir(dir.c_str(), 0755);
    std::ofstream(dir + "/properties") << properties;
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

}  // namespace

TEST(Fp8Format, GfxTargetFoundByPciAddress) {
  Topology t;
  t.addNode(0, "cpu_cores_count 64\nsimd_count 0\ngfx_target_version 0\nlocation_id 0\ndomain 0\n");
  // gfx942 at 0000:c1:00.0 (location_id = bus << 8 | device << 3 | function).
  t.addNode(1, "simd_count 1216\ngfx_target_version 90402\nlocation_id 49408\ndomain 0\n");
  // gfx1100 at 0001:03:00.1: another PCI domain, a function number.
  t.addNode(2, "gfx_target_version 110000\nlocation_id 769\ndomain 1\n");
  EXPECT_EQ(amdGfxTargetVersion("0000:c1:00.0", t.root()), 90402);
  EXPECT_EQ(amdGfxTargetVersion("0000:C1:00.0", t.root()), 90402);  // runtimes may print upper case
  EXPECT_EQ(amdGfxTargetVersion("0001:03:00.1", t.root()), 110000);
  EXPECT_EQ(amdGfxTargetVersion("0000:03:00.1", t.root()), 0);  // right bus, wrong domain
  EXPECT_EQ(amdGfxTargetVersion("0000:c2:00.0", t.root()), 0);
  EXPECT_EQ(amdGfxTargetVersion("not a bus id", t.root()), 0);
  EXPECT_EQ(amdGfxTargetVersion("0000:c1:00.0", t.root() + "/missing"), 0);
}

TEST(Fp8Format, OnlyMi300IsFnuz) {
  for (int v : {90400, 90401, 90402}) EXPECT_EQ(fp8FormatOfGfxTarget(v), Fp8Format::Fnuz) << v;
  // gfx908, gfx90a, gfx950 (MI350), gfx1100, gfx1201 (RDNA4), unknown.
  for (int v : {90008, 90010, 90500, 110000, 120001, 0}) EXPECT_EQ(fp8FormatOfGfxTarget(v), Fp8Format::Ocp) << v;
}

TEST(Fp8Format, HostRanksAreOcp) {
  std::string why;
  EXPECT_EQ(rankFp8Format(hostRuntime(), -1, &why), Fp8Format::Ocp);
  EXPECT_NE(why.find("OCP"), std::string::npos) << why;
}
