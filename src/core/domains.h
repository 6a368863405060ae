// Vendor domains: ranks grouped by the collective library that serves them
// (or by HETCCL_DOMAIN). Every rank derives the same partition from the
// exchanged RankInfo table; members need not be contiguous, domains need
// not be of equal size, and there may be any number of them.
#pragma once

#include <string>
#include <vector>

#include "bootstrap/rank_info.h"
#include "common/types.h"

namespace hetccl {

struct Domain {
  std::string name;
  std::string backend;     // the domain's collective library
  uint32_t reducibleTypes = ~0u;  // types every member's library can reduce
  std::vector<int> members;  // global ranks, ascending
};

struct Partition {
  std::vector<Domain> domains;   // ordered by their lowest member
  std::vector<int> domainOf;     // global rank -> domain index
  std::vector<int> indexInDomain;  // global rank -> position among its domain's members
  uint32_t fp8Formats = 0;       // bit f: some rank's fp8 is Fp8Format f

  static Partition fromRanks(const std::vector<RankInfo>& ranks);
  bool single() const { return domains.size() <= 1; }
  // Every domain's members are consecutive ranks ("0,1 | 2,3,4").
  bool consecutive() const;
  // Global rank of member `index` of domain `d`.
  int member(size_t d, int index) const { return domains[d].members[static_cast<size_t>(index)]; }
  std::string describe() const;  // "host0{0,2,4} host1{1,3,5}"
  // The first domain that cannot reduce `type`, or nullptr.
  const Domain* domainUnableToReduce(ncclDataType_t type) const;
  bool fp8FormatsDiffer() const { return fp8Formats != 0 && (fp8Formats & (fp8Formats - 1)) != 0; }
  bool anyFp8Fnuz() const { return fp8Formats & (1u << static_cast<int>(Fp8Format::Fnuz)); }
};

}  // namespace hetccl
