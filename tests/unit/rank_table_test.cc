// checkRankTable: a rank table from another process is taken only when
// every entry could have come from a hetccl rank and this rank's own came
// back unchanged; strings are ended within their arrays either way.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/rank_info.h"
#include "common/error.h"

using namespace hetccl;

namespace {

std::vector<RankInfo> twoRanks() {
  SocketAddress address;
  EXPECT_EQ(SocketAddress::parse("127.0.0.1:4000", &address), ncclSuccess);
  std::vector<RankInfo> table{RankInfo::local(address, -1), RankInfo::local(address, -1)};
  table[1].pid += 1;
  table[1].listenAddress.setPort(4001);
  return table;
}

}  // namespace

TEST(RankTable, TwoGoodEntriesAreTaken) {
  std::vector<RankInfo> table = twoRanks();
  const RankInfo mine = table[1];
  EXPECT_EQ(checkRankTable(&table, 1, mine, "a test"), ncclSuccess) << lastError();
}

TEST(RankTable, StringsAreEndedWithinTheirArrays) {
  std::vector<RankInfo> table = twoRanks();
  const RankInfo mine = table[0];
  memset(table[1].hostname, 'h', sizeof(table[1].hostname));
  memset(table[1].library, 'l', sizeof(table[1].library));
  ASSERT_EQ(checkRankTable(&table, 0, mine, "a test"), ncclSuccess) << lastError();
  EXPECT_EQ(strlen(table[1].hostname), sizeof(table[1].hostname) - 1);
  EXPECT_EQ(strlen(table[1].library), sizeof(table[1].library) - 1);
}

TEST(RankTable, MalformedEntriesAreRefusedWithTheRankAndTheReason) {
  struct Case {
    const char* what;
    void (*spoil)(RankInfo*);
    const char* says;
  };
  const Case cases[] = {
      {"no address", [](RankInfo* r) { r->listenAddress = SocketAddress{}; }, "listener address"},
      {"address length", [](RankInfo* r) { r->listenAddress.length = 200; }, "listener address"},
      {"negative pid", [](RankInfo* r) { r->pid = -1; }, "pid"},
      {"device", [](RankInfo* r) { r->device = -7; }, "device"},
      {"shm flag", [](RankInfo* r) { r->shmAllowed = 9; }, "yes/no"},
      {"ucx wish", [](RankInfo* r) { r->ucx = 200; }, "transport wish"},
      {"fp8", [](RankInfo* r) { r->fp8Format = 5; }, "fp8"},
      {"empty domain", [](RankInfo* r) { r->domain[0] = 0; }, "empty"},
      {"slots", [](RankInfo* r) { r->tunables.streamSlots = 0; }, "least value"},
      {"graphs", [](RankInfo* r) { r->tunables.streamGraphs = 3; }, "least value"},
      {"relay flag", [](RankInfo* r) { r->tunables.streamRelay = 2; }, "yes/no setting"},
  };
  for (const Case& c : cases) {
    std::vector<RankInfo> table = twoRanks();
    const RankInfo mine = table[0];
    c.spoil(&table[1]);
    EXPECT_EQ(checkRankTable(&table, 0, mine, "a test"), ncclInternalError) << c.what;
    const std::string said = lastError();
    EXPECT_NE(said.find("rank 1's entry"), std::string::npos) << c.what << ": " << said;
    EXPECT_NE(said.find(c.says), std::string::npos) << c.what << ": " << said;
  }
}

TEST(RankTable, OwnEntryChangedOrMissingIsRefused) {
  std::vector<RankInfo> table = twoRanks();
  const RankInfo mine = table[0];
  table[0].listenAddress.setPort(4999);
  EXPECT_EQ(checkRankTable(&table, 0, mine, "a test"), ncclInternalError);
  EXPECT_NE(std::string(lastError()).find("this rank's entry"), std::string::npos) << lastError();
  table = twoRanks();
  EXPECT_EQ(checkRankTable(&table, 2, mine, "a test"), ncclInternalError);
}
