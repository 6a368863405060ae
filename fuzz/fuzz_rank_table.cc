// libFuzzer target: a rank table as it arrives from the bootstrap root or
// a split's all-gather (src/bootstrap/rank_info.h, checkRankTable), then
// what init derives from it first (the domains). An accepted table has
// every string ended within its array and only values a rank can send;
// this rank's own entry must come back as it was sent.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "bootstrap/rank_info.h"
#include "core/domains.h"

namespace {

template <size_t N>
bool ended(const char (&text)[N]) {
  return memchr(text, 0, N) != nullptr;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 + sizeof(hetccl::RankInfo)) return 0;
  const size_t n = std::min<size_t>((size - 1) / sizeof(hetccl::RankInfo), 16);
  std::vector<hetccl::RankInfo> table(n);
  memcpy(table.data(), data + 1, n * sizeof(hetccl::RankInfo));
  const int myRank = data[0] % static_cast<int>(n + 1) - (data[0] >= 128 ? 1 : 0);  // sometimes out of range
  // This rank's own entry as it sent it: the table's, with its strings
  // ended (a rank's own always are), or a fresh one where out of range.
  hetccl::RankInfo mine{};
  if (myRank >= 0 && static_cast<size_t>(myRank) < n) mine = table[static_cast<size_t>(myRank)];
  mine.domain[sizeof(mine.domain) - 1] = mine.runtime[sizeof(mine.runtime) - 1] = 0;
  mine.library[sizeof(mine.library) - 1] = mine.hostname[sizeof(mine.hostname) - 1] = 0;
  if (hetccl::checkRankTable(&table, myRank, mine, "the fuzzer") != ncclSuccess) return 0;
  if (myRank < 0 || static_cast<size_t>(myRank) >= n) __builtin_trap();
  for (const hetccl::RankInfo& r : table) {
    if (!ended(r.domain) || !ended(r.runtime) || !ended(r.library) || !ended(r.hostname)) __builtin_trap();
    const int family = r.listenAddress.family();
    if (family != AF_INET && family != AF_INET6) __builtin_trap();
    if (r.listenAddress.length > sizeof(r.listenAddress.storage)) __builtin_trap();
  }
  const hetccl::Partition p = hetccl::Partition::fromRanks(table);
  size_t members = 0;
  for (const hetccl::Domain& d : p.domains) members += d.members.size();
  if (members != n || p.describe().empty()) __builtin_trap();
  return 0;
}
