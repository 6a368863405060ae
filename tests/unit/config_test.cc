// ncclConfig_t of every layout since NCCL 2.14 is read by its size field.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "common/error.h"
#include "common/name_list.h"

using namespace hetccl;

namespace {

// Sizes of ncclConfig_t as NCCL grew it (x86-64).
struct Layout {
  const char* version;
  size_t size;
};
const Layout kLayouts[] = {
    {"2.14 (through netName)", offsetof(ncclConfig_t, netName) + sizeof(const char*)},
    {"2.17 (splitShare)", offsetof(ncclConfig_t, splitShare) + sizeof(int)},
    {"2.19 (trafficClass, commName)", offsetof(ncclConfig_t, commName) + sizeof(const char*)},
    {"2.24 (collnetEnable, CTAPolicy)", offsetof(ncclConfig_t, CTAPolicy) + sizeof(int)},
    {"2.27 (shrinkShare, nvlsCTAs)", offsetof(ncclConfig_t, nvlsCTAs) + sizeof(int)},
    {"2.28 (nChannelsPerNetPeer, nvlinkCentricSched)", offsetof(ncclConfig_t, graphUsageMode)},
    {"2.30 (graphUsageMode ... graphStreamOrdering)", sizeof(ncclConfig_t)},
};

}  // namespace

TEST(Config, NullMeansDefaults) {
  CommConfig c;
  ASSERT_EQ(readConfig(nullptr, &c), ncclSuccess);
  EXPECT_TRUE(c.blocking);
}

TEST(Config, EveryLayoutReadsOnlyItsOwnBytes) {
  for (const Layout& l : kLayouts) {
    // The application's struct ends at l.size; what follows is garbage that
    // must not be read (a bad commName pointer would crash).
    std::vector<unsigned char> buf(sizeof(ncclConfig_t) + 64, 0xff);
    ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
    memcpy(buf.data(), &init, l.size);
    auto* cfg = reinterpret_cast<ncclConfig_t*>(buf.data());
    cfg->size = l.size;
    cfg->blocking = 0;
    CommConfig out;
    ASSERT_EQ(readConfig(cfg, &out), ncclSuccess) << l.version;
    EXPECT_FALSE(out.blocking) << l.version;
    EXPECT_TRUE(out.name.empty()) << l.version;
    // The vendor's copy: the current layout, later fields undefined.
    EXPECT_TRUE(out.given) << l.version;
    EXPECT_EQ(out.fields.size, sizeof(ncclConfig_t)) << l.version;
    EXPECT_EQ(out.fields.version, static_cast<unsigned>(NCCL_VERSION_CODE)) << l.version;
    if (l.size < offsetof(ncclConfig_t, graphUsageMode))
      EXPECT_EQ(out.fields.nvlinkCentricSched, NCCL_CONFIG_UNDEF_INT) << l.version;
    if (l.size < sizeof(ncclConfig_t)) EXPECT_EQ(out.fields.graphStreamOrdering, NCCL_CONFIG_UNDEF_INT) << l.version;
    EXPECT_EQ(out.fields.netName, nullptr) << l.version;
  }
}

// What the vendor library gets on pass-through: the application's fields.
TEST(Config, KeepsTheFieldsForTheVendorLibrary) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.cgaClusterSize = 2;
  cfg.minCTAs = 2;
  cfg.maxCTAs = 8;
  cfg.netName = "Socket";
  cfg.trafficClass = 3;
  cfg.commName = "trainer";
  cfg.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY;
  cfg.nvlinkCentricSched = 1;
  cfg.maxP2pPeers = 4;
  CommConfig out;
  ASSERT_EQ(readConfig(&cfg, &out), ncclSuccess);
  EXPECT_TRUE(out.given);
  EXPECT_EQ(out.fields.cgaClusterSize, 2);
  EXPECT_EQ(out.fields.minCTAs, 2);
  EXPECT_EQ(out.fields.maxCTAs, 8);
  EXPECT_EQ(out.fields.trafficClass, 3);
  EXPECT_EQ(out.fields.CTAPolicy, NCCL_CTA_POLICY_EFFICIENCY);
  EXPECT_EQ(out.fields.nvlinkCentricSched, 1);
  EXPECT_EQ(out.fields.maxP2pPeers, 4);
  EXPECT_EQ(out.fields.splitShare, NCCL_CONFIG_UNDEF_INT);
  EXPECT_EQ(out.netName, "Socket");
  EXPECT_EQ(out.name, "trainer");
  EXPECT_FALSE(out.blocking);
  CommConfig none;
  ASSERT_EQ(readConfig(nullptr, &none), ncclSuccess);
  EXPECT_FALSE(none.given);
}

TEST(Config, RejectsOutOfRangeValues) {
  struct Case {
    int ncclConfig_t::*field;
    int value;
    const char* name;
  } cases[] = {
      {&ncclConfig_t::cgaClusterSize, -1, "cgaClusterSize"}, {&ncclConfig_t::minCTAs, -3, "minCTAs"},
      {&ncclConfig_t::maxCTAs, -1, "maxCTAs"},               {&ncclConfig_t::splitShare, 2, "splitShare"},
      {&ncclConfig_t::collnetEnable, -1, "collnetEnable"},   {&ncclConfig_t::shrinkShare, 5, "shrinkShare"},
      {&ncclConfig_t::nvlsCTAs, -2, "nvlsCTAs"},             {&ncclConfig_t::nvlinkCentricSched, 7, "nvlinkCentricSched"},
  };
  for (const Case& c : cases) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.*c.field = c.value;
    CommConfig out;
    EXPECT_EQ(readConfig(&cfg, &out), ncclInvalidArgument) << c.name;
    EXPECT_NE(std::string(lastError()).find(c.name), std::string::npos) << lastError();
    cfg.*c.field = 1;  // in range
    EXPECT_EQ(readConfig(&cfg, &out), ncclSuccess) << c.name;
  }
}

TEST(Config, ReadsCommName) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.commName = "trainer";
  CommConfig out;
  ASSERT_EQ(readConfig(&cfg, &out), ncclSuccess);
  EXPECT_EQ(out.name, "trainer");
  EXPECT_TRUE(out.blocking);
}

TEST(Config, RejectsBadMagicAndBlocking) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0;
  CommConfig out;
  EXPECT_EQ(readConfig(&cfg, &out), ncclInvalidArgument);
  cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 7;
  EXPECT_EQ(readConfig(&cfg, &out), ncclInvalidArgument);
  cfg = NCCL_CONFIG_INITIALIZER;
  cfg.size = 3;
  EXPECT_EQ(readConfig(&cfg, &out), ncclInvalidArgument);
}

// A newer NCCL's struct (larger, say from a newer PyTorch): read, with a
// note that its extra fields are ignored; not a crash.
TEST(Config, NewerLayoutIsReadWithANote) {
  std::vector<unsigned char> buf(sizeof(ncclConfig_t) + 64, 0xff);
  ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
  init.blocking = 0;
  memcpy(buf.data(), &init, sizeof(init));
  auto* cfg = reinterpret_cast<ncclConfig_t*>(buf.data());
  cfg->size = buf.size();
  cfg->version = NCCL_VERSION(2, 99, 0);
  hetccl::CommConfig out;
  ASSERT_EQ(hetccl::readConfig(cfg, &out), ncclSuccess);
  EXPECT_FALSE(out.blocking);
  EXPECT_NE(out.note.find("newer"), std::string::npos) << out.note;
  EXPECT_NE(out.note.find("ignored"), std::string::npos) << out.note;
  ncclConfig_t current = NCCL_CONFIG_INITIALIZER;
  ASSERT_EQ(hetccl::readConfig(&current, &out), ncclSuccess);
  EXPECT_TRUE(out.note.empty());
}

// NCCL's device-list syntax (NCCL_SOCKET_IFNAME, NCCL_IB_HCA).
TEST(NameList, PrefixesExactNamesExclusionAndPorts) {
  using hetccl::nameListMatches;
  EXPECT_TRUE(nameListMatches("", "mlx5_0", 1));
  EXPECT_TRUE(nameListMatches("mlx5", "mlx5_3", 1));
  EXPECT_FALSE(nameListMatches("mlx5", "bnxt_re0", 1));
  EXPECT_TRUE(nameListMatches("bnxt,mlx5", "mlx5_0", 2));
  EXPECT_FALSE(nameListMatches("=mlx5", "mlx5_0", 1));
  EXPECT_TRUE(nameListMatches("=mlx5_0,mlx5_1", "mlx5_1", 1));
  EXPECT_FALSE(nameListMatches("=mlx5_0,mlx5_1", "mlx5_10", 1));
  EXPECT_TRUE(nameListMatches("=mlx5_0:1,mlx5_1:1", "mlx5_0", 1));
  EXPECT_FALSE(nameListMatches("=mlx5_0:1,mlx5_1:1", "mlx5_0", 2));
  EXPECT_TRUE(nameListMatches("mlx5_0:2", "mlx5_0", 2));
  EXPECT_FALSE(nameListMatches("^mlx5", "mlx5_0", 1));
  EXPECT_TRUE(nameListMatches("^mlx5", "irdma0", 1));
  EXPECT_FALSE(nameListMatches("^=mlx5_1,mlx5_4", "mlx5_4", 1));
  EXPECT_TRUE(nameListMatches("^=mlx5_1,mlx5_4", "mlx5_2", 1));
  EXPECT_TRUE(nameListMatches("^=mlx5_1:2", "mlx5_1", 1));
  // Interfaces: the name is whole, colons and all (an IP alias).
  EXPECT_TRUE(nameListMatches("=eth0:1", "eth0:1"));
  EXPECT_FALSE(nameListMatches("=eth0:1", "eth0"));
  EXPECT_TRUE(nameListMatches("eth", "eth0"));
  EXPECT_FALSE(nameListMatches("^docker,lo", "lo"));
}
