#include "core/domains.h"

namespace hetccl {

Partition Partition::fromRanks(const std::vector<RankInfo>& ranks) {
  Partition p;
  p.domainOf.assign(ranks.size(), -1);
  p.indexInDomain.assign(ranks.size(), -1);
  for (size_t r = 0; r < ranks.size(); ++r) {
    const std::string name = ranks[r].domain;
    size_t d = 0;
    while (d < p.domains.size() && p.domains[d].name != name) ++d;
    if (d == p.domains.size()) {
      Domain domain;
      domain.name = name;
      domain.backend = ranks[r].library;
      p.domains.push_back(domain);
    }
    p.domains[d].reducibleTypes &= ranks[r].reducibleTypes;
    p.fp8Formats |= 1u << (ranks[r].fp8Format & 1u);
    p.domainOf[r] = static_cast<int>(d);
    p.indexInDomain[r] = static_cast<int>(p.domains[d].members.size());
    p.domains[d].members.push_back(static_cast<int>(r));
  }
  return p;
}

const Domain* Partition::domainUnableToReduce(ncclDataType_t type) const {
  for (const Domain& d : domains)
    if (!(d.reducibleTypes & (1u << type))) return &d;
  return nullptr;
}

bool Partition::consecutive() const {
  for (const Domain& d : domains)
    if (d.members.back() - d.members.front() + 1 != static_cast<int>(d.members.size())) return false;
  return true;
}

std::string Partition::describe() const {
  std::string s;
  for (const Domain& d : domains) {
    if (!s.empty()) s += " ";
    s += d.name + "{";
    for (size_t i = 0; i < d.members.size(); ++i) {
      if (i) s += ",";
      s += std::to_string(d.members[i]);
    }
    s += "}";
  }
  return s;
}

}  // namespace hetccl
